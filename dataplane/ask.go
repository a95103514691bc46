package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// Ask mode (UnknownAsk): a request no operation matches is learned into a
// proposal, as in learn mode, and held for a human through the approval
// gate's own hold (hold.go: the body read within the budget for held
// bodies, the faithful preview, the digest, identical requests joining one
// approval, the per-session limit), its preview naming the proposal and no
// operation. Approved, it is decided anew under the policy and the
// session as they are now: a rule the human accepted meanwhile decides it
// (this approval is its approval); if still no operation matches, it is
// sent once, exactly as previewed, with no credential (unknown_approved).
// Denied, the client gets approval_denied with the human's reason.

// asks reports whether x's request, which policy decided d, is held for a
// human as an unknown request: a proxy client's request, not yet asked
// about, that policy refused only because no operation matches it (and
// no connector out of the session's scope serves it: unknown), to a
// name or a public address, carrying no placeholder (which only an
// operation bound to a credential can swap: it is refused and learned), of
// a session in ask mode, on a proxy with approvals and a proposal store.
// Without approvals a session in ask mode is in learn mode.
func (p *Proxy) asks(x *exchange, d policy.Decision) bool {
	if x.asked != "" || !x.terms.client || p.Approvals == nil || p.Proposals == nil || !p.unknown(x, d) {
		return false
	}
	if ip, err := netip.ParseAddr(x.t.authority.Host); err == nil && Classify(ip) != "" {
		return false
	}
	return !inject.ContainsPlaceholder(x.in) && p.unknownMode(x.t.sess) == UnknownAsk
}

// ask learns x's request into a proposal and holds it for a human. nil
// means a human approved it and this request took the approval (x.asked
// names it); the caller decides it anew (decideNow). Otherwise the
// refusal: the hold's (pending, denied, limit…), or d's own when the
// proposal store failed (logged), as in deny mode.
func (p *Proxy) ask(x *exchange, d policy.Decision) error {
	l := p.propose(x)
	if x.proposal = l.ID; x.proposal == "" {
		return &DenyError{Reason: d.Reason, Message: d.Message}
	}
	if l.Rejected { // a human said no to requests like this one: not asked again
		return &DenyError{Reason: policy.ReasonApprovalDenied, Message: fmt.Sprintf(
			"a human rejected requests like this one (proposal %s): %s; nothing was sent", l.ID, l.Reason)}
	}
	if err := checkUpgrade(x.in, nil); err != nil { // never sent as one: no operation allows it
		return err
	}
	if err := p.checkBudgets(x, d); err != nil { // counted once approved (gate)
		return err
	}
	if err := p.hold(x, d); err != nil {
		return err
	}
	x.asked = x.approval
	return nil
}

// decideNow decides x's request again under the policy as it is now, for
// the session's connectors as they are now: once a human accepted the
// request's proposal as a rule, the connector it went into is installed,
// reloaded and added to the session.
func (p *Proxy) decideNow(x *exchange) policy.Decision { return p.decide(x) }

// asked notes on an allowed record that a human approved the request as
// an unknown one (x.asked): its approval and proposal, and, when still no
// operation matches it (sent once), the decision allow_after_approval with
// the reason unknown_approved.
func (rec *Record) asked(x *exchange, d policy.Decision) {
	if x.asked == "" {
		return
	}
	if rec.Details == nil {
		rec.Details = map[string]string{}
	}
	rec.Details["approval_id"], rec.Details["proposal_id"] = x.asked, x.proposal
	if d.Verdict == policy.Deny {
		rec.Name = audit.EventProxied
		rec.Decision = policy.AllowAfterApproval.String()
		rec.Reason = string(policy.ReasonUnknownApproved)
	}
}
