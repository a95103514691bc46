package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// What a session does with a request no operation matches (Session.Unknown).
// The empty string means UnknownDeny.
const (
	// UnknownDeny refuses it (host_not_allowed, no_matching_operation), as
	// always.
	UnknownDeny = "deny"
	// UnknownLearn refuses it too, nothing is sent, and records it as a
	// proposal (Proxy.Proposals) whose id the refusal carries.
	UnknownLearn = "learn"
	// UnknownAsk holds it for a human, as an approval-gated request is
	// held (its preview names the proposal it was learned into): sent once
	// if approved, decided by the new rule if the proposal is accepted,
	// refused with the human's reason if denied.
	UnknownAsk = "ask"
)

// UnknownRequest is a request of a session in learn mode that no operation
// matched, as the proposal store records it. It holds no query, header or
// body value.
type UnknownRequest struct {
	Session string
	Method  string
	// Host is canonical, without port.
	Host string
	Port int
	// Path is the escaped path as sent, without the query.
	Path string
	// AuditID is the refusal's audit record.
	AuditID string
	// Credential reports that the request carried a credential: an
	// Authorization header or a session placeholder anywhere it looks.
	Credential bool
	Time       time.Time
}

// Proposals records unknown requests of sessions in learn or ask mode.
// The data plane declares it; the proposal store implements it. Record
// returns the proposal the request joined or opened.
type Proposals interface {
	Record(ctx context.Context, r UnknownRequest) (Learned, error)
}

// Learned is the proposal an unknown request joined or opened.
type Learned struct {
	ID string
	// Rejected reports that a human rejected the proposal (Reason says
	// why): the request is refused with that reason, never held again.
	Rejected bool
	Reason   string
}

// learn records a request the gate refused as a proposal and returns it, when the session is in learn mode (or in ask mode, for a request
// that is not held: ask), a proposal store is set and the policy refused
// the request only because no operation matches it (unknown).
// Otherwise, or when the store fails (logged; the request is refused all
// the same), it returns the zero Learned. Nothing is ever sent for the request.
func (p *Proxy) learn(x *exchange, d policy.Decision, err error) Learned {
	if p.Proposals == nil || !learning(p.unknownMode(x.t.sess)) || !p.unknown(x, d) {
		return Learned{}
	}
	var de *DenyError
	if !errors.As(err, &de) || de.Reason != d.Reason {
		return Learned{} // refused for another reason first (a call's terms)
	}
	return p.propose(x)
}

// noteProposal adds to the message of err, the refusal of a request no
// operation matches (or of a placeholder sent on one), that it was
// recorded as proposal l, and how an agent asks for it (or, for a
// proposal a human rejected, why), so that a human or an agent reading
// only the message knows. Any other err, or an empty l, is returned as it
// is.
func noteProposal(err error, l Learned) error {
	var de *DenyError
	if l.ID == "" || !errors.As(err, &de) {
		return err
	}
	switch de.Reason {
	case policy.ReasonHostNotAllowed, policy.ReasonNoMatchingOperation, policy.ReasonPlaceholder:
		if l.Rejected {
			return &DenyError{Reason: de.Reason, Message: de.Message + "; a human rejected requests like this one (proposal " +
				l.ID + "): " + l.Reason}
		}
		return &DenyError{Reason: de.Reason, Message: de.Message + "; recorded as proposal " + l.ID +
			" for a human to decide (to ask for access now, saying why: the MCP tool request_access, or POST $AILERON_API_URL/access-requests)"}
	}
	return err
}

// learning reports whether a session in mode records unknown requests as
// proposals: learn, and ask (whose requests are held too, where they can
// be: ask.go).
func learning(mode string) bool { return mode == UnknownLearn || mode == UnknownAsk }

// unknownRefusal reports whether policy refused d only because no
// operation matches the request: host_not_allowed, no_matching_operation.
func unknownRefusal(d policy.Decision) bool {
	return d.Verdict == policy.Deny && (d.Reason == policy.ReasonHostNotAllowed || d.Reason == policy.ReasonNoMatchingOperation)
}

// unknown reports whether x's request, which policy decided d, is an
// unknown request: refused only because no operation matches it
// (unknownRefusal), and served by no operation of a connector the
// session's scope leaves out. A request such an operation serves is
// refused for the scope (the policy words it as if the connector were not
// installed), so it is never learned, held or sent once.
func (p *Proxy) unknown(x *exchange, d policy.Decision) bool {
	if !unknownRefusal(d) {
		return false
	}
	if p.sessionScope(x.t.sess) == nil {
		return true // every connector is in scope
	}
	r, t := x.in, x.t
	all := p.Policy.Load().Decide(policy.Args{Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: x.tgt.path, Step: x.terms.step})
	return all.Verdict == policy.Deny
}

// propose hands x's request to the proposal store and returns the
// proposal it joined or opened; the zero Learned when the store fails
// (logged).
func (p *Proxy) propose(x *exchange) Learned {
	r, t := x.in, x.t
	l, err := p.Proposals.Record(r.Context(), UnknownRequest{
		Session: t.sess.ID, Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: x.tgt.path, AuditID: x.rec.AuditID,
		Credential: r.Header.Get("Authorization") != "" || inject.ContainsPlaceholder(r),
		Time:       x.rec.Start,
	})
	if err != nil {
		p.log.Error().Err(err).Str("session", t.sess.ID).Str("audit_id", x.rec.AuditID).Msg("an unknown request could not be recorded as a proposal")
		return Learned{}
	}
	return l
}

// currentSessions is implemented by Sessions that can return a session as
// it is now (sessions.Manager), from memory.
type currentSessions interface {
	Session(id string) (*Session, error)
}

// unknownMode is sess's unknown-request mode now: a mode changed while the
// session's tunnels are open applies from their next request. Sessions
// that cannot say (or fail to) leave the mode sess was authenticated with.
func (p *Proxy) unknownMode(sess *Session) string {
	if cs, ok := p.Sessions.(currentSessions); ok {
		if now, err := cs.Session(sess.ID); err == nil && now != nil {
			return now.Unknown
		}
	}
	return sess.Unknown
}

// learnsHost reports whether a CONNECT the policy refused (d) is
// intercepted instead, so that its requests can be learned (and, in ask
// mode, held for a human): the session is in learn or ask mode, a
// proposal store is set, no connector names the host (host_not_allowed)
// and it is a name or a public address (a private, loopback or other
// special-purpose address is refused as always). Its requests meet the
// same refusal inside the tunnel; nothing is dialled unless a human
// approves one.
func (p *Proxy) learnsHost(sess *Session, auth policy.Authority, d policy.Decision) bool {
	if p.Proposals == nil || d.Reason != policy.ReasonHostNotAllowed || !learning(p.unknownMode(sess)) {
		return false
	}
	if ip, err := netip.ParseAddr(auth.Host); err == nil && Classify(ip) != "" {
		return false
	}
	return true
}
