package dataplane

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// Budgets enforces the limits of sessions that have them (Session.Limits):
// the models a model call may ask for, and budgets of tokens, requests
// and request bytes. The data plane declares it; package budgets
// implements it over the shared state. Proxy.Budgets nil means no budget
// stage: a session with limits is then refused (503 not_ready), never
// served unbounded.
type Budgets interface {
	// Admit is asked, for a session with limits, about every request
	// policy allows or holds for approval: after the decision, before the
	// approval gate and before anything is sent. It returns nil, having
	// counted the request, or the error to refuse it with: a *BudgetError,
	// or any other when it cannot tell (the request is then refused 503).
	Admit(ctx context.Context, s *Session, a Admission) error
	// Charge adds what an admitted request used, once its exchange ended
	// (or a WebSocket turn of it did).
	Charge(ctx context.Context, s *Session, u Spent) error
	// Check refuses as Admit would, counting nothing: it is asked about a
	// request that is to wait for a human (and about each retry polling
	// for one), which Admit counts once it is approved.
	Check(ctx context.Context, s *Session, a Admission) error
}

// Admission is what Budgets.Admit learns of a request.
type Admission struct {
	// ModelCall: the matched operation names a model API (Spec.Usage).
	ModelCall bool
	// Model is the model the call asks for, as the record has it; "" when
	// it could not be read.
	Model string
	// Upgrade: the request opens a WebSocket, whose frames the proxy
	// passes without gating them.
	Upgrade bool
}

// Spent is what an admitted request used.
type Spent struct {
	// Tokens: input plus output tokens as the provider reported them.
	Tokens int64
	// Bytes: the request's head (as HTTP/1.1 text, the credential
	// included) and body bytes, when it was sent upstream.
	Bytes int64
}

// BudgetError is a request a session's limits refuse (Budgets.Admit):
// Reason ReasonModelNotAllowed is answered 403, ReasonBudgetExhausted 429
// with Retry-After when RetryAfter (rounded up to seconds) is positive,
// none when only the session's end would free the budget.
type BudgetError struct {
	Reason     policy.Reason
	Message    string
	RetryAfter time.Duration
}

func (e *BudgetError) Error() string { return string(e.Reason) + ": " + e.Message }

// budgetRefusal is the refusal of a BudgetError.
func budgetRefusal(e *BudgetError) Refusal {
	if e.Reason == policy.ReasonBudgetExhausted {
		return Refusal{Status: http.StatusTooManyRequests, Class: ClassLimited, Reason: e.Reason, Message: e.Message,
			RetryAfter: (e.RetryAfter + time.Second - 1).Truncate(time.Second)} // whole seconds, rounded up
	}
	return mkRefusal(http.StatusForbidden, ClassCapabilityDenied, e.Reason, e.Message)
}

// admit asks Budgets about a request policy did not deny, and counts it.
func (p *Proxy) admit(x *exchange, d policy.Decision) error {
	return p.askBudgets(x, d, true)
}

// checkBudgets asks Budgets about a request that is to wait for a human,
// counting nothing: admit counts it once approved, so polling for a
// pending approval costs no request.
func (p *Proxy) checkBudgets(x *exchange, d policy.Decision) error {
	return p.askBudgets(x, d, false)
}

func (p *Proxy) askBudgets(x *exchange, d policy.Decision, count bool) error {
	s := x.t.sess
	if s == nil || s.Limits == nil {
		return nil
	}
	if p.Budgets == nil {
		return &unavailableError{reason: policy.ReasonNotReady, err: fmt.Errorf("session %s has limits and this proxy has no budget stage", s.ID)}
	}
	a := Admission{ModelCall: d.Op != nil && d.Op.Spec.Usage != "", Model: x.rec.Model, Upgrade: upgradeType(x.in.Header) != ""}
	ask := p.Budgets.Check
	if count {
		ask = p.Budgets.Admit
	}
	if err := ask(x.in.Context(), s, a); err != nil {
		var be *BudgetError
		if errors.As(err, &be) {
			return be
		}
		return &unavailableError{reason: policy.ReasonNotReady, err: err}
	}
	x.admitted = x.admitted || count
	return nil
}

// chargeTimeout bounds a charge, which runs after the client's request
// may have ended.
const chargeTimeout = 5 * time.Second

// charge hands what an admitted request used, once it ended, to Budgets:
// the tokens on its record and, when it was handed to the upstream, its
// head and body bytes.
//
// A model call whose successful answer reported no usage (a stream asked
// without usage, a batch or background job, a client that left before
// the final event) cannot be counted; under a token budget it is charged
// the whole budget, so the budget fails closed rather than open.
func (p *Proxy) charge(x *exchange) {
	u := Spent{Tokens: satAdd(x.rec.InputTokens, x.rec.OutputTokens)}
	if x.unreported && x.t.sess.Limits != nil && x.t.sess.Limits.MaxTokens > 0 {
		u.Tokens = x.t.sess.Limits.MaxTokens
		p.log.Warn().Str("event", "proxy.usage_unreported").Str("audit_id", x.rec.AuditID).Str("session", x.t.sess.ID).
			Msg("a model call's answer reported no usage; its session's whole token budget is charged")
	}
	if !x.sent.IsZero() && x.out != nil {
		u.Bytes = headBytes(x.out) + x.body.bytes()
	}
	p.spend(x, u)
}

// spend charges u to x's session if Budgets admitted x (a WebSocket's
// turns are charged with it as each ends). A failure is logged: the
// request is gone, and the next one meets the stage again.
func (p *Proxy) spend(x *exchange, u Spent) {
	if !x.admitted || p.Budgets == nil || (u.Tokens <= 0 && u.Bytes <= 0) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.in.Context()), chargeTimeout)
	defer cancel()
	if err := p.Budgets.Charge(ctx, x.t.sess, u); err != nil {
		p.log.Error().Str("event", "proxy.budget_charge_failed").Str("audit_id", x.rec.AuditID).
			Str("session", x.t.sess.ID).Err(err).Msg("could not charge a request to its session's budgets")
	}
}

// headBytes is the size of out's head as HTTP/1.1 text: request line,
// Host and every header line, and the blank line.
func headBytes(out *http.Request) int64 {
	n := len(out.Method) + 1 + len(out.URL.RequestURI()) + len(" HTTP/1.1\r\n") + len("Host: \r\n") + len(out.URL.Host) + 2
	for k, vv := range out.Header {
		for _, v := range vv {
			n += len(k) + 2 + len(v) + 2
		}
	}
	if out.ContentLength > 0 && out.Header.Get("Content-Length") == "" {
		n += len("Content-Length: \r\n") + len(strconv.FormatInt(out.ContentLength, 10))
	}
	return int64(n)
}

// satAdd adds two token counts, saturating instead of wrapping (counts
// come from the upstream).
func satAdd(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
