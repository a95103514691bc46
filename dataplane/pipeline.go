package dataplane

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// outbound is the per-request state the forwarding stage needs, carried in
// the inbound request's context.
type outbound struct {
	rec      *Record
	sess     *Session
	op       *policy.Operation
	target   *url.URL
	body     *bodyClock       // the request body's deadlines; nil without a body
	red      *inject.Redactor // masks the injected secret; nil without one
	sentAt   time.Time
	rejected bool
}

type outboundKey struct{}

// serveInner is the one request path for every request inside an
// intercepted tunnel: canonical target → policy.Decide → (approval: a later
// stage) → record → forward (inject on the outbound copy, SSRF-safe dial,
// verified TLS, redact echoes) → record.
func (p *Proxy) serveInner(w http.ResponseWriter, r *http.Request) {
	t, ok := r.Context().Value(tunnelKey{}).(*tunnel)
	if !ok {
		WriteRefusal(w, mkRefusal(http.StatusInternalServerError, ClassInternal, policy.ReasonInternal, "request arrived without a tunnel"))
		return
	}
	p.serveRequest(w, r, t)
}

// serveRequest serves r, which arrived in tunnel t.
func (p *Proxy) serveRequest(w http.ResponseWriter, r *http.Request, t *tunnel) {
	if t.api {
		p.serveAPI(w, r, t)
		return
	}
	rec := p.newRecord(r)
	rec.Session, rec.Host, rec.Port = t.sess.ID, t.authority.Host, t.authority.Port
	clock := p.clockBody(w, r)
	refuse := func(err error) {
		rec.BytesIn = clock.bytes()
		p.refuse(w, rec, err)
		hangUpRevoked(w, t, err)
	}
	tgt, err := innerTarget(t, r)
	rec.Path = tgt.logPath()
	if err == nil {
		err = p.checkLive(w, t)
	}
	if err != nil {
		refuse(err)
		return
	}
	d := p.Policy.Load().Decide(policy.Args{
		Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: tgt.path, Connectors: t.sess.Connectors,
	})
	rec.operation(d.Op)
	if err := p.gate(r, t, tgt, d); err != nil {
		if d.Verdict == policy.Deny && inject.ContainsPlaceholder(r) {
			err = deny(policy.ReasonPlaceholder, "%s; the request also carries an Aileron placeholder credential, which is only swapped on an operation bound to a credential", d.Message)
		}
		refuse(err)
		return
	}
	if err := p.checkLive(w, t); err != nil { // revoked while the request was held
		refuse(err)
		return
	}
	rec.allowed(d)
	rec.Fields = auditFields(r, d, tgt.query)
	if err := p.decided(rec); err != nil {
		refuse(err)
		return
	}
	overrideScan(r)
	p.send(w, r, rec, &outbound{rec: rec, sess: t.sess, op: d.Op, target: tgt.url(t.authority), body: clock})
}

// send forwards an allowed request and records the outcome: the status the
// client received, the bytes each way, and why an answer broke off (the
// upstream cut it, or the client stopped reading it).
func (p *Proxy) send(w http.ResponseWriter, r *http.Request, rec *Record, out *outbound) {
	cw := &countingWriter{ResponseWriter: w}
	if r.ProtoMajor == 2 {
		cw.rc, cw.idle = http.NewResponseController(w), p.t.BodyIdle
	}
	cut := p.forward(cw, r.WithContext(context.WithValue(r.Context(), outboundKey{}, out)))
	if !out.rejected {
		rec.Status = cw.status
	}
	switch {
	case cut && cw.err != nil:
		rec.Reason, rec.Message = string(policy.ReasonClientGone), "the client stopped reading the answer (for proxy.body_idle_timeout) or went away"
	case cut:
		rec.Reason, rec.Message = string(policy.ReasonUpstreamCut), "the upstream cut its response off before the end"
	}
	rec.BytesIn, rec.BytesOut = out.body.bytes(), cw.n
	p.finish(rec)
	if cut || cw.status == 0 { // cut off, or nothing sent: never let the server answer 200 for us
		abort(w, rec)
	}
}

