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
	"time"

	"github.com/aileronhq/aileron/policy"
)

// Approval defaults; see Proxy.ApprovalHold and Proxy.ApprovalMaxBody.
const (
	defaultApprovalHold    = 60 * time.Second
	defaultApprovalMaxBody = 1 << 20
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
func (p *Proxy) hold(x *exchange, d policy.Decision) error {
	r, t, tgt := x.in, x.t, x.tgt
	body, release, err := p.heldBody(x)
	if err != nil {
		return err
	}
	defer release()
	if g, ok := parseGitPush(r, body); ok {
		x.git = g // refused below? then in git's terms, with the approval id
	}
	hdr := forwardedHeaders(r.Header, d.Op)
	pv, err := previewRequest(r, t.authority, tgt, d, hdr, body)
	if err != nil {
		return err
	}
	if d.Op == nil { // an unknown request (ask): the human may accept its proposal as a rule instead
		pv.ProposalID = x.proposal
	}
	req := &ApprovalRequest{
		Session: t.sess.ID, Op: d.Op, Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: tgt.path, Digest: requestDigest(r.Method, t.authority, tgt, pv.Credential, hdr, body), Preview: pv,
	}
	if !p.held.enter(t.sess.ID) {
		return &limitError{msg: fmt.Sprintf("this session already has %d requests waiting for approval; retry once some of them are decided", maxHeldRequests)}
	}
	defer p.held.leave(t.sess.ID)
	ctx, cancel := context.WithCancel(r.Context())
	defer context.AfterFunc(p.stopping, cancel)()
	defer cancel()
	res, err := p.Approvals.Await(ctx, req, x.terms.wait)
	if errors.Is(err, ErrApprovalLimit) {
		return &limitError{msg: err.Error()}
	}
	if err != nil && (res.Outcome != ApprovalPending || ctx.Err() == nil) {
		// Pending with an error is the client gone or the proxy stopping;
		// any other error (the approvals' state unreachable) refuses.
		return &unavailableError{reason: policy.ReasonApprovalUnavailable, err: err}
	}
	if err := p.outcome(r, tgt, res, body); err != nil {
		return err
	}
	x.approval = res.ID
	return nil
}

// outcome turns a hold's outcome into nil (forward body) or the refusal.
func (p *Proxy) outcome(r *http.Request, tgt target, res ApprovalResult, body []byte) error {
	switch res.Outcome {
	case ApprovalApproved:
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.TransferEncoding, r.Trailer = nil, nil // exactly the previewed bytes, with a Content-Length
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
	msg := fmt.Sprintf("%s %s waits for a human's approval (%s); after it is approved, send the identical request again "+
		"(the same target, headers and body, byte for byte)", r.Method, tgt.logPath(), res.ID)
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
	// ApprovalMaxHeldPerSession: 0 keeps Proxy.ApprovalMaxHeldPerSession.
	ApprovalMaxHeldPerSession int64
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

// requestDigest binds an approval to method, target, the credential the
// proxy adds (the preview's note: "" for none), every forwarded header and
// the body: each part length-prefixed, so no two requests share a digest.
// An approval given for a request previewed without a credential (an
// unknown one) never releases it once an operation adding one decides it.
func requestDigest(method string, a policy.Authority, tgt target, cred string, hdr []PreviewHeader, body []byte) string {
	h := sha256.New()
	parts := []string{method, a.String(), tgt.path, tgt.query, cred, strconv.Itoa(len(hdr))}
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
