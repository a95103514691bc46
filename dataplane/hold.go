package dataplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// Approval defaults; see Proxy.ApprovalHold and Proxy.ApprovalMaxBody.
const (
	defaultApprovalHold    = 60 * time.Second
	defaultApprovalMaxBody = 1 << 20
	defaultApprovalMaxHeld = 64 << 20
)

// approvalError is a held request that is not (or not yet) to be sent.
type approvalError struct {
	res    ApprovalResult
	reason policy.Reason
	msg    string
	retry  time.Duration // Retry-After for a still-pending approval
}

func (e *approvalError) Error() string { return string(e.reason) + ": " + e.msg }

// hold is the approval gate: it reads the body (bounded, within the
// budget for held bodies), refuses a request a human could not judge (an
// encoded body, ambiguous JSON keys), records an approval for exactly these
// bytes and headers, and waits for a human. On approval the request
// continues with the very bytes that were previewed; otherwise the returned
// error says why not.
func (p *Proxy) hold(r *http.Request, t *tunnel, tgt target, d policy.Decision) error {
	body, release, err := p.readHeld(r)
	if err != nil {
		return err
	}
	defer release()
	hdr := forwardedHeaders(r.Header, d.Op.Spec.Credential)
	pv, err := previewRequest(r, t.authority, tgt, d, hdr, body)
	if err != nil {
		return err
	}
	req := &ApprovalRequest{
		Session: t.sess.ID, Op: d.Op, Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: tgt.path, Digest: requestDigest(r.Method, t.authority, tgt, hdr, body), Preview: pv,
	}
	wait := p.approvalHold()
	if cs := callFrom(r.Context()); cs != nil {
		wait = cs.wait
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer context.AfterFunc(p.stopping, cancel)()
	defer cancel()
	res, err := p.Approvals.Await(ctx, req, wait)
	if errors.Is(err, ErrApprovalLimit) {
		return &limitError{msg: err.Error()}
	}
	if err != nil && res.Outcome != ApprovalPending {
		return &unavailableError{reason: policy.ReasonApprovalUnavailable, err: err}
	}
	return p.held(r, tgt, res, body)
}

// held turns a hold's outcome into nil (forward body) or the refusal.
func (p *Proxy) held(r *http.Request, tgt target, res ApprovalResult, body []byte) error {
	switch res.Outcome {
	case ApprovalApproved:
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		return nil
	case ApprovalDenied:
		return &approvalError{res: res, reason: policy.ReasonApprovalDenied, msg: "a human denied this request: " + res.Reason}
	case ApprovalConsumed:
		return &approvalError{res: res, reason: policy.ReasonApprovalConsumed,
			msg: "this approval already released an identical request; send it again to ask for a new approval"}
	case ApprovalExpired:
		return &approvalError{res: res, reason: policy.ReasonApprovalExpired,
			msg: "the approval expired before anyone decided; send the request again to ask anew"}
	}
	msg := fmt.Sprintf("%s %s waits for a human's approval (%s); retry the identical request after it is approved", r.Method, tgt.logPath(), res.ID)
	if p.stopping.Err() != nil {
		msg = fmt.Sprintf("the proxy is shutting down; %s %s still waits for a human's approval (%s), which survives the restart: retry the identical request once the proxy is back", r.Method, tgt.logPath(), res.ID)
	}
	return &approvalError{res: res, reason: policy.ReasonApprovalPending, retry: 5 * time.Second, msg: msg}
}

// Limits are the settings that may change while the proxy runs (SIGHUP).
type Limits struct {
	ApprovalHold    time.Duration // 0 keeps Proxy.ApprovalHold
	ApprovalMaxBody int64         // 0 keeps Proxy.ApprovalMaxBody
	ApprovalMaxHeld int64         // 0 keeps Proxy.ApprovalMaxHeld
}

// SetLimits replaces the runtime limits; the next request uses them.
func (p *Proxy) SetLimits(l Limits) { p.limits.Store(&l) }

func (p *Proxy) approvalHold() time.Duration {
	if l := p.limits.Load(); l != nil && l.ApprovalHold > 0 {
		return l.ApprovalHold
	}
	if p.ApprovalHold > 0 {
		return p.ApprovalHold
	}
	return defaultApprovalHold
}

func (p *Proxy) approvalMaxBody() int64 {
	if l := p.limits.Load(); l != nil && l.ApprovalMaxBody > 0 {
		return l.ApprovalMaxBody
	}
	if p.ApprovalMaxBody > 0 {
		return p.ApprovalMaxBody
	}
	return defaultApprovalMaxBody
}

func (p *Proxy) approvalMaxHeld() int64 {
	if l := p.limits.Load(); l != nil && l.ApprovalMaxHeld > 0 {
		return l.ApprovalMaxHeld
	}
	if p.ApprovalMaxHeld > 0 {
		return p.ApprovalMaxHeld
	}
	return defaultApprovalMaxHeld
}

// readHeld reads the whole body if it is at most approval.max_body bytes
// and fits, with the bodies of every other held request, in
// approval.max_held_bytes; release gives its bytes back to that budget.
func (p *Proxy) readHeld(r *http.Request) (body []byte, release func(), err error) {
	release = func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, release, nil
	}
	limit, budget := p.approvalMaxBody(), p.approvalMaxHeld()
	if r.ContentLength > limit {
		return nil, release, deny(policy.ReasonApprovalBodyTooLarge, "the body is %d bytes; requests that need approval may carry at most %d", r.ContentLength, limit)
	}
	hr := &heldReader{r: io.LimitReader(r.Body, limit+1), held: &p.heldBytes, budget: budget}
	release = func() { p.heldBytes.Add(-hr.taken) }
	b, err := io.ReadAll(hr)
	var se *stalledError
	switch {
	case hr.full:
		release()
		return nil, func() {}, &limitError{msg: fmt.Sprintf("requests waiting for approval already hold %d bytes of bodies in memory, "+
			"the most approval.max_held_bytes (%d) allows; retry once pending approvals are decided", p.heldBytes.Load(), budget)}
	case errors.As(err, &se):
		release()
		return nil, func() {}, se
	case err != nil:
		release()
		return nil, func() {}, &DenyError{Reason: policy.ReasonBadRequest, Message: "reading the request body failed: " + err.Error()}
	case int64(len(b)) > limit:
		release()
		return nil, func() {}, deny(policy.ReasonApprovalBodyTooLarge, "the body is larger than %d bytes, the most a request that needs approval may carry", limit)
	}
	return b, release, nil
}