// forward runs the ReverseProxy. It reports cut when the upstream broke its
// response off mid-body: ReverseProxy then aborts the handler (panics with
// http.ErrAbortHandler), which forward catches so that the outcome is
// recorded before the client learns of it.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) (cut bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			cut = true
		}
	}()
	p.rp.ServeHTTP(w, r)
	return false
}

// abort tells the client that the response it got was cut off: a call
// (Execute) gets an upstream_unavailable refusal; a proxy client has its
// connection aborted by http.ErrAbortHandler, which serveH1 and HTTP/2's
// server take as "close without ending the answer" (the status line was
// already sent).
func abort(w http.ResponseWriter, rec *Record) {
	if cw, ok := w.(*callWriter); ok {
		cw.status = http.StatusBadGateway
		ref := mkRefusal(http.StatusBadGateway, ClassUpstreamError, policy.ReasonUpstreamUnavailable, rec.Message)
		cw.refusal = &ref
		return
	}
	panic(http.ErrAbortHandler)
}

// decided hands an allowed decision to the Recorder before anything is
// forwarded; if it cannot be recorded, nothing is forwarded.
func (p *Proxy) decided(rec *Record) error {
	if p.Recorder == nil {
		return nil
	}
	if err := p.Recorder.Decided(rec); err != nil {
		return &unavailableError{reason: policy.ReasonAuditUnavailable, err: err}
	}
	rec.Decided = true
	return nil
}

// gate turns a decision into nil (forward) or the refusal to send. An
// upgrade the operation does not allow is refused; an operation that needs
// approval is held here until a human decides.
func (p *Proxy) gate(r *http.Request, t *tunnel, tgt target, d policy.Decision) error {
	cs := callFrom(r.Context())
	if cs != nil && cs.op != nil && d.Op != nil && !sameOperation(cs.op, d.Op) {
		return deny(policy.ReasonNoMatchingOperation, "the call for %s %s/%s matches %s/%s instead; change the arguments so that the path names the operation asked for",
			cs.op.Ref(), cs.op.Tool, cs.op.Spec.Name, d.Op.Tool, d.Op.Spec.Name)
	}
	if d.Verdict != policy.Deny {
		if err := checkUpgrade(r, d.Op); err != nil {
			return err
		}
	}
	switch d.Verdict {
	case policy.Allow:
		return nil
	case policy.AllowAfterApproval:
		if p.Approvals == nil {
			return deny(policy.ReasonApprovalPending, "%s needs a human's approval and this daemon has no approval stage enabled", d.Op.Spec.Name)
		}
		if cs != nil && cs.approvedBy != "" {
			if err := p.Approvals.Covers(r.Context(), cs.approvedBy, t.sess.ID, d.Op.FQN); err != nil {
				return deny(policy.ReasonApprovalPending, "%s needs a human's approval and approval %s does not cover it: %v", d.Op.Spec.Name, cs.approvedBy, err)
			}
			return nil
		}
		return p.hold(r, t, tgt, d)
	default:
		return &DenyError{Reason: d.Reason, Message: d.Message}
	}
}

// refuse answers the client with err's envelope and records the refusal.
func (p *Proxy) refuse(w http.ResponseWriter, rec *Record, err error) {
	ref := classify(err)
	rec.refused(ref)
	ref.AuditID = rec.AuditID
	WriteRefusal(w, ref)
	p.finish(rec)
}

