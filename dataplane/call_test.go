package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestExecuteEntersTheOnePipeline(t *testing.T) {
	ap := &scriptedApprovals{outcome: ApprovalPending}
	e := newEnv(t, func(p *Proxy) { p.Approvals = ap })
	sess := &Session{ID: "s1", CA: e.sessCA}
	for _, tc := range []struct {
		name       string
		call       Call
		status     int
		reason     policy.Reason
		hits       int64
		approvalID string
	}{
		{name: "allowed GET reaches the upstream", call: Call{Method: "GET", URL: mustURL(t, "https://api.example.com/v1/items/7?x=1")}, status: 200, hits: 1},
		{name: "POST with a body", call: Call{Method: "POST", URL: mustURL(t, "https://api.example.com/v1/items"), Body: []byte(`{"a":1}`),
			Header: http.Header{"Content-Type": {"application/json"}}}, status: 200, hits: 1},
		{name: "a response cut off mid-body is a refusal, not a short success", call: Call{URL: mustURL(t, "https://api.example.com/v1/items/cut")},
			status: 502, reason: "upstream_unavailable", hits: 1},
		{name: "no operation matches", call: Call{Method: "PUT", URL: mustURL(t, "https://api.example.com/v1/items")}, status: 403, reason: "no_matching_operation"},
		{name: "unknown host", call: Call{URL: mustURL(t, "https://evil.example.net/")}, status: 403, reason: "host_not_allowed"},
		{name: "non-canonical path", call: Call{URL: mustURL(t, "https://api.example.com/v1/items/../x")}, status: 403, reason: "non_canonical_path"},
		{name: "approval-gated answers pending at once", call: Call{Method: "DELETE", URL: mustURL(t, "https://api.example.com/v1/items/9")},
			status: 403, reason: "approval_pending", approvalID: "ap_test"},
		{name: "covered by an approved action", call: Call{Method: "DELETE", URL: mustURL(t, "https://api.example.com/v1/items/9"), ApprovedBy: "ap_action"},
			status: 200, hits: 1},
		{name: "an approval that does not cover it", call: Call{Method: "DELETE", URL: mustURL(t, "https://api.example.com/v1/items/9"), ApprovedBy: "ap_other"},
			status: 403, reason: "approval_pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.hits.Load()
			c := tc.call
			c.Session = sess
			res, err := e.proxy.Execute(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.status || res.AuditID == "" {
				t.Fatalf("status %d audit %q, want %d: %s", res.Status, res.AuditID, tc.status, res.Body)
			}
			if got := e.hits.Load() - before; got != tc.hits {
				t.Fatalf("upstream hits %d, want %d", got, tc.hits)
			}
			if tc.reason == "" {
				if res.Refusal != nil {
					t.Fatalf("unexpected refusal %+v", res.Refusal)
				}
				var echo map[string]string
				if err := json.Unmarshal(res.Body, &echo); err != nil || echo["method"] != c.Method {
					t.Fatalf("upstream echo %s (%v)", res.Body, err)
				}
				return
			}
			if res.Refusal == nil || res.Refusal.Reason != tc.reason || res.Refusal.ApprovalID != tc.approvalID {
				t.Fatalf("refusal %+v, want reason %s approval %q", res.Refusal, tc.reason, tc.approvalID)
			}
		})
	}
}

