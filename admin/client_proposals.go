package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/aileronhq/aileron/proposals"
)

// ListProposals lists the proposals of session (every session when empty).
func (c *Client) ListProposals(ctx context.Context, session string) ([]proposals.Proposal, error) {
	path := "/v1/proposals"
	if session != "" {
		path += "?" + url.Values{"session": {session}}.Encode()
	}
	var out proposalList
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Proposals, err
}

// GetProposal returns one proposal.
func (c *Client) GetProposal(ctx context.Context, id string) (proposals.Proposal, error) {
	var p proposals.Proposal
	err := c.do(ctx, http.MethodGet, "/v1/proposals/"+url.PathEscape(id), nil, &p)
	return p, err
}

// RejectProposal rejects an open proposal with a reason (required),
// recording by as the decider, and returns it as decided.
func (c *Client) RejectProposal(ctx context.Context, id, by, reason string) (proposals.Proposal, error) {
	var p proposals.Proposal
	err := c.do(ctx, http.MethodPost, "/v1/proposals/"+url.PathEscape(id)+"/reject", RejectRequest{By: by, Reason: reason}, &p)
	return p, err
}

// AcceptProposal accepts an open proposal as a rule of a learned
// connector (see AcceptRequest) and says what was installed and where.
func (c *Client) AcceptProposal(ctx context.Context, id string, req AcceptRequest) (Acceptance, error) {
	var out Acceptance
	err := c.do(ctx, http.MethodPost, "/v1/proposals/"+url.PathEscape(id)+"/accept", req, &out)
	return out, err
}

// AcceptSessionProposals accepts every open proposal of a session into one
// learned connector.
func (c *Client) AcceptSessionProposals(ctx context.Context, req AcceptSessionRequest) (Acceptance, error) {
	var out Acceptance
	err := c.do(ctx, http.MethodPost, "/v1/proposals/accept", req, &out)
	return out, err
}
