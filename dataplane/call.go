package dataplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// ErrBadCall is wrapped by Execute when the Call itself is malformed (no
// session, a URL that is not https://host/path). Refusals by the pipeline
// are not errors: they come back in CallResult.Refusal.
var ErrBadCall = errors.New("malformed call")

// maxCallBody caps the response body Execute keeps in memory.
const maxCallBody = 8 << 20

// Call is a request for a named operation, built by the control plane (the
// sandbox API's run endpoint, actions). Execute sends it through the same
// pipeline as a request inside a tunnel, entering at the canonical target:
// policy.Decide, the approval gate, the recorder, injection, the SSRF-safe
// dial and verified TLS all apply.
type Call struct {
	// Session is the authenticated session the call is made for. Required.
	Session *Session
	// Method is the HTTP method; empty means GET.
	Method string
	// URL is https://host[:port]/path?query, escaped as it will be sent.
	URL *url.URL
	// Header is sent as given (Content-Type and the like); credentials are
	// added by the injector, never by the caller.
	Header http.Header
	// Body is the request body; nil sends none.
	Body []byte
	// Operation, when set, is the operation the caller built the call for;
	// a request that policy.Decide matches to any other operation (a path
	// argument equal to a literal segment, say) is refused, so the approval
	// and credential that apply are those of the operation asked for. One
	// matched in a package with other bytes (the version was removed and
	// installed again since the call was built) is refused
	// connector_changed: an action's pins were checked against the bytes
	// the call was built from.
	Operation *policy.Operation
	// Wait is how long an approval-gated call waits for a human's decision;
	// 0 answers approval_pending at once (the caller polls or retries).
	Wait time.Duration
	// ApprovedBy is the id of an action approval the caller has consumed;
	// approval-gated operations then go through without a second approval,
	// after Approvals.Covers confirms the approval for this session.
	ApprovedBy string
	// Subset, when set, bounds the call to part of its connector's grants
	// (an action step's capabilities); nil bounds nothing beyond policy.
	Subset *Subset
	// Step marks the call as an action step's: internal operations are
	// reachable (policy.Args.Step). The sandbox API never sets it.
	Step bool
	// Run places the call in an action run's call tree: its audit lines
	// carry the run's id and their parent's audit id. Zero for a call
	// outside a run.
	Run RunRef
}

// RunRef names the action run a call is a step of, for the audit trail.
type RunRef struct {
	// ID is the run's id (audit run_id).
	ID string
	// ParentAuditID is the audit id of the line the call hangs under: the
	// run's action.started line (audit parent_audit_id).
	ParentAuditID string
}

// CallResult is what a proxy client would have received for the call.
type CallResult struct {
	AuditID string
	// Status is the upstream's status, or the refusal's.
	Status int
	Header http.Header
	// Body is the response body, cut at 8 MiB (Truncated).
	Body      []byte
	Truncated bool
	// Refusal is set when the pipeline refused or could not complete the
	// call; Status and Body then carry the error envelope.
	Refusal *Refusal
}

// Execute sends c through the one request path and returns the response,
// or the refusal, exactly as a proxy client would have seen it. An answer
// that broke off (the upstream cut it, or ctx ended first) comes back as
// a 502 upstream_unavailable refusal rather than a partial body; the audit
// outcome line says what happened on the wire (upstream_cut or
// client_gone, with the upstream's status). The returned error wraps
// ErrBadCall for a malformed Call and is nil otherwise.
func (p *Proxy) Execute(ctx context.Context, c Call) (CallResult, error) {
	if err := p.init(); err != nil {
		return CallResult{}, err
	}
	r, t, err := callRequest(ctx, c)
	if err != nil {
		return CallResult{}, err
	}
	x := &exchange{in: r, t: t, terms: terms{want: c.Operation, wait: c.Wait, approvedBy: c.ApprovedBy, subset: c.Subset, run: c.Run, step: c.Step}}
	w := &callWriter{header: make(http.Header)}
	end := p.serveRequest(w, x)
	if end.abort { // the answer broke off: a partial body must not look complete
		ref := mkRefusal(http.StatusBadGateway, ClassUpstreamError, policy.ReasonUpstreamUnavailable, x.rec.Message)
		ref.AuditID = x.rec.AuditID
		w = &callWriter{header: make(http.Header)}
		WriteRefusal(w, ref)
		end.refusal = &ref
	}
	res := CallResult{AuditID: x.rec.AuditID, Status: w.status, Header: w.header,
		Body: w.body.Bytes(), Truncated: w.truncated, Refusal: end.refusal}
	if res.Status == 0 {
		res.Status = http.StatusOK
	}
	return res, nil
}

// callRequest turns c into the inbound request and tunnel the pipeline
// expects.
func callRequest(ctx context.Context, c Call) (*http.Request, *tunnel, error) {
	if c.Session == nil {
		return nil, nil, fmt.Errorf("%w: no session", ErrBadCall)
	}
	if c.URL == nil || c.URL.Scheme != "https" || c.URL.Host == "" || c.URL.User != nil || c.URL.Fragment != "" {
		return nil, nil, fmt.Errorf("%w: the URL must be https://host[:port]/path?query", ErrBadCall)
	}
	auth, err := policy.ParseAuthority(c.URL.Host, 443)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: URL host %q: %v", ErrBadCall, c.URL.Host, err)
	}
	method := c.Method
	if method == "" {
		method = http.MethodGet
	}
	uri := c.URL.EscapedPath()
	if !strings.HasPrefix(uri, "/") {
		uri = "/" + uri
	}
	if c.URL.RawQuery != "" {
		uri += "?" + c.URL.RawQuery
	}
	r, err := http.NewRequestWithContext(ctx, method, "https://"+auth.String()+uri, bytes.NewReader(c.Body))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadCall, err)
	}
	r.RequestURI = uri
	r.Host = auth.String()
	r.RemoteAddr = "call"
	for k, vv := range c.Header { // canonical names, as a parsed request has: the stages match them exactly
		name := textproto.CanonicalMIMEHeaderKey(k)
		r.Header[name] = append(r.Header[name], vv...)
	}
	if c.Body == nil {
		r.Body, r.ContentLength = http.NoBody, 0
	}
	t := &tunnel{sess: c.Session, authority: auth, id: "call", client: "call"}
	return r, t, nil
}

// sameOperation reports whether a and b are the same operation of the
// same connector version (policy reloads make new pointers).
func sameOperation(a, b *policy.Operation) bool {
	return a != nil && b != nil && a.Ref() == b.Ref() && a.Tool == b.Tool && a.Spec.Name == b.Spec.Name
}

// callWriter collects a call's response in memory, up to maxCallBody.
type callWriter struct {
	header    http.Header
	status    int
	body      bytes.Buffer
	truncated bool
}

func (w *callWriter) Header() http.Header { return w.header }

func (w *callWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}

func (w *callWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	room := maxCallBody - w.body.Len()
	if len(b) > room {
		w.body.Write(b[:max(room, 0)])
		w.truncated = true
		return len(b), nil
	}
	return w.body.Write(b)
}

// Flush is a no-op: the whole response is returned at once.
func (w *callWriter) Flush() {}
