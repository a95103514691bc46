package sandboxapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Connectors of action/testdata.
const (
	tdLinearFQN = "github://acme/aileron-connector-linear"
	tdGoogleFQN = "github://acme/aileron-connector-google"
	itemsFQN    = "local://test/items"
)

// sapiSessions is the proxy's session table in these tests.
type sapiSessions map[string]*dataplane.Session

func (s sapiSessions) Live(id string) error {
	if _, ok := s[id]; !ok {
		return dataplane.ErrProxyAuth
	}
	return nil
}

func (s sapiSessions) Authenticate(id, token string) (*dataplane.Session, error) {
	if sess, ok := s[id]; ok && token == "tok-"+id {
		return sess, nil
	}
	return nil, dataplane.ErrProxyAuth
}

// upstreamHit is one request the fake upstream received.
type upstreamHit struct {
	Method, Host, URI string
	Body              []byte
}

// sapiEnv is a real proxy (with a real approval store on a temporary
// database, the action runner and the sandbox API) in front of one loopback
// TLS upstream standing in for every connector host.
type sapiEnv struct {
	proxy     *dataplane.Proxy
	proxyAddr string
	db        *state.DB
	store     *approvals.Store
	runner    *actions.Runner
	api       *API
	sessions  sapiSessions
	sessCA    *ca.Authority
	events    *testkit.Events
	// runEvents receives every action.* event.
	runEvents chan [2]string // event, run id
	// stalled receives the URI of each request to /issues/stall…, which
	// the upstream holds until its request context ends; unstalled then
	// receives the URI.
	stalled, unstalled chan string

	mu   sync.Mutex
	hits []upstreamHit
	// lines are the audit lines of runs and of the proxy, in order.
	lines []audit.Event
}

// recordRunEvent keeps an audit line (the runner's or the proxy's).
func (e *sapiEnv) recordRunEvent(ev audit.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lines = append(e.lines, ev)
}

// auditLines returns the lines recorded so far.
func (e *sapiEnv) auditLines() []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]audit.Event(nil), e.lines...)
}

// lineRecorder is the proxy's dataplane.Recorder in these tests: it keeps
// every decision and outcome line.
type lineRecorder struct{ e *sapiEnv }

func (l lineRecorder) Decided(r *dataplane.Record) error {
	l.e.recordRunEvent(r.Event)
	return nil
}

func (l lineRecorder) Completed(r *dataplane.Record) {
	ev := r.Event
	if r.Decided {
		ev.Name = ev.Name.Outcome()
	}
	l.e.recordRunEvent(ev)
}

type sapiOpts struct {
	// noDecided leaves the approval store's events unwired from the runner:
	// only Result polls advance runs.
	noDecided bool
	dbPath    string
	// extra actions are installed next to the testdata's.
	extra []action.Installed
}

