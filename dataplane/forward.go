package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// forwarder is the RoundTripper behind the ReverseProxy: the last stages of
// the request path, run on the outbound copy after hop-by-hop headers are
// gone. It injects the credential bound to the matched operation, refuses a
// request that still carries a placeholder, sends it through the guarded,
// verified transport, and masks any echo of the secret in the response.
type forwarder struct {
	p *Proxy
}

func (f forwarder) RoundTrip(out *http.Request) (*http.Response, error) {
	st, _ := out.Context().Value(outboundKey{}).(*outbound)
	var red *inject.Redactor
	if st != nil && st.op != nil && f.p.Injector != nil {
		if !st.op.Spec.Credential.IsZero() {
			// A compressed echo would slip past the redactor: ask for an
			// identity body (and identity gRPC/Connect messages). Before
			// injection, so a signature covers the headers actually sent.
			for _, h := range acceptCodingHeaders {
				out.Header.Del(h)
			}
		}
		secrets, err := f.p.Injector.Inject(out.Context(), st.sess, st.op, out)
		if err != nil {
			return nil, &credentialError{op: st.op, err: err}
		}
		red = inject.NewRedactor(secrets...)
		st.red = red
	}
	if inject.ContainsPlaceholder(out) {
		return nil, deny(policy.ReasonPlaceholder, "the request carries an Aileron placeholder credential where no credential is injected; placeholders only work for operations bound to a credential")
	}
	if !red.Empty() { // 1xx headers (103 Early Hints) reach the client before RoundTrip returns
		out = out.WithContext(httptrace.WithClientTrace(out.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(_ int, h textproto.MIMEHeader) error { red.Header(http.Header(h)); return nil },
		}))
	}
	var tr http.RoundTripper = f.p.up
	if wantsH2(out) {
		tr = f.p.h2up
	}
	resp, err := tr.RoundTrip(out)
	if err != nil || red.Empty() {
		return resp, err
	}
	return maskResponse(out, resp, red)
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
	if resp.ContentLength >= 0 && resp.ContentLength <= smallBody {
		return maskSmall(resp, red)
	}
	resp.Body = &trailerMask{ReadCloser: red.Body(resp.Body), red: red, resp: resp}
	resp.ContentLength = -1 // a masked echo changes the length
	resp.Header.Del("Content-Length")
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
// announced), and ReverseProxy sends them after.
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

// smallBody is the largest announced body masked in one piece, keeping an
// exact Content-Length; larger or unannounced bodies are masked as they
// stream.
const smallBody = 64 << 10

func maskSmall(resp *http.Response, red *inject.Redactor) (*http.Response, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, smallBody+1))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	red.Header(resp.Trailer) // the body was read to its end: trailers are in
	masked := red.String(string(b))
	resp.Body = io.NopCloser(strings.NewReader(masked))
	resp.ContentLength = int64(len(masked))
	resp.Header.Set("Content-Length", strconv.Itoa(len(masked)))
	return resp, nil
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
