package dataplane

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// modelSpec has one operation per model API dialect, all on
// api.example.com.
const modelSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/models", "version": "1.0.0"},
  "tools": [{"name": "models", "operations": [
    {"name": "messages", "method": "POST", "path": "/v1/messages", "hosts": ["api.example.com"], "usage": "anthropic"},
    {"name": "chat", "method": "POST", "path": "/v1/chat/completions", "hosts": ["api.example.com"], "usage": "openai"},
    {"name": "responses", "method": "POST", "path": "/v1/responses", "hosts": ["api.example.com"], "usage": "openai",
     "audit": [{"name": "effort", "source": "body.reasoning.effort", "redact": "keep"}]},
    {"name": "responses.ws", "method": "GET", "path": "/v1/responses", "hosts": ["api.example.com"], "usage": "openai", "websocket": true},
    {"name": "generate", "method": "POST", "path": "/v1beta/models/{call}", "hosts": ["api.example.com"], "usage": "gemini"},
    {"name": "plain", "method": "POST", "path": "/v1/plain", "hosts": ["api.example.com"],
     "audit": [{"name": "to", "source": "body.to", "redact": "keep"}, {"name": "n", "source": "body.items[1].n", "redact": "keep"}]},
    {"name": "gated", "method": "POST", "path": "/v1/gated", "hosts": ["api.example.com"], "usage": "anthropic", "approval": "required"}
  ]}]
}`

// newModelEnv is newEnv with modelSpec as the policy and h as the TLS
// upstream standing in for api.example.com.
func newModelEnv(t testing.TB, h http.Handler, tune func(*Proxy)) *env {
	t.Helper()
	upCA, err := ca.New(ca.Options{CommonName: "model upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf("api.example.com") }}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	spec, err := policy.ParseSpec("models.json", []byte(modelSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "models.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	return newEnv(t, func(p *Proxy) {
		p.Policy = &policy.Holder{}
		p.Policy.Store(pol)
		p.RootCAs = roots
		p.Guard.Resolve = map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort(ln.Addr().String())}
		if tune != nil {
			tune(p)
		}
	})
}

// waitCompleted waits for n completed records.
func waitCompleted(t testing.TB, rec *listRecorder, n int) []Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec.mu.Lock()
		got := append([]Record(nil), rec.completed...)
		rec.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records completed, want %d", len(got), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// echoBody answers with the request body it received, whole.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
})

// postDecided posts body to path through the proxy, checks that the
// upstream got it whole, and returns the one record Recorder.Decided saw.
func postDecided(t *testing.T, c *http.Client, rec *listRecorder, path, body string) Record {
	t.Helper()
	rec.mu.Lock()
	rec.decided = nil
	rec.mu.Unlock()
	resp, err := c.Post("https://api.example.com"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, []byte(body)) {
		t.Fatalf("status %d; the upstream got %d bytes, want the body whole (%d)", resp.StatusCode, len(got), len(body))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decided) != 1 {
		t.Fatalf("decided %d records; want 1", len(rec.decided))
	}
	return rec.decided[0]
}

// TestModelIsOnTheDecisionBeforeSending: the model a call asks for is on
// the record handed to Recorder.Decided, read from the body's start (the
// body still reaches the upstream whole, however long) or, for Gemini,
// from the path; an operation without usage records no model.
func TestModelIsOnTheDecisionBeforeSending(t *testing.T) {
	rec := &listRecorder{}
	e := newModelEnv(t, echoBody, func(p *Proxy) { p.Recorder = rec })
	c := e.client(t, url.UserPassword("s1", e.token))
	long := strings.Repeat("x", 3<<20) // longer than maxBodyPrefix
	for _, tc := range []struct {
		name, path, body, want string
	}{
		{"anthropic", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`, "claude-sonnet-4-5"},
		{"model after a long value", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("y", 80<<10) + `"}],"model":"gpt-5"}`, "gpt-5"},
		{"model first, body past the bound", "/v1/responses", `{"model":"gpt-5-codex","input":"` + long + `"}`, "gpt-5-codex"},
		{"model past the bound", "/v1/responses", `{"input":"` + long + `","model":"gpt-5"}`, ""},
		{"nested model is not the call's", "/v1/messages", `{"metadata":{"model":"no"},"max_tokens":1}`, ""},
		{"not a string", "/v1/messages", `{"model":7}`, ""},
		{"not JSON", "/v1/messages", `model=claude`, ""},
		{"gemini path", "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[]}`, "gemini-2.5-flash"},
		{"gemini escaped", "/v1beta/models/gemini%2D2.5-pro:streamGenerateContent", `{}`, "gemini-2.5-pro"},
		{"no usage", "/v1/plain", `{"model":"claude-x"}`, ""},
		{"clipped", "/v1/messages", `{"model":"` + strings.Repeat("m", 300) + `"}`, strings.Repeat("m", maxModelName)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := postDecided(t, c, rec, tc.path, tc.body); d.Model != tc.want {
				t.Fatalf("model %q; want %q", d.Model, tc.want)
			}
		})
	}
}