// heldReader counts what it reads against the budget for held bodies.
type heldReader struct {
	r      io.Reader
	held   *atomic.Int64
	budget int64
	taken  int64
	full   bool
}

func (h *heldReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if n > 0 {
		if h.held.Add(int64(n)) > h.budget {
			h.held.Add(-int64(n))
			h.full = true
			return 0, errHeldFull
		}
		h.taken += int64(n)
	}
	return n, err
}

var errHeldFull = errors.New("the budget for held bodies is spent")

// limitError is a held request refused because a limit on approvals is
// reached: 429 approval_limit.
type limitError struct{ msg string }

func (e *limitError) Error() string { return string(policy.ReasonApprovalLimit) + ": " + e.msg }

// requestDigest binds an approval to method, target, every forwarded
// header and the body: each part length-prefixed, so no two requests
// share a digest.
func requestDigest(method string, a policy.Authority, tgt target, hdr []PreviewHeader, body []byte) string {
	h := sha256.New()
	parts := []string{method, a.String(), tgt.path, tgt.query, strconv.Itoa(len(hdr))}
	for _, x := range hdr {
		parts = append(parts, x.Name, x.Value)
	}
	for _, part := range parts {
		io.WriteString(h, strconv.Itoa(len(part))+":"+part+"\n")
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// isApprovalError reports whether err is a held request's outcome.
func isApprovalError(err error) (*approvalError, bool) {
	var ae *approvalError
	ok := errors.As(err, &ae)
	return ae, ok
}
