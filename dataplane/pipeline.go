package dataplane

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// serveRequest is the one request path, for every request inside an
// intercepted tunnel (HTTP/1.1 or an HTTP/2 stream) and every Execute
// call: canonical target → policy.Decide → the approval gate → record →
// forward (inject on the outbound copy, SSRF-safe dial, verified TLS,
// relay the answer with echoes masked) → record. It answers w and tells
// the entry point how the request ended.
func (p *Proxy) serveRequest(w http.ResponseWriter, x *exchange) ending {
	r, t := x.in, x.t
	if t.api {
		p.serveAPI(w, r, t)
		return ending{}
	}
	rec := p.newRecord(r)
	rec.Session, rec.Host, rec.Port = t.sess.ID, t.authority.Host, t.authority.Port
	rec.RunID, rec.ParentAuditID = x.terms.run.ID, x.terms.run.ParentAuditID
	x.rec = rec
	x.body = p.clockBody(w, r)
	defer x.body.stop() // a body goroutine still reading must leave the connection alone now
	tgt, err := innerTarget(t, r)
	x.tgt, rec.Path = tgt, tgt.logPath()
	if err == nil {
		err = p.checkLive(w, t)
	}
	if err != nil {
		return p.refuseExchange(w, x, err)
	}
	return p.serveDecided(w, x, p.decide(x))
}

// decide is policy's decision on x's request, for its session's
// connector scope as it is now (sessionScope).
func (p *Proxy) decide(x *exchange) policy.Decision {
	r, t := x.in, x.t
	return p.Policy.Load().Decide(policy.Args{
		Method: r.Method, Host: t.authority.Host, Port: t.authority.Port,
		Path: x.tgt.path, Connectors: p.sessionScope(t.sess), Step: x.terms.step,
	})
}

// serveDecided goes on from policy's decision d: the arguments, the
// model, the approval gate (or, for an unknown request in ask mode, a
// human, then d anew: ask.go), record, send.
func (p *Proxy) serveDecided(w http.ResponseWriter, x *exchange, d policy.Decision) ending {
	r, t, rec := x.in, x.t, x.rec
	x.op = d.Op
	rec.operation(d.Op)
	err := p.checkArguments(x, d) // before the gate: a misfit request is never held, counted or sent
	if x.unbook != nil {
		defer x.unbook()
	}
	if err != nil {
		rec.misfit(err)
		return p.refuseExchange(w, x, err)
	}
	var body map[string]any // the body's audit[] values, found with the model
	whole := x.whole        // the body read whole: checked, or under a model list a model call's
	if whole == nil && checksModel(t.sess, d.Op) {
		var release func()
		whole, release, err = p.readWhole(r, t.sess.ID)
		x.unbook = sync.OnceFunc(release) // once the body was sent (relay), or at the end
		defer x.unbook()
		if err != nil {
			return p.refuseExchange(w, x, err)
		}
	}
	rec.Model, body = peekRequest(r, d.Op, x.tgt.path, whole)
	if d.Op != nil {
		rec.API = d.Op.Spec.Usage
	}
	if p.asks(x, d) {
		if err := p.ask(x, d); err != nil {
			return p.refuseExchange(w, x, err)
		}
		return p.serveDecided(w, x, p.decideNow(x)) // the human may have accepted a rule meanwhile
	}
	if err := p.gate(x, d); err != nil {
		var l Learned
		if x.proposal == "" { // an unknown request held before (ask) was learned then
			l = p.learn(x, d, err)
			x.proposal = l.ID
		}
		if d.Verdict == policy.Deny && inject.ContainsPlaceholder(r) {
			err = deny(policy.ReasonPlaceholder, "%s; the request also carries an Aileron placeholder credential, which is only swapped on an operation bound to a credential", d.Message)
		}
		return p.refuseExchange(w, x, noteProposal(err, l))
	}
	if err := p.checkLive(w, t); err != nil { // revoked while the request was held
		return p.refuseExchange(w, x, err)
	}
	rec.allowed(d)
	rec.asked(x, d)
	rec.Fields = auditFields(d, x.tgt.query, body)
	if err := p.decided(rec); err != nil {
		return p.refuseExchange(w, x, err)
	}
	overrideScan(r)
	return p.send(w, x)
}

// refuseExchange answers x's client with err's refusal (a held git push's
// in git's terms) and tells the entry point so.
func (p *Proxy) refuseExchange(w http.ResponseWriter, x *exchange, err error) ending {
	x.rec.BytesIn = x.body.bytes()
	var git *gitPush
	if _, held := isApprovalError(err); held {
		git = x.git // a held push's outcome, in git's terms
	}
	ref := p.refuse(w, x.rec, err, git, x.proposal)
	hangUpRevoked(w, x.t, err)
	return ending{refusal: &ref}
}

