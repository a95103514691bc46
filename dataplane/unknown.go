package dataplane

import (
	"context"
	"time"
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

// Proposals records unknown requests of sessions in learn mode. The data
// plane declares it; the proposal store implements it. Learn returns the
// id of the proposal the request joined or opened.
type Proposals interface {
	Learn(ctx context.Context, r UnknownRequest) (id string, err error)
}
