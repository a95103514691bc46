package dataplane

import (
	"fmt"
	"io"
	"net/http"
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
			// identity body. Before injection, so a signature covers the
			// headers actually sent.
			out.Header.Del("Accept-Encoding")
		}
		secrets, err := f.p.Injector.Inject(out.Context(), st.sess, st.op, out)
		if err != nil {
			return nil, &credentialError{op: st.op, err: err}
		}
		red = inject.NewRedactor(secrets...)
	}
	if inject.ContainsPlaceholder(out) {
		return nil, deny(policy.ReasonPlaceholder, "the request carries an Aileron placeholder credential where no credential is injected; placeholders only work for operations bound to a credential")
	}
	resp, err := f.p.transport.RoundTrip(out)
	if err != nil || red.Empty() {
		return resp, err
	}
	red.Header(resp.Header)
	switch {
	case out.Method == http.MethodHead, resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotModified:
		return resp, nil // no body
	case resp.StatusCode == http.StatusSwitchingProtocols:
		return resp, nil // the body is the upgraded connection; frames are not inspected
	}
	if resp.ContentLength >= 0 && resp.ContentLength <= smallBody {
		return maskSmall(resp, red)
	}
	resp.Body = red.Body(resp.Body)
	resp.ContentLength = -1 // a masked echo changes the length
	resp.Header.Del("Content-Length")
	return resp, nil
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