// rewrite builds the outbound copy. ReverseProxy has already removed
// hop-by-hop headers, Proxy-Authorization and X-Forwarded-*; rewrite drops
// request trailers; the credential stage writes only to pr.Out, after this.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	out, _ := pr.In.Context().Value(outboundKey{}).(*outbound)
	if out == nil {
		return
	}
	pr.Out.URL = out.target
	pr.Out.Host = ""
	pr.Out.Header.Del(HeaderAuditID)
	pr.Out.Trailer = nil // request trailers are never forwarded: no check, preview or digest sees them
	out.sentAt = time.Now()
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	if out, _ := resp.Request.Context().Value(outboundKey{}).(*outbound); out != nil {
		out.rec.UpstreamStatus = resp.StatusCode
		out.rec.UpstreamMS = ms(time.Since(out.sentAt))
		resp.Header.Set(HeaderAuditID, out.rec.AuditID)
	}
	return nil
}

// upstreamFailed answers a failed upstream exchange with the envelope; the
// raw error goes to the log only.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	out, _ := r.Context().Value(outboundKey{}).(*outbound)
	if out == nil {
		WriteRefusal(w, classify(err))
		return
	}
	stalled := out.body.stalled() // the client's body failed, not the upstream
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil && stalled == nil {
		out.rejected = true
		out.rec.Reason, out.rec.Message = string(policy.ReasonClientGone), "client closed the connection"
		return
	}
	ref := classify(&upstreamError{Authority: out.target.Host, Err: err})
	if stalled != nil {
		ref = classify(stalled)
	}
	out.rejected = true
	out.rec.refused(ref) // allowed by policy, refused on the way out (SSRF guard, TLS, dial)
	if raw := out.red.String(err.Error()); raw != ref.Message {
		out.rec.Message += " (" + raw + ")" // for the log only, masked: a malformed answer may quote an echo
	}
	ref.AuditID = out.rec.AuditID
	WriteRefusal(w, ref)
}

// handlePlain answers plain-HTTP proxy requests (absolute-form http:// URLs
// sent to the proxy without CONNECT). They are authenticated like any
// request, then refused: upstream traffic always uses verified TLS.
func (p *Proxy) handlePlain(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
	rec := p.newRecord(r)
	rec.Path = "/"
	if a, err := policy.ParseAuthority(r.URL.Host, 80); err == nil {
		rec.Host, rec.Port = a.Host, a.Port
	}
	var err error
	if sess, aerr := p.authenticate(r); aerr != nil {
		err = aerr
	} else {
		rec.Session = sess.ID
		err = deny(policy.ReasonInsecureScheme, "plain-HTTP requests are not forwarded; use https://%s (through HTTPS_PROXY) instead", r.URL.Host)
	}
	ref := classify(err)
	rec.refused(ref)
	p.finish(rec)
	ref.AuditID = rec.AuditID
	return r, ref.Response(r)
}

// unavailableError is a pipeline stage that could not do its job; the
// request is refused with 503 rather than forwarded without it.
type unavailableError struct {
	reason policy.Reason
	err    error
}

func (e *unavailableError) Error() string { return string(e.reason) + ": " + e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// countingWriter counts the response bytes and keeps Flush and Hijack
// reachable (http.ResponseController). On an HTTP/2 stream each write and
// flush must complete within idle: a client that grants no flow-control
// window never stalls the socket (its other streams keep it busy), so only
// a deadline per stream notices that it stopped taking the answer. The
// deadline is cleared after each write, so a quiet stream (an event
// stream, a gRPC call waiting for its next message) is not cut for it.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
	err    error                    // the first write that failed: the client stopped taking the answer
	rc     *http.ResponseController // HTTP/2 only
	idle   time.Duration
}

// bounded runs write under the HTTP/2 write deadline, if any.
func (w *countingWriter) bounded(write func() error) error {
	if w.rc == nil {
		return write()
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	err := write()
	_ = w.rc.SetWriteDeadline(time.Time{})
	return err
}

// FlushError flushes (for http.ResponseController), within the deadline.
func (w *countingWriter) FlushError() error {
	return w.bounded(func() error { return http.NewResponseController(w.ResponseWriter).Flush() })
}

func (w *countingWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var n int
	err := w.bounded(func() (err error) { n, err = w.ResponseWriter.Write(b); return err })
	w.n += int64(n)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
