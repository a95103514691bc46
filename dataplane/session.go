package dataplane

import (
	"errors"
	"slices"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// ErrProxyAuth is wrapped by every Sessions.Authenticate failure: an unknown,
// deleted or expired session, a wrong token, or an empty one. The proxy maps it
// to 407 Proxy Authentication Required and never says which of these it was.
var ErrProxyAuth = errors.New("proxy authentication failed")

// ErrSessionsUnavailable is wrapped, together with ErrProxyAuth, by an
// Authenticate or Live failure that says nothing about the session: the
// implementation cannot tell right now whether any session is live (a
// fleet node cut off from its shared state). The proxy still refuses and
// cuts the session's tunnels (it cannot vouch for them), but answers 503
// not_ready, so the client is not sent to check credentials that are fine.
var ErrSessionsUnavailable = errors.New("sessions cannot be vouched for right now")

// Session is what the data plane needs to know about an authenticated session.
// Values are immutable once returned by Sessions.Authenticate.
type Session struct {
	// ID is the session's public identifier (the user part of the proxy URL).
	ID string
	// Name is the optional human label given at creation.
	Name string
	// CA signs the leaf certificates presented to this session's clients.
	CA *ca.Authority
	// Connectors lists the connector FQNs the session may use. Nil means every
	// installed connector.
	Connectors []string
	// Created is when the session was created (whole seconds): its budget
	// windows start there.
	Created time.Time
	// Limits bounds the session's models and budgets (Proxy.Budgets
	// enforces them); nil means none.
	Limits *policy.Limits
	// Unknown is what the session does with a request no operation
	// matches: UnknownDeny (or "") or UnknownLearn (unknown.go).
	Unknown string
}

// MayUse reports whether the session may use connector fqn: its scope
// names it, or it has no scope (nil Connectors).
func (s *Session) MayUse(fqn string) bool {
	return s.Connectors == nil || slices.Contains(s.Connectors, fqn)
}

// Sessions authenticates the credentials a client presents in
// Proxy-Authorization. The data plane declares it; the control plane
// implements it.
type Sessions interface {
	// Authenticate returns the live session whose id and token match. Every
	// failure wraps ErrProxyAuth (and ErrSessionsUnavailable when no
	// session can be checked now). Implementations compare tokens in constant
	// time and never accept an empty token.
	Authenticate(id, token string) (*Session, error)
	// Live returns nil while session id may still be used, and an error
	// wrapping ErrProxyAuth saying why not once it was deleted or has
	// expired (or ErrSessionsUnavailable too, when it cannot tell). The
	// proxy calls it on every request and every few hundred milliseconds
	// per session with open tunnels: it must read only memory.
	Live(id string) error
}
