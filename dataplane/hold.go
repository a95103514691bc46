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
	"strings"
	"time"

	"github.com/aileronhq/aileron/audit"
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

// hold is the approval gate: it reads the body (bounded), records an
// approval for exactly these bytes, and waits for a human. On approval the
// request continues with the very bytes that were previewed; otherwise the
// returned error says why not.
func (p *Proxy) hold(r *http.Request, t *tunnel, tgt target, d policy.Decision) error {
	body, err := readBounded(r, p.approvalMaxBody())
	if err != nil {
		return err
	}
	req := &ApprovalRequest{
		Session: t.sess.ID, Op: d.Op, Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: tgt.path, Digest: requestDigest(r.Method, t.authority, tgt, body),
		Preview: preview(r.Method, t.authority, tgt, d, body),
	}
	wait := p.approvalHold()
	if cs := callFrom(r.Context()); cs != nil {
		wait = cs.wait
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer context.AfterFunc(p.stopping, cancel)()
	defer cancel()
	res, err := p.Approvals.Await(ctx, req, wait)
	if err != nil && res.Outcome != ApprovalPending {
		return &unavailableError{reason: policy.ReasonApprovalUnavailable, err: err}
	}
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

// readBounded reads the whole body if it is at most limit bytes.
func readBounded(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, deny(policy.ReasonApprovalBodyTooLarge, "the body is %d bytes; requests that need approval may carry at most %d", r.ContentLength, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	var se *stalledError
	if errors.As(err, &se) {
		return nil, se
	}
	if err != nil {
		return nil, &DenyError{Reason: policy.ReasonBadRequest, Message: "reading the request body failed: " + err.Error()}
	}
	if int64(len(b)) > limit {
		return nil, deny(policy.ReasonApprovalBodyTooLarge, "the body is larger than %d bytes, the most a request that needs approval may carry", limit)
	}
	return b, nil
}

// requestDigest binds an approval to method, target and body.
func requestDigest(method string, a policy.Authority, tgt target, body []byte) string {
	h := sha256.New()
	for _, part := range []string{method, a.String(), tgt.path, tgt.query} {
		io.WriteString(h, strconv.Itoa(len(part))+":"+part+"\n")
	}
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// preview describes the request for the approver: the operation, and its
// declared inputs decoded from the path, query or JSON body, each redacted
// as the spec's audit[] says for the same name (kept otherwise).
func preview(method string, a policy.Authority, tgt target, d policy.Decision, body []byte) Preview {
	op := d.Op
	pv := Preview{Connector: op.FQN, Version: op.Version, Tool: op.Tool, Operation: op.Spec.Name,
		Summary: op.Spec.Summary, Method: method, Host: a.String(), Path: tgt.logPath(), BodyBytes: len(body)}
	redact := map[string]string{}
	for _, f := range op.Spec.Audit {
		if _, name, ok := strings.Cut(f.Source, "."); ok {
			redact[name] = f.Redact
		}
	}
	var fields []audit.Field
	for name := range d.Params {
		fields = append(fields, audit.Field{Name: name, Source: "path." + name, Redact: redactOr(redact, name)})
	}
	for _, in := range op.Spec.Inputs {
		src := "body." + in.Name
		if method == http.MethodGet || method == http.MethodDelete || method == http.MethodHead {
			src = "query." + in.Name
		}
		fields = append(fields, audit.Field{Name: in.Name, Source: src, Redact: redactOr(redact, in.Name)})
	}
	pv.Inputs = audit.Extract(fields, d.Params, tgt.query, body)
	return pv
}

func redactOr(redact map[string]string, name string) string {
	if r, ok := redact[name]; ok {
		return r
	}
	return audit.RedactKeep
}

// isApprovalError reports whether err is a held request's outcome.
func isApprovalError(err error) (*approvalError, bool) {
	var ae *approvalError
	ok := errors.As(err, &ae)
	return ae, ok
}
