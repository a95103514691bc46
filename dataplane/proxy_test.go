package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// proxy must release every connection, tunnel and timer it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// staticSessions is a fixed session table for in-process tests; the real
// one lives in the control plane.
type staticSessions map[string]struct {
	token string
	sess  *Session
}

func (s staticSessions) Live(id string) error {
	if _, ok := s[id]; !ok {
		return ErrProxyAuth
	}
	return nil
}

// Session returns session id as it is now (a test may replace its entry).
func (s staticSessions) Session(id string) (*Session, error) {
	e, ok := s[id]
	if !ok {
		return nil, ErrProxyAuth
	}
	return e.sess, nil
}

func (s staticSessions) Authenticate(id, token string) (*Session, error) {
	e, ok := s[id]
	if !ok || token == "" || e.token != token {
		return nil, ErrProxyAuth
	}
	return e.sess, nil
}

const testSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/items", "version": "1.0.0"},
  "tools": [{"name": "items", "operations": [
    {"name": "items.get", "method": "GET", "path": "/v1/items/{id}", "hosts": ["api.example.com"], "credential": "bearer"},
    {"name": "items.create", "method": "POST", "path": "/v1/items", "hosts": ["api.example.com"]},
    {"name": "items.delete", "method": "DELETE", "path": "/v1/items/{id}", "hosts": ["api.example.com"], "approval": "required"}
  ]}]
}`

// env is one proxy in front of one TLS upstream standing in for
// api.example.com, reached only through Guard.Resolve and Allow.
type env struct {
	proxy       *Proxy
	proxyAddr   string
	upstream    *http.Server
	hits        atomic.Int64
	inflight    atomic.Int64 // requests the upstream is answering now
	maxInflight atomic.Int64 // the most it answered at once
	wholeBodies atomic.Int64 // requests the upstream received to the end of their body
	lastAuth    atomic.Value // Proxy-Authorization seen upstream
	sessCA      *ca.Authority
	token       string
	upRoots     *x509.CertPool // trusts the upstream's certificate
	upAddr      string         // the upstream's real address
}

func newEnv(t testing.TB, tune func(*Proxy)) *env {
	t.Helper()
	return newEnvUp(t, tune, false)
}

// newEnvUp is newEnv whose upstream also offers h2 when upstreamH2.
func newEnvUp(t testing.TB, tune func(*Proxy), upstreamH2 bool) *env {
	t.Helper()
	e := &env{token: "tok-" + t.Name()}
	upCA, err := ca.New(ca.Options{CommonName: "test upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	upLn, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	e.upstream = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.hits.Add(1)
			for n := e.inflight.Add(1); ; {
				if m := e.maxInflight.Load(); n <= m || e.maxInflight.CompareAndSwap(m, n) {
					break
				}
			}
			defer e.inflight.Add(-1)
			e.lastAuth.Store(r.Header.Get("Proxy-Authorization"))
			if r.URL.Path == "/v1/items/sneaky" { // echoes in a 103, a trailer, and a gzip-labelled body
				auth := r.Header.Get("Authorization")
				w.Header().Set("Link", "<https://x/"+auth+">")
				w.WriteHeader(http.StatusEarlyHints)
				w.Header().Del("Link")
				for _, enc := range r.URL.Query()["enc"] { // one Content-Encoding line each
					w.Header().Add("Content-Encoding", enc)
				}
				w.Header().Set("Trailer", "X-Echo-Trailer")
				_, _ = io.WriteString(w, "body without the secret")
				http.NewResponseController(w).Flush()
				w.Header().Set("X-Echo-Trailer", auth)
				return
			}
			if r.URL.Path == "/v1/items/garbage" { // answers with the Authorization it got, as its status line
				c, _, _ := http.NewResponseController(w).Hijack()
				_, _ = io.WriteString(c, r.Header.Get("Authorization")+"\r\n\r\n")
				_ = c.Close()
				return
			}
			if echoPaths(w, r) {
				return
			}
			if r.URL.Path == "/v1/items/large" { // 64 MiB
				_, _ = io.CopyN(w, zeroReader{}, 64<<20)
				return
			}
			if r.URL.Path == "/v1/items/cut" { // announces 100 bytes, sends 10, hangs up
				w.Header().Set("Content-Length", "100")
				_, _ = io.WriteString(w, `{"partial"`)
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			}
			body, err := io.ReadAll(r.Body)
			if err == nil {
				e.wholeBodies.Add(1)
			}
			w.Header().Set("X-Echo-Trailers", fmt.Sprint(len(r.Trailer), r.Trailer))
			w.Header().Set("X-Echo-Body", string(body))
			w.Header().Set("X-Echo-Length", strconv.FormatInt(r.ContentLength, 10))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
			w.Header().Set("X-Echo-Proto", r.Proto)
			w.Header().Set("X-Echo-Remote", r.RemoteAddr)
			_ = json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "uri": r.RequestURI, "host": r.Host,
				"authorization": r.Header.Get("Authorization"), "accept_encoding": r.Header.Get("Accept-Encoding")})
		}),
		// HTTP/1.1 only: these tests pin HTTP/1.1 upstream behaviour (a
		// hijacked garbage status line among them); h2_test.go covers h2.
		TLSConfig: &tls.Config{NextProtos: []string{"http/1.1"}, GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return upCA.Leaf("api.example.com")
		}},
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 5 * time.Second,
		// Dials the proxy abandons (a reset stream, a gone client) end in
		// thousands of "TLS handshake error … EOF" lines that would bury a
		// failing test's own output in CI.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	if upstreamH2 {
		e.upstream.TLSConfig.NextProtos, e.upstream.TLSNextProto = nil, nil // ServeTLS offers h2 and http/1.1
	}
	go func() { _ = e.upstream.ServeTLS(upLn, "", "") }()
	t.Cleanup(func() { _ = e.upstream.Close() })

	spec, err := policy.ParseSpec("test.json", []byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "test.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	holder := &policy.Holder{}
	holder.Store(pol)
	e.sessCA, err = ca.New(ca.Options{})
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	e.upRoots, e.upAddr = roots, upLn.Addr().String()
	e.proxy = &Proxy{
		Sessions: staticSessions{"s1": {e.token, &Session{ID: "s1", CA: e.sessCA}}},
		Policy:   holder,
		RootCAs:  roots,
		Guard: &Guard{
			Resolve: map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort(upLn.Addr().String())},
			Allow:   []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		},
	}
	if tune != nil {
		tune(e.proxy)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.proxyAddr = ln.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); _ = e.proxy.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.proxy.Shutdown(ctx)
		<-done
	})
	return e
}

// client is a Go HTTP client using the proxy with the given credentials.
func (e *env) client(t testing.TB, user *url.Userinfo) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.proxyAddr, User: user}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func readEnvelope(t *testing.T, r io.Reader) Refusal {
	t.Helper()
	var env Refusal
	if err := json.NewDecoder(r).Decode(&env); err != nil {
		t.Fatalf("response is not the JSON envelope: %v", err)
	}
	return env
}

func TestProxyDecidesEveryInnerRequest(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, tc := range []struct {
		method, url string
		status      int
		reason      policy.Reason
	}{
		{"GET", "https://api.example.com/v1/items/42", 200, ""},
		{"POST", "https://api.example.com/v1/items", 200, ""},
		{"GET", "https://api.example.com/v1/items", 403, "no_matching_operation"},
		{"PUT", "https://api.example.com/v1/items/42", 403, "no_matching_operation"},
		{"DELETE", "https://api.example.com/v1/items/42", 403, "approval_pending"},
		{"GET", "https://api.example.com/v1/items/42?q=1", 200, ""},
	} {
		before := e.hits.Load()
		req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(""))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.url, resp.StatusCode, tc.status)
		}
		if resp.Header.Get("X-Aileron-Audit-Id") == "" {
			t.Errorf("%s %s: no X-Aileron-Audit-Id", tc.method, tc.url)
		}
		if tc.reason != "" {
			if got := readEnvelope(t, resp.Body); got.Reason != tc.reason || got.Class != "capability_denied" {
				t.Errorf("%s %s: envelope %+v, want reason %s", tc.method, tc.url, got, tc.reason)
			}
			if e.hits.Load() != before {
				t.Errorf("%s %s: denied request reached the upstream", tc.method, tc.url)
			}
		} else {
			var echo map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&echo)
			u, _ := url.Parse(tc.url)
			if echo["uri"] != u.RequestURI() || echo["host"] != "api.example.com" {
				t.Errorf("upstream saw %v", echo)
			}
		}
		resp.Body.Close()
	}
	if a, _ := e.lastAuth.Load().(string); a != "" {
		t.Errorf("upstream received Proxy-Authorization %q", a)
	}
}

func TestProxyAuthentication(t *testing.T) {
	e := newEnv(t, nil)
	for name, user := range map[string]*url.Userinfo{
		"no credentials": nil,
		"wrong token":    url.UserPassword("s1", "nope"),
		"empty token":    url.UserPassword("s1", ""),
		"unknown id":     url.UserPassword("s2", e.token),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client(t, user).Get("https://api.example.com/v1/items/1")
			if err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
				t.Fatalf("err = %v, want a 407 on CONNECT", err)
			}
			if e.hits.Load() != 0 {
				t.Fatal("unauthenticated request reached the upstream")
			}
		})
	}
}

// rawConnect opens a CONNECT tunnel by hand and returns the connection
// after the proxy's answer.
func rawConnect(t *testing.T, e *env, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("s1:" + e.token))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n", target, target, auth)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestConnectToUnknownHostIsRefusedWithEnvelope(t *testing.T) {
	e := newEnv(t, nil)
	_, resp := rawConnect(t, e, "evil.example.net:443")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
	if got := readEnvelope(t, resp.Body); got.Reason != "host_not_allowed" || got.AuditID == "" {
		t.Errorf("envelope %+v", got)
	}
}

func TestStalledClientHelloIsReleased(t *testing.T) {
	e := newEnv(t, func(p *Proxy) { p.Timeouts.Handshake = 200 * time.Millisecond })
	c, resp := rawConnect(t, e, "api.example.com:443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	// Send nothing. The proxy must close the tunnel by itself; the generous
	// deadline only keeps a broken proxy from hanging the test.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("proxy kept a stalled handshake open")
	}
	if err == nil {
		t.Fatal("proxy sent bytes to a client that never said hello")
	}
}

// TestSNIMustMatchConnectHost: a ClientHello naming another host than the
// CONNECT (domain fronting) fails the handshake, reaches no upstream, and
// is on the record: one refusal line naming the SNI it asked for.
func TestSNIMustMatchConnectHost(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	tc := tunnelTLS(t, e, "other.example.com")
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake with SNI other.example.com inside a CONNECT to api.example.com succeeded")
	}
	if e.hits.Load() != 0 {
		t.Fatal("upstream was reached")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		rec.mu.Lock()
		got := append([]Record(nil), rec.completed...)
		rec.mu.Unlock()
		if len(got) == 1 {
			r := got[0]
			if r.Name != audit.EventRejected || r.Reason != string(policy.ReasonAuthorityMismatch) || r.Session != "s1" ||
				r.Host != "api.example.com" || r.Port != 443 || r.Details["sni"] != "other.example.com" || r.Status != 0 || r.Client == "" {
				t.Fatalf("the fronting refusal's line: %+v", r.Event)
			}
			return
		}
		if len(got) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d audit lines for one fronted handshake, want 1: %+v", len(got), got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tunnelTLS opens a CONNECT tunnel to api.example.com and returns a TLS
// client on it that trusts the session CA and sends serverName as SNI (the
// handshake runs on first use).
func tunnelTLS(t *testing.T, e *env, serverName string) *tls.Conn {
	t.Helper()
	return tunnelTLSTo(t, e, "api.example.com", serverName)
}

// tunnelTLSTo is tunnelTLS for a CONNECT to host:443.
func tunnelTLSTo(t *testing.T, e *env, host, serverName string) *tls.Conn {
	t.Helper()
	c, resp := rawConnect(t, e, host+":443")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT status %d", resp.StatusCode)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: roots})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	return tc
}

// innerRequest sends raw bytes inside an intercepted tunnel and returns the
// proxy's response.
func innerRequest(t *testing.T, e *env, raw string) *http.Response {
	t.Helper()
	return innerRequestTo(t, e, "api.example.com", raw)
}

// innerRequestTo is innerRequest inside a tunnel to host:443.
func innerRequestTo(t *testing.T, e *env, host, raw string) *http.Response {
	t.Helper()
	tc := tunnelTLSTo(t, e, host, host)
	if _, err := io.WriteString(tc, raw); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Body.Close() })
	return r
}

func TestInnerRequestAdversarial(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct {
		name, raw string
		status    int
		reason    policy.Reason
	}{
		{"Host of another host", "GET /v1/items/1 HTTP/1.1\r\nHost: other.example.com\r\n\r\n", 403, "authority_mismatch"},
		{"Host with another port", "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n", 403, "authority_mismatch"},
		{"absolute-form to another host", "GET https://other.example.com/v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "authority_mismatch"},
		{"absolute-form plain http", "GET http://api.example.com/v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "bad_request"},
		{"dot segments", "GET /v1/items/../items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "non_canonical_path"},
		{"encoded dot segments", "GET /v1/items/%2e%2e/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "non_canonical_path"},
		{"empty segment", "GET /v1//items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "non_canonical_path"},
		{"encoded slash", "GET /v1/items/1%2F2 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "non_canonical_path"},
		{"CL and TE", "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "malformed_request"},
		{"absolute-form with another Host", "GET https://api.example.com/v1/items/1 HTTP/1.1\r\nHost: other.example.com\r\n\r\n", 403, "authority_mismatch"},
		{"absolute-form with Host on another port", "GET https://api.example.com/v1/items/1 HTTP/1.1\r\nHost: api.example.com:8443\r\n\r\n", 403, "authority_mismatch"},
		{"two Host headers", "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\nHost: other.example.com\r\n\r\n", 400, "malformed_request"},
		{"absolute-form same host, Host with default port", "GET https://api.example.com/v1/items/1 HTTP/1.1\r\nHost: API.example.com:443\r\n\r\n", 200, ""},
		{"method override", "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nX-HTTP-Method-Override: DELETE\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, lower case", "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nx-http-method: DELETE\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, X-Method-Override", "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nX-Method-Override: DELETE\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, underscores", "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nX_HTTP_METHOD_OVERRIDE: DELETE\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, _method query", "POST /v1/items?a=1&_method=DELETE HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, encoded _method query", "POST /v1/items?%5FMETHOD=DELETE HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, PHP-rewritten .method query", "POST /v1/items?.method=DELETE HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"method override, PHP-rewritten [method query", "POST /v1/items?%5Bmethod=DELETE HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n", 403, "method_override"},
		{"OPTIONS * is decided, not answered by net/http", "OPTIONS * HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "bad_request"},
		{"absolute-form same host is fine", "GET https://api.example.com/v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 200, ""},
		// a URL in the query (OAuth's redirect_uri, a webhook's url) is
		// not an absolute-form target: only a target starting with a scheme is
		{"URL in the query", "GET /v1/items/1?next=https://other.example.com/x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 200, ""},
		{"encoded URL in the query", "GET /v1/items/1?redirect_uri=https%3A%2F%2Fother.example.com%2Fcb HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 200, ""},
		{"URL in the query of an absolute-form target", "GET https://api.example.com/v1/items/1?url=http://other.example.com:8080/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 200, ""},
		{"absolute-form to another host, URL in its query", "GET https://other.example.com/v1/items/1?u=https://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 403, "authority_mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.hits.Load()
			resp := innerRequest(t, e, tc.raw)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.reason == "" {
				return
			}
			if got := readEnvelope(t, resp.Body); got.Reason != tc.reason {
				t.Errorf("reason %q, want %q (%s)", got.Reason, tc.reason, got.Message)
			}
			if e.hits.Load() != before {
				t.Error("refused request reached the upstream")
			}
		})
	}
}

func TestPlainHTTPIsRefused(t *testing.T) {
	e := newEnv(t, nil)
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Get("http://api.example.com/v1/items/1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readEnvelope(t, resp.Body); resp.StatusCode != 403 || got.Reason != "insecure_scheme" {
		t.Fatalf("status %d envelope %+v", resp.StatusCode, got)
	}
}

func TestPolicySwapTakesEffectOnNextRequest(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client(t, url.UserPassword("s1", e.token))
	get := func() int {
		resp, err := c.Get("https://api.example.com/v1/items/7")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // drained, so the connection is reused
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get(); s != 200 {
		t.Fatalf("before swap: %d", s)
	}
	empty, _ := policy.Compile(nil, nil)
	e.proxy.Policy.Store(empty)
	// Same keep-alive connection: the tunnel stays, the decision changes.
	if s := get(); s != 403 {
		t.Fatalf("after swap to an empty policy: %d, want 403", s)
	}
}

func TestStatsCountConnectionsAndTunnels(t *testing.T) {
	e := newEnv(t, nil)
	tc := tunnelTLS(t, e, "api.example.com")
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	// The tunnel is served (serveH1) after the handshake; wait
	// for the gauge rather than sleeping a fixed time.
	deadline := time.Now().Add(10 * time.Second)
	for e.proxy.Stats().TunnelsOpen != 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := e.proxy.Stats(); s.TunnelsOpen != 1 || s.ConnectionsOpen != 0 {
		t.Fatalf("with one intercepted tunnel open: %+v", s)
	}
	tc.Close()
	for e.proxy.Stats().TunnelsOpen != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if s := e.proxy.Stats(); s.TunnelsOpen != 0 {
		t.Fatalf("after closing: %+v", s)
	}
}
