package main

import (
	"context"
	"time"

	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/sandboxapi"
)

// proposalAccess is the sandbox API's Access over the proposal store: a
// session asks for access and waits. It holds the store, but offers the
// sandbox nothing else of it (no reject, no accept).
type proposalAccess struct{ s *proposals.Store }

var _ sandboxapi.Access = proposalAccess{}

func (a proposalAccess) Ask(ctx context.Context, session string, r sandboxapi.AccessAsk) (sandboxapi.AccessAnswer, error) {
	p, err := a.s.Ask(ctx, session, r.Method, r.Host, r.Port, r.Path, r.Justification)
	return accessAnswer(p), err
}

func (a proposalAccess) Await(ctx context.Context, session, id string, wait time.Duration) (sandboxapi.AccessAnswer, error) {
	p, err := a.s.Await(ctx, session, id, wait)
	return accessAnswer(p), err
}

// accessAnswer is what the sandbox is told of proposal p.
func accessAnswer(p proposals.Proposal) sandboxapi.AccessAnswer {
	ans := sandboxapi.AccessAnswer{ProposalID: p.ID, State: p.State, Method: p.Method, Host: p.Host, Port: p.Port,
		Template: p.Template, Reason: p.Reason, Connector: p.Connector}
	if p.Rule != nil {
		ans.Rule = &sandboxapi.AccessRule{Method: p.Rule.Method, Template: p.Rule.Template, Approval: p.Rule.Approval}
	}
	return ans
}