// tdHash stands in for the store hash of the package name in these tests.
func tdHash(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

// loadTestdataPackage parses a package of action/testdata.
func loadTestdataPackage(tb testing.TB, name string) (*policy.Spec, []action.Installed) {
	tb.Helper()
	dir := filepath.Join("..", "action", "testdata", name)
	data, err := os.ReadFile(filepath.Join(dir, "aileron.connector.v1.json"))
	if err != nil {
		tb.Fatal(err)
	}
	spec, err := policy.ParseSpec(name+".json", data)
	if err != nil {
		tb.Fatal(err)
	}
	mans, err := action.LoadPackage(dir, spec)
	if err != nil {
		tb.Fatal(err)
	}
	var out []action.Installed
	for _, m := range mans {
		out = append(out, action.Installed{Manifest: m, Connector: spec.Connector.FQN, ConnectorVersion: spec.Connector.Version, Hash: tdHash(name)})
	}
	return spec, out
}

func newSapiEnv(t *testing.T, o sapiOpts) *sapiEnv {
	t.Helper()
	e := &sapiEnv{events: &testkit.Events{}, runEvents: make(chan [2]string, 1024),
		stalled: make(chan string, 16), unstalled: make(chan string, 16)}
	upAddr, roots := e.startUpstream(t)

	linSpec, linActs := loadTestdataPackage(t, "linear")
	gooSpec, gooActs := loadTestdataPackage(t, "google")
	items, err := policy.ParseSpec("items.json", []byte(testkit.ItemsSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: linSpec, Hash: tdHash("linear"), Origin: "linear"},
		{Spec: gooSpec, Hash: tdHash("google"), Origin: "google"}, {Spec: items, Hash: tdHash("items"), Origin: "items"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	holder := &policy.Holder{}
	holder.Store(pol)
	cat, err := action.NewCatalog(append(append(linActs, gooActs...), o.extra...))
	if err != nil {
		t.Fatal(err)
	}

	if o.dbPath == "" {
		o.dbPath = filepath.Join(t.TempDir(), state.FileName)
	}
	e.db = testkit.OpenDB(t, o.dbPath)
	e.store = &approvals.Store{DB: e.db, ReviewURL: func(id string) string { return "https://aileron.test/approvals/" + id }}
	e.runner = &actions.Runner{DB: e.db, Approvals: e.store, Policy: holder, Catalog: func() *action.Catalog { return cat },
		OnEvent: func(ev audit.Event) {
			e.events.Record(ev.Name, ev.Details)
			e.recordRunEvent(ev)
			select {
			case e.runEvents <- [2]string{string(ev.Name), ev.Details["id"]}:
			default:
			}
		}}
	e.store.OnEvent = func(ev audit.EventName, d map[string]string) {
		e.events.Record(ev, d)
		if !o.noDecided && ev != audit.EventApprovalRequested {
			e.runner.Decided(d["approval_id"])
		}
	}
	e.api = &API{Policy: holder, Runner: e.runner}
	var err2 error
	e.sessCA, err2 = ca.New(ca.Options{})
	if err2 != nil {
		t.Fatal(err2)
	}
	e.sessions = sapiSessions{
		"s1":     {ID: "s1", CA: e.sessCA},
		"s2":     {ID: "s2", CA: e.sessCA},
		"scoped": {ID: "scoped", CA: e.sessCA, Connectors: []string{tdGoogleFQN, itemsFQN}},
	}
	e.proxy = &dataplane.Proxy{Sessions: e.sessions, Policy: holder, RootCAs: roots, Approvals: e.store, SandboxAPI: e.api, Recorder: lineRecorder{e},
		Guard: &dataplane.Guard{Resolve: map[string]netip.AddrPort{}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}}
	for _, h := range []string{"api.linear.test:443", "gmail.google.test:443", "api.example.com:443", "api.example.com:8443"} {
		e.proxy.Guard.Resolve[h] = netip.MustParseAddrPort(upAddr)
	}
	e.runner.Exec, e.api.Exec = e.proxy, e.proxy
	e.serveProxy(t)
	t.Cleanup(func() { e.runner.Close() })
	return e
}

// startUpstream serves the fake connector APIs over TLS on 127.0.0.2.
func (e *sapiEnv) startUpstream(t *testing.T) (string, *x509.CertPool) {
	upCA, err := ca.New(ca.Options{CommonName: "test upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(e.serveUpstream),
		TLSConfig: &tls.Config{GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return upCA.Leaf(h.ServerName)
		}},
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	return ln.Addr().String(), roots
}

func (e *sapiEnv) serveUpstream(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	e.mu.Lock()
	e.hits = append(e.hits, upstreamHit{Method: r.Method, Host: host, URI: r.RequestURI, Body: body})
	e.mu.Unlock()
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	p := r.URL.Path
	switch {
	case host == "api.linear.test" && strings.HasPrefix(p, "/issues/stall"):
		e.stalled <- r.RequestURI
		<-r.Context().Done() // the proxy ended the request: the step was cancelled upstream
		e.unstalled <- r.RequestURI
	case host == "api.linear.test" && r.Method == http.MethodGet && strings.HasPrefix(p, "/issues/"):
		id := strings.TrimPrefix(p, "/issues/")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"canon-`+id+`","title":"Issue `+id+`","number":12345678901234567890}`)
	case host == "api.linear.test" && r.Method == http.MethodPost:
		var in map[string]any
		_ = json.Unmarshal(body, &in)
		answer(http.StatusCreated, map[string]any{"comment": map[string]any{"path": p, "body": in["body"]}})
	case host == "gmail.google.test":
		answer(http.StatusOK, map[string]any{"id": "msg-1", "labelIds": []string{"SENT"}})
	case p == "/v1/items/boom":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "boom")
	case p == "/v1/items/text":
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "plain text")
	default:
		answer(http.StatusOK, map[string]any{"method": r.Method, "uri": r.RequestURI, "body": string(body),
			"content_type": r.Header.Get("Content-Type")})
	}
}

// upstreamHits returns the requests the upstream has received.
func (e *sapiEnv) upstreamHits() []upstreamHit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]upstreamHit(nil), e.hits...)
}

// countHits counts upstream requests with method to host.
func (e *sapiEnv) countHits(method, host string) int {
	n := 0
	for _, h := range e.upstreamHits() {
		if h.Method == method && h.Host == host {
			n++
		}
	}
	return n
}

func (e *sapiEnv) serveProxy(t *testing.T) {
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
}

// client returns an HTTP client that reaches the sandbox API through the
// proxy as session id, as a sandbox does.
func (e *sapiEnv) client(t *testing.T, id string) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: e.proxyAddr, User: url.UserPassword(id, "tok-"+id)}),
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// apiResponse is one answer of the sandbox API.
type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v.
func (a apiResponse) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

// envelope decodes an error answer.
func (a apiResponse) envelope(t *testing.T) dataplane.Refusal {
	t.Helper()
	var env dataplane.Refusal
	a.decode(t, &env)
	if env.Class == "" || env.Reason == "" || env.Message == "" {
		t.Fatalf("not an error envelope: %s", a.body)
	}
	return env
}

// do sends method path (under https://aileron.internal) with body (a
// string is sent as is, anything else as JSON) as session id.
func (e *sapiEnv) do(t *testing.T, id, method, path string, body any) apiResponse {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, "https://"+dataplane.DefaultAPIHost+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.client(t, id).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiResponse{status: resp.StatusCode, header: resp.Header, body: data}
}

// waitRunEvent waits for action event ev of run id ("" = any run),
// skipping others.
func (e *sapiEnv) waitRunEvent(t *testing.T, ev audit.EventName, id string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case got := <-e.runEvents:
			if got[0] == string(ev) && (id == "" || got[1] == id) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for run %s; events: %v", ev, id, e.events.Names())
		}
	}
}