// send forwards an allowed request and records the outcome: the status the
// client received, the bytes each way, and why an answer broke off (the
// upstream cut it, or the client stopped reading it).
func (p *Proxy) send(w http.ResponseWriter, x *exchange) ending {
	rec := x.rec
	cw := &countingWriter{ResponseWriter: w}
	if x.in.ProtoMajor == 2 {
		cw.rc, cw.idle = http.NewResponseController(w), p.t.BodyIdle
	}
	ref, broke := p.relay(cw, x)
	if ref == nil {
		rec.Status = cw.status
	}
	switch {
	case broke && (cw.err != nil || x.in.Context().Err() != nil):
		// the client stopped taking the answer, or left (its request's
		// context ended, which is what broke the upstream read)
		rec.Reason, rec.Message = string(policy.ReasonClientGone), "the client stopped reading the answer (for proxy.body_idle_timeout) or went away"
	case broke:
		rec.Reason, rec.Message = string(policy.ReasonUpstreamCut), "the upstream cut its response off before the end"
	}
	rec.BytesIn, rec.BytesOut = x.body.bytes(), cw.n
	p.charge(x)
	p.finish(rec)
	// Cut off, or nothing sent (the client left first): the answer must
	// not end as if complete.
	return ending{refusal: ref, abort: broke || ref == nil && cw.status == 0}
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
// approval is held here until a human decides, unless the exchange's terms
// name an approval that covers it, or a human approved it as an unknown
// request (x.asked), which is then sent once even if still no operation
// matches it.
func (p *Proxy) gate(x *exchange, d policy.Decision) error {
	if want := x.terms.want; want != nil && d.Op != nil && !sameOperation(want, d.Op) {
		return deny(policy.ReasonNoMatchingOperation, "the call for %s %s/%s matches %s/%s instead; change the arguments so that the path names the operation asked for",
			want.Ref(), want.Tool, want.Spec.Name, d.Op.Tool, d.Op.Spec.Name)
	}
	if want := x.terms.want; want != nil && d.Op != nil && want.Hash != d.Op.Hash {
		return deny(policy.ReasonConnectorChanged, "the call was built for %s (sha256:%s) but sha256:%s is active now; nothing was sent: run it again",
			want.Ref(), want.Hash, d.Op.Hash)
	}
	if err := x.terms.subset.check(x.t.authority, d.Op); err != nil {
		return err
	}
	sendOnce := x.asked != "" && p.unknown(x, d)
	if d.Verdict != policy.Deny || sendOnce {
		if err := checkUpgrade(x.in, d.Op); err != nil {
			return err
		}
		ask := p.admit // before a human is asked, and before anything is sent
		if d.Verdict == policy.AllowAfterApproval && x.terms.approvedBy == "" && x.asked == "" {
			ask = p.checkBudgets // counted once approved (below)
		}
		if err := ask(x, d); err != nil {
			return err
		}
	}
	switch {
	case d.Verdict == policy.Allow, sendOnce:
		return nil
	case d.Verdict == policy.AllowAfterApproval:
		if x.asked != "" {
			return nil // the human who approved it as an unknown request approved it
		}
		if p.Approvals == nil {
			return deny(policy.ReasonApprovalPending, "%s needs a human's approval and this daemon has no approval stage enabled", d.Op.Spec.Name)
		}
		if by := x.terms.approvedBy; by != "" {
			if err := p.Approvals.Covers(x.in.Context(), by, x.t.sess.ID, d.Op.FQN); err != nil {
				return deny(policy.ReasonApprovalPending, "%s needs a human's approval and approval %s does not cover it: %v", d.Op.Spec.Name, by, err)
			}
			return nil
		}
		if err := p.hold(x, d); err != nil {
			return err
		}
		return p.admit(x, d) // counted now; refused if a budget was used up while it waited

	default:
		return &DenyError{Reason: d.Reason, Message: d.Message}
	}
}

// refuse answers the client with err's envelope (or, for a git push
// the approval gate read, git's own report: gitpush.go), carrying the id
// of the proposal the request was learned into (or ""), records the
// refusal and returns it.
func (p *Proxy) refuse(w http.ResponseWriter, rec *Record, err error, git *gitPush, proposal string) Refusal {
	ref := classify(err)
	rec.refused(ref)
	ref.AuditID, ref.ProposalID = rec.AuditID, proposal
	if git != nil {
		writeGitRefusal(w, ref, git)
		rec.Status = http.StatusOK // what git received: a report rejecting each ref
	} else {
		WriteRefusal(w, ref)
	}
	p.finish(rec)
	return ref
}

// upstreamFailed answers a failed upstream exchange with the envelope and
// returns it; the raw error goes to the record's log line only, masked. A
// client that left first gets nothing (nil): its exchange was cancelled.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, x *exchange, err error) *Refusal {
	rec := x.rec
	stalled := x.body.stalled() // the client's body failed, not the upstream
	if errors.Is(err, context.Canceled) && x.in.Context().Err() != nil && stalled == nil {
		rec.Reason, rec.Message = string(policy.ReasonClientGone), "client closed the connection"
		return nil
	}
	ref := classify(&upstreamError{Authority: x.out.URL.Host, Err: err})
	if stalled != nil {
		ref = classify(stalled)
	}
	rec.refused(ref) // allowed by policy, refused on the way out (SSRF guard, TLS, dial)
	if raw := x.red.String(err.Error()); raw != ref.Message {
		rec.Message += " (" + raw + ")" // for the log only, masked: a malformed answer may quote an echo
	}
	ref.AuditID = rec.AuditID
	WriteRefusal(w, ref)
	return &ref
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
	if w.status == 0 && code >= 200 { // a switch sets its 101 itself (switchProtocols)
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
