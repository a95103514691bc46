package dataplane

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// TestOutboundCopy pins what leaves for the upstream of the headers a
// client sent: hop-by-hop headers (and those Connection names), the
// proxy's own and the sandbox's forwarding headers never do; "TE:
// trailers" and a WebSocket upgrade the gate allowed do; an absent
// User-Agent stays absent (the empty value tells the transport to send
// none, not Go's).
func TestOutboundCopy(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   http.Header
		want http.Header
	}{
		{"plain headers pass", http.Header{"Accept": {"a/b"}, "User-Agent": {"curl/8"}},
			http.Header{"Accept": {"a/b"}, "User-Agent": {"curl/8"}}},
		{"hop-by-hop and named ones dropped", http.Header{
			"Connection": {"keep-alive, X-Secret", "x-other"}, "X-Secret": {"s"}, "X-Other": {"o"}, "Keep-Alive": {"1"},
			"Proxy-Connection": {"x"}, "Proxy-Authorization": {"Basic abc"}, "Transfer-Encoding": {"chunked"},
			"Trailer": {"X-T"}, "Upgrade": {"h2c"}, "Accept": {"x"}},
			http.Header{"Accept": {"x"}, "User-Agent": {""}}},
		{"forwarding and audit headers dropped", http.Header{
			"Forwarded": {"for=1.2.3.4"}, "X-Forwarded-For": {"1.2.3.4"}, "X-Forwarded-Host": {"h"},
			"X-Forwarded-Proto": {"http"}, "X-Forwarded-Port": {"80"}, "X-Forwarded-Prefix": {"/p"}, HeaderAuditID: {"a_forged"}},
			http.Header{"User-Agent": {""}}},
		{"TE keeps trailers only", http.Header{"Te": {"gzip, trailers"}},
			http.Header{"Te": {"trailers"}, "User-Agent": {""}}},
		{"a WebSocket upgrade kept", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Key": {"k"}},
			http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Key": {"k"}, "User-Agent": {""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &http.Request{Method: "GET", Header: tc.in, ProtoMajor: 1, ProtoMinor: 1}
			x := &exchange{in: in.WithContext(context.Background()), t: &tunnel{authority: policy.Authority{Host: "api.example.com", Port: 443}},
				tgt: target{path: "/v1/x", query: "a=1"}}
			before := tc.in.Clone()
			out := x.outbound()
			if !reflect.DeepEqual(out.Header, tc.want) {
				t.Fatalf("outbound headers %v, want %v", out.Header, tc.want)
			}
			if !reflect.DeepEqual(tc.in, before) {
				t.Fatalf("the inbound headers changed: %v", tc.in)
			}
			if got := out.URL.String(); got != "https://api.example.com/v1/x?a=1" {
				t.Fatalf("outbound URL %s", got)
			}
			if out.Body != nil {
				t.Fatal("a request without a body got one")
			}
		})
	}
}

// TestOutboundBodyStaysOpen: a failed exchange closes the outbound body;
// the inbound one belongs to the tunnel, which must still discard it.
func TestOutboundBodyStaysOpen(t *testing.T) {
	body := &closeCount{Reader: strings.NewReader("abc")}
	in := &http.Request{Method: "POST", Header: http.Header{}, Body: body, ContentLength: 3}
	x := &exchange{in: in.WithContext(context.Background()), t: &tunnel{authority: policy.Authority{Host: "h", Port: 443}}, tgt: target{path: "/"}}
	out := x.outbound()
	_ = out.Body.Close()
	if body.closed {
		t.Fatal("closing the outbound body closed the inbound one")
	}
	if b, _ := io.ReadAll(out.Body); string(b) != "abc" || out.ContentLength != 3 {
		t.Fatalf("outbound body %q (%d)", b, out.ContentLength)
	}
}

type closeCount struct {
	io.Reader
	closed bool
}

func (c *closeCount) Close() error { c.closed = true; return nil }

// TestCallHeadersCanonical: a call's headers in any letter case are
// stripped like a parsed request's: a lower-case Proxy-Authorization or
// Connection-named header never reaches the upstream.
func TestCallHeadersCanonical(t *testing.T) {
	e := newEnv(t, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	res, err := e.proxy.Execute(context.Background(), Call{Session: sess, URL: mustURL(t, "https://api.example.com/v1/items/7"),
		Header: http.Header{"proxy-authorization": {"Basic leak"}, "connection": {"close"}}})
	if err != nil || res.Status != 200 {
		t.Fatalf("%v %d %s", err, res.Status, res.Body)
	}
	if got, _ := e.lastAuth.Load().(string); got != "" {
		t.Fatalf("the upstream saw Proxy-Authorization %q", got)
	}
}

// TestPreviewListsWhatIsSent: the headers an approval shows and binds are
// those the outbound copy carries before the credential goes on, for an
// operation with a credential (no Accept-Encoding: a compressed echo would
// slip past the redactor) and without one.
func TestPreviewListsWhatIsSent(t *testing.T) {
	in := http.Header{"Accept-Encoding": {"gzip"}, "Grpc-Accept-Encoding": {"gzip"}, "Te": {"trailers, deflate"},
		"Connection": {"X-Hop"}, "X-Hop": {"1"}, "X-Forwarded-Port": {"80"}, "Content-Type": {"application/json"},
		"Proxy-Authorization": {"Basic abc"}, "User-Agent": {"agent/1"}}
	withCred := sendOp(t).Op
	plain := &policy.Operation{Spec: &policy.OperationSpec{Name: "get"}}
	for _, op := range []*policy.Operation{withCred, plain} {
		x := &exchange{in: (&http.Request{Method: "POST", Header: in}).WithContext(context.Background()),
			t: &tunnel{authority: policy.Authority{Host: "h", Port: 443}}, tgt: target{path: "/"}, op: op}
		out := x.outbound()
		var sent []string
		for k, vv := range out.Header {
			for _, v := range vv {
				sent = append(sent, k+": "+v)
			}
		}
		var shown []string
		for _, h := range forwardedHeaders(in, op) {
			shown = append(shown, h.Name+": "+h.Value)
		}
		slices.Sort(sent)
		if !slices.Equal(sent, shown) {
			t.Fatalf("%s: sent %q, the approval shows %q", op.Spec.Name, sent, shown)
		}
		if _, ok := out.Header["Accept-Encoding"]; ok == (op == withCred) {
			t.Fatalf("%s: Accept-Encoding forwarded: %v", op.Spec.Name, ok)
		}
	}
}
