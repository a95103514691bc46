package dataplane

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// roundTrip is the last stage of the request path, run on x's outbound
// copy: it injects the credential bound to the matched operation, refuses a
// request that still carries a placeholder, sends it through the guarded,
// verified transport (upstream1; upstream2 for an HTTP/2 client's), never
// twice when a human approved it as an unknown request or its operation
// needs approval or is not idempotent (sendOnce), and masks any echo of
// the secret in the answer. A 1xx answer goes on to
// the client at once through w, masked.
func (p *Proxy) roundTrip(x *exchange, w http.ResponseWriter) (*http.Response, error) {
	out := x.out // without Accept-Encoding when a credential goes on it (outboundHeader)
	if x.op != nil && p.Injector != nil {
		secrets, err := p.Injector.Inject(out.Context(), x.t.sess, x.op, out)
		if err != nil {
			return nil, &credentialError{op: x.op, err: err}
		}
		x.red = p.redactors.For(secrets)
	}
	if inject.ContainsPlaceholder(out) {
		return nil, deny(policy.ReasonPlaceholder, "the request carries an Aileron placeholder credential where no credential is injected; placeholders only work for operations bound to a credential")
	}
	interim := &interimRelay{w: w, red: x.red}
	ctx := httptrace.WithClientTrace(out.Context(), &httptrace.ClientTrace{Got1xxResponse: interim.relay})
	if x.asked != "" || x.op != nil && (x.op.Spec.RequiresApproval() || x.op.Spec.Idempotency == policy.NotIdempotent) {
		ctx = withSendOnce(ctx)
	}
	out = out.WithContext(ctx)
	var tr http.RoundTripper = p.up
	if out.ProtoMajor == 2 {
		tr = p.up2 // HTTP/2 upstream where offered (gRPC's trailers need it)
	}
	x.sent = time.Now()
	resp, err := tr.RoundTrip(out)
	interim.done()
	if err != nil || x.red.Empty() {
		return resp, err
	}
	return maskResponse(out, resp, x.red)
}

// interimRelay sends each 1xx answer (103 Early Hints, 100 Continue) on to
// the client as it arrives, masked and without hop-by-hop headers or an
// audit id of the upstream's making, until the final answer: HTTP/2's
// transport may report one from its own goroutine, even late. A 101 is
// never passed on as interim, and more than upMax1xx end the exchange.
type interimRelay struct {
	w    http.ResponseWriter
	red  *inject.Redactor
	mu   sync.Mutex
	n    int // 1xx answers seen
	over bool
}

func (i *interimRelay) relay(code int, h textproto.MIMEHeader) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.over {
		return nil
	}
	if i.n++; i.n > upMax1xx { // HTTP/2's transport sets no bound of its own
		return fmt.Errorf("the upstream sent more than %d informational answers", upMax1xx)
	}
	if code == http.StatusSwitchingProtocols || code < 100 || code > 199 {
		return nil // a switch is a final answer (switchProtocols); HTTP/2 has none at all
	}
	hdr := http.Header(h).Clone()
	dropHopByHop(hdr)
	delete(hdr, HeaderAuditID) // the proxy's own; an upstream does not set it
	i.red.Header(hdr)
	dst := i.w.Header()
	for k, vv := range hdr {
		dst[k] = append(dst[k], vv...)
	}
	i.w.WriteHeader(code)
	clear(dst) // a 1xx does not clear the header map by itself
	return nil
}

func (i *interimRelay) done() {
	i.mu.Lock()
	i.over = true
	i.mu.Unlock()
}

// maskResponse masks every echo of the secret in resp: headers, body and
// trailers (announced or not: the transport fills resp.Trailer in, or
// replaces it, when the body ends; HTTP/2 carries them even on a 204).
func maskResponse(out *http.Request, resp *http.Response, red *inject.Redactor) (*http.Response, error) {
	red.Header(resp.Header)
	red.Header(resp.Trailer)
	switch {
	case out.Method == http.MethodHead, resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified:
		resp.Body = &trailerMask{ReadCloser: resp.Body, red: red, resp: resp} // no body, but trailers
		return resp, nil
	case resp.StatusCode == http.StatusSwitchingProtocols:
		return resp, nil // the body is the upgraded connection; frames are not inspected
	}
	if ce := contentCoding(resp.Header); ce != "" {
		_ = resp.Body.Close()
		return nil, deny(policy.ReasonEncodedResponse, "the upstream answered a request that carries a credential with a %q-encoded body, which Aileron cannot check for an echo of the credential; it asked for an identity body", ce)
	}
	body := red.Body(resp.Body)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		body = red.EventStream(resp.Body) // also a secret spread over events
	}
	// A mask is as long as its secret (inject.Mask): Content-Length and the
	// framing stay as the upstream sent them, and the body streams in the
	// same pieces as an unmasked one.
	resp.Body = &trailerMask{ReadCloser: body, red: red, resp: resp}
	return resp, nil
}

// codingHeaders name a body's (or its messages') compression: HTTP's own,
// and gRPC's and Connect's per-message codings, which compress inside an
// identity HTTP body.
var codingHeaders = []string{"Content-Encoding", "Grpc-Encoding", "Connect-Content-Encoding"}

// acceptCodingHeaders ask the upstream for a compressed answer; a request
// that carries a credential has them removed.
var acceptCodingHeaders = []string{"Accept-Encoding", "Grpc-Accept-Encoding", "Connect-Accept-Encoding"}

// contentCoding returns the first coding other than identity named by any
// value of any line of codingHeaders in h ("" when the body is plain): a
// client decodes every coding listed, so one line saying identity does not
// make a body plain when another says gzip.
func contentCoding(h http.Header) string {
	for _, name := range codingHeaders {
		for _, line := range h.Values(name) {
			for _, c := range strings.Split(line, ",") {
				if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
					return clip(c)
				}
			}
		}
	}
	return ""
}

// trailerMask masks the response trailers when the body ends: the
// transport fills them in at EOF (into a new map when none were
// announced), and relay sends them after.
type trailerMask struct {
	io.ReadCloser
	red  *inject.Redactor
	resp *http.Response
}

func (t *trailerMask) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if err == io.EOF {
		t.red.Header(t.resp.Trailer)
	}
	return n, err
}

// credentialError is a credential the matched operation needs but that
// could not be produced; the request is refused, never sent without it.
type credentialError struct {
	op  *policy.Operation
	err error
}

func (e *credentialError) Error() string {
	return fmt.Sprintf("%s (%s %s): %v", e.op.Ref(), e.op.Tool, e.op.Spec.Name, e.err)
}

func (e *credentialError) Unwrap() error { return e.err }