// TestExecuteKeepsTheOperationAskedFor: a call built for one operation that
// matches another (its arguments spelled a different path) is refused, so
// that operation's approval and credential never apply by accident.
func TestExecuteKeepsTheOperationAskedFor(t *testing.T) {
	e := newEnv(t, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	get, ok := e.proxy.Policy.Load().Lookup("local://test/items", "items", "items.get")
	if !ok {
		t.Fatal("items.get not found")
	}
	res, err := e.proxy.Execute(context.Background(), Call{Session: sess, Operation: get, Method: "POST",
		URL: mustURL(t, "https://api.example.com/v1/items")})
	if err != nil || res.Refusal == nil || res.Refusal.Reason != "no_matching_operation" || e.hits.Load() != 0 {
		t.Fatalf("%v %+v, hits %d", err, res.Refusal, e.hits.Load())
	}
	res, err = e.proxy.Execute(context.Background(), Call{Session: sess, Operation: get, URL: mustURL(t, "https://api.example.com/v1/items/7")})
	if err != nil || res.Status != 200 || e.hits.Load() != 1 {
		t.Fatalf("the operation asked for: %v %d", err, res.Status)
	}
}

// TestExecuteRefusesACallBuiltForReplacedBytes: a call built for an
// operation of one package (an action step, whose pins were checked
// against the policy it was built from) is refused with connector_changed
// when the active package of that FQN@VERSION now has other bytes (it was
// removed and reinstalled with other content between the check and the
// call), and nothing reaches the upstream.
func TestExecuteRefusesACallBuiltForReplacedBytes(t *testing.T) {
	e := newEnv(t, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	get, ok := e.proxy.Policy.Load().Lookup("local://test/items", "items", "items.get")
	if !ok {
		t.Fatal("items.get not found")
	}
	spec, err := policy.ParseSpec("test.json", []byte(testSpec))
	if err != nil {
		t.Fatal(err)
	}
	replaced, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "other", Origin: "test.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e.proxy.Policy.Store(replaced)
	res, err := e.proxy.Execute(context.Background(), Call{Session: sess, Operation: get, URL: mustURL(t, "https://api.example.com/v1/items/7")})
	if err != nil || res.Refusal == nil || res.Refusal.Reason != "connector_changed" || e.hits.Load() != 0 {
		t.Fatalf("%v %+v, hits %d; want connector_changed and nothing sent", err, res.Refusal, e.hits.Load())
	}
	if !strings.Contains(res.Refusal.Message, "(sha256:h)") || !strings.Contains(res.Refusal.Message, "sha256:other") {
		t.Fatalf("message %q does not name both hashes", res.Refusal.Message)
	}
	now, _ := replaced.Lookup("local://test/items", "items", "items.get")
	res, err = e.proxy.Execute(context.Background(), Call{Session: sess, Operation: now, URL: mustURL(t, "https://api.example.com/v1/items/7")})
	if err != nil || res.Status != 200 || e.hits.Load() != 1 {
		t.Fatalf("a call built for the active bytes: %v %d %+v", err, res.Status, res.Refusal)
	}
}

func TestExecuteRejectsMalformedCalls(t *testing.T) {
	e := newEnv(t, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	for name, c := range map[string]Call{
		"no session":   {URL: mustURL(t, "https://api.example.com/")},
		"no URL":       {Session: sess},
		"http scheme":  {Session: sess, URL: mustURL(t, "http://api.example.com/")},
		"userinfo":     {Session: sess, URL: mustURL(t, "https://u:p@api.example.com/")},
		"bad port":     {Session: sess, URL: &url.URL{Scheme: "https", Host: "api.example.com:99999", Path: "/"}},
		"bad method":   {Session: sess, Method: "BAD METHOD", URL: mustURL(t, "https://api.example.com/")},
		"has fragment": {Session: sess, URL: mustURL(t, "https://api.example.com/#x")},
	} {
		if _, err := e.proxy.Execute(context.Background(), c); !errors.Is(err, ErrBadCall) {
			t.Errorf("%s: err %v, want ErrBadCall", name, err)
		}
	}
	if e.hits.Load() != 0 {
		t.Fatal("a malformed call reached the upstream")
	}
}

func TestSandboxAPIHostIsServedByTheDaemon(t *testing.T) {
	seen := make(chan string, 4)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := SessionFrom(r.Context())
		if !ok {
			http.Error(w, "no session", 500)
			return
		}
		seen <- s.ID + " " + r.Method + " " + r.URL.Path + " auth=" + r.Header.Get("Proxy-Authorization")
		_, _ = io.WriteString(w, "hello from the API")
	})
	e := newEnv(t, func(p *Proxy) { p.SandboxAPI = api })
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Get("https://aileron.internal/v1/actions")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from the API" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if got := <-seen; got != "s1 GET /v1/actions auth=" {
		t.Fatalf("handler saw %q", got)
	}
	if e.hits.Load() != 0 {
		t.Fatal("the API host was forwarded upstream")
	}
	// Wrong credentials never reach the API.
	bad := e.client(t, url.UserPassword("s1", "wrong"))
	if _, err := bad.Get("https://aileron.internal/v1/actions"); err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
		t.Fatalf("bad token: %v", err)
	}
	// Another port is refused, not dialled.
	if _, err := c.Get("https://aileron.internal:8443/v1/actions"); err == nil {
		t.Fatal("the API host on port 8443 was accepted")
	}
	// A Host header naming somewhere else inside the API tunnel is refused.
	resp = innerRequestTo(t, e, "aileron.internal", "GET /v1/actions HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	if resp.StatusCode != 403 || readEnvelope(t, resp.Body).Reason != "authority_mismatch" {
		t.Fatalf("Host mismatch inside the API tunnel: %d", resp.StatusCode)
	}
	select {
	case got := <-seen:
		t.Fatalf("handler reached despite the Host mismatch: %s", got)
	default:
	}
}

func TestSandboxAPIHostWithoutHandlerIsAnUnknownHost(t *testing.T) {
	e := newEnv(t, nil)
	_, resp := rawConnect(t, e, "aileron.internal:443")
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT aileron.internal without a SandboxAPI: %d", resp.StatusCode)
	}
}