// TestModelIsOnAHeldCall: a call held for approval names its model when
// it is refused at the gate (read before the gate).
func TestModelIsOnAHeldCall(t *testing.T) {
	rec := &listRecorder{}
	e := newModelEnv(t, echoBody, func(p *Proxy) { p.Recorder = rec })
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Post("https://api.example.com/v1/gated", "application/json", strings.NewReader(`{"model":"claude-opus-4-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	var env Refusal
	_ = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	got := waitCompleted(t, rec, 1)
	if env.Reason != policy.ReasonApprovalPending || got[0].Model != "claude-opus-4-1" {
		t.Fatalf("refusal %s, record model %q", env.Reason, got[0].Model)
	}
}

// TestAuditFieldsFromTheStartOfALongBody: body.* audit fields are read from
// the start of a body of any size (a value complete in the first
// maxBodyPrefix bytes is found, however long the body), the body still
// reaches the upstream whole, and the model and fields come from one read.
func TestAuditFieldsFromTheStartOfALongBody(t *testing.T) {
	rec := &listRecorder{}
	e := newModelEnv(t, echoBody, func(p *Proxy) { p.Recorder = rec })
	c := e.client(t, url.UserPassword("s1", e.token))
	pad := func(n int) string { return `"pad":"` + strings.Repeat("p", n) + `"` }
	for _, tc := range []struct {
		name, path, body string
		want             map[string]any
		model            string
	}{
		{"small", "/v1/plain", `{"to":"bob","items":[{"n":1},{"n":2}]}`, map[string]any{"to": "bob", "n": json.Number("2")}, ""},
		{"74 KiB (Codex)", "/v1/responses", `{"model":"gpt-5-codex","reasoning":{"effort":"high"},` + pad(74<<10) + `}`, map[string]any{"effort": "high"}, "gpt-5-codex"},
		{"fields before the cut of a 3 MiB body", "/v1/plain", `{"to":"carol",` + pad(3<<20) + `,"items":[{"n":1},{"n":2}]}`, map[string]any{"to": "carol"}, ""},
		{"field after a long value", "/v1/plain", `{` + pad(200<<10) + `,"items":[{"n":1},{"n":{"deep":[1,2]}}],"to":"dan"}`, map[string]any{"to": "dan", "n": json.RawMessage(`{"deep":[1,2]}`)}, ""},
		{"model after the fields", "/v1/responses", `{"reasoning":{"effort":"low","summary":"auto"},"input":[` + strings.Repeat(`{"x":"y"},`, 10000) + `{}],"model":"gpt-5"}`, map[string]any{"effort": "low"}, "gpt-5"},
		{"not JSON", "/v1/plain", `to=bob`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := postDecided(t, c, rec, tc.path, tc.body)
			wantJSON, _ := json.Marshal(tc.want)
			gotJSON, _ := json.Marshal(d.Fields)
			if len(tc.want) == 0 {
				wantJSON = []byte("null")
			}
			if string(gotJSON) != string(wantJSON) || d.Model != tc.model {
				t.Fatalf("fields %s model %q; want %s %q", gotJSON, d.Model, wantJSON, tc.model)
			}
		})
	}
}
