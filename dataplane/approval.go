package dataplane

import (
	"context"
	"errors"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// ApprovalRequest is what a held request asks a human to approve. Digest
// binds the approval to exactly these bytes: what is approved is what is
// sent, once.
type ApprovalRequest struct {
	Session string
	Op      *policy.Operation
	Method  string
	Host    string
	Port    int
	Path    string // escaped, as sent
	// Digest is hex SHA-256 over method, canonical target (host:port, path,
	// raw query), every forwarded header and the body; identical retries
	// have identical digests.
	Digest string
	// Preview is what the approver sees: the whole request but the
	// credential.
	Preview Preview
}

// ApprovalState is where an approval stands, as stored and as the admin API
// reports it.
type ApprovalState string

// Approval states.
const (
	// ApprovalStatePending: waiting for a human decision.
	ApprovalStatePending ApprovalState = "pending"
	// ApprovalStateApproved: approved, not yet used by the request it binds.
	ApprovalStateApproved ApprovalState = "approved"
	// ApprovalStateDenied: a human denied it.
	ApprovalStateDenied ApprovalState = "denied"
	// ApprovalStateExpired: no decision (or, once approved, no retry) within
	// the TTL.
	ApprovalStateExpired ApprovalState = "expired"
	// ApprovalStateConsumed: approved and used; the request was forwarded.
	ApprovalStateConsumed ApprovalState = "consumed"
)

// ApprovalOutcome is how a hold ended.
type ApprovalOutcome uint8

const (
	// ApprovalPending: no decision within the hold; the client is told to
	// retry the identical request later.
	ApprovalPending ApprovalOutcome = iota
	// ApprovalApproved: approved, and this caller consumed the approval: it
	// must forward the request exactly once.
	ApprovalApproved
	// ApprovalDenied: a human denied it (Reason says why).
	ApprovalDenied
	// ApprovalConsumed: approved, but an identical request already used the
	// approval; this one is not forwarded.
	ApprovalConsumed
	// ApprovalExpired: the approval's TTL passed without a decision.
	ApprovalExpired
)

// ApprovalResult is the outcome of Await.
type ApprovalResult struct {
	ID        string
	Outcome   ApprovalOutcome
	Reason    string // the denier's reason
	ReviewURL string // where a human can decide, if the daemon serves one
}

// ErrApprovalLimit is wrapped by Approvals.Await's error when recording
// one more pending approval would pass a limit (pending approvals per
// session); the request is refused 429 approval_limit with the error's
// message.
var ErrApprovalLimit = errors.New("approval limit reached")

// Approvals records approvals and waits for human decisions. The data plane
// declares it; the control plane implements it over persistent state.
type Approvals interface {
	// Await records an approval for req, or joins the pending or approved
	// one with the same session and digest (an identical retry), and waits up
	// to hold for a decision. Approval is consumed with a compare-and-swap:
	// among concurrent identical requests exactly one gets ApprovalApproved.
	// ctx ending returns ApprovalPending with ctx's error.
	Await(ctx context.Context, req *ApprovalRequest, hold time.Duration) (ApprovalResult, error)
	// Covers returns nil if approval id is an action approval of session,
	// for an action of connector (FQN), that a human approved and its
	// runner consumed: the runner then issues the action's operations as
	// calls with Call.ApprovedBy. Anything else is an error.
	Covers(ctx context.Context, id, session, connector string) error
}
