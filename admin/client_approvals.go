package admin

import (
	"context"
	"net/http"
	"net/url"

	"github.com/aileronhq/aileron/approvals"
)

// ListApprovals lists approvals, filtered by state ("pending", "approved",
// "denied", …) and session when non-empty.
func (c *Client) ListApprovals(ctx context.Context, f approvals.Filter) ([]approvals.Approval, error) {
	q := url.Values{}
	if f.State != "" {
		q.Set("state", string(f.State))
	}
	if f.Session != "" {
		q.Set("session", f.Session)
	}
	path := "/v1/approvals"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out approvalList
	err := c.do(ctx, http.MethodGet, path, nil, &out)
	return out.Approvals, err
}

// GetApproval returns one approval with its preview.
func (c *Client) GetApproval(ctx context.Context, id string) (approvals.Approval, error) {
	var ap approvals.Approval
	err := c.do(ctx, http.MethodGet, "/v1/approvals/"+url.PathEscape(id), nil, &ap)
	return ap, err
}

// ApproveApproval approves a pending approval, recording by as the decider,
// and returns it as decided.
func (c *Client) ApproveApproval(ctx context.Context, id, by string) (approvals.Approval, error) {
	var ap approvals.Approval
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/approve", DecideRequest{By: by}, &ap)
	return ap, err
}

// DenyApproval denies a pending approval with a reason (required), recording
// by as the decider, and returns it as decided.
func (c *Client) DenyApproval(ctx context.Context, id, by, reason string) (approvals.Approval, error) {
	var ap approvals.Approval
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/deny", DecideRequest{By: by, Reason: reason}, &ap)
	return ap, err
}
