package dataplane

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// usePolicy compiles spec into e's proxy, with the operations named in
// internal made internal.
func (e *env) usePolicy(t *testing.T, spec string, internal ...string) *policy.Policy {
	t.Helper()
	s, err := policy.ParseSpec("test.json", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Tools {
		for j := range s.Tools[i].Operations {
			o := &s.Tools[i].Operations[j]
			for _, n := range internal {
				if o.Name == n {
					o.Visibility = policy.VisibilityInternal
				}
			}
		}
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: s, Hash: "h", Origin: "test.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e.proxy.Policy.Store(pol)
	return pol
}

// TestInternalOperationOnlyForSteps: an internal operation is no
// operation to a request through the proxy, over HTTP/1.1 and HTTP/2, and
// to a call that is not a step's; an action step's call reaches it.
func TestInternalOperationOnlyForSteps(t *testing.T) {
	e := newEnv(t, nil)
	pol := e.usePolicy(t, testSpec, "items.create")
	h1 := e.client(t, url.UserPassword("s1", e.token))
	h2 := e.h2Client(t)
	for name, rt := range map[string]func(*http.Request) (*http.Response, error){"h1": h1.Do, "h2": h2.RoundTrip} {
		t.Run(name, func(t *testing.T) {
			before := e.hits.Load()
			req, _ := http.NewRequest("POST", "https://api.example.com/v1/items", strings.NewReader(`{"a":1}`))
			resp, err := rt(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := readEnvelope(t, resp.Body); resp.StatusCode != 403 || got.Reason != policy.ReasonNoMatchingOperation ||
				!strings.HasSuffix(got.Message, "operations for this host: GET /v1/items/{id}, DELETE /v1/items/{id}") {
				t.Fatalf("%d %+v, want 403 no_matching_operation naming no internal operation", resp.StatusCode, got)
			}
			if e.hits.Load() != before {
				t.Fatal("the request for an internal operation reached the upstream")
			}
		})
	}
	create, _ := pol.Lookup("local://test/items", "items", "items.create")
	sess := &Session{ID: "s1", CA: e.sessCA}
	for _, step := range []bool{false, true} {
		before := e.hits.Load()
		res, err := e.proxy.Execute(context.Background(), Call{Session: sess, Operation: create, Method: "POST", Step: step,
			URL: mustURL(t, "https://api.example.com/v1/items"), Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		reached := e.hits.Load() > before
		if step && (res.Status != 200 || !reached) {
			t.Errorf("a step's call: %d %s, reached %v; want 200 from the upstream", res.Status, res.Body, reached)
		}
		if !step && (res.Refusal == nil || res.Refusal.Reason != policy.ReasonNoMatchingOperation || reached) {
			t.Errorf("a call that is not a step's: %d %s, reached %v; want no_matching_operation", res.Status, res.Body, reached)
		}
	}
}

// TestInternalLiteralFallsToExternalWildcard: where an internal operation
// is a literal under an external {id}, a sandbox's request matches the
// external one (its approval and credential apply), a step's the internal.
func TestInternalLiteralFallsToExternalWildcard(t *testing.T) {
	e := newEnv(t, nil)
	spec := strings.Replace(testSpec, `{"name": "items.create"`,
		`{"name": "items.special", "method": "DELETE", "path": "/v1/items/special", "hosts": ["api.example.com"]},
    {"name": "items.create"`, 1)
	e.usePolicy(t, spec, "items.special")
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Do(mustReq(t, "DELETE", "https://api.example.com/v1/items/special"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// items.delete needs approval and this proxy has no approval stage.
	if resp.StatusCode != 403 || e.hits.Load() != 0 {
		t.Fatalf("sandbox DELETE /v1/items/special: %d, hits %d; want 403 (items.delete needs approval)", resp.StatusCode, e.hits.Load())
	}
	res, err := e.proxy.Execute(context.Background(), Call{Session: &Session{ID: "s1", CA: e.sessCA}, Method: "DELETE", Step: true,
		URL: mustURL(t, "https://api.example.com/v1/items/special")})
	if err != nil || res.Status != 200 || e.hits.Load() != 1 {
		t.Fatalf("step DELETE /v1/items/special: %v %d %s; want 200 (items.special needs no approval)", err, res.Status, res.Body)
	}
}

func mustReq(t *testing.T, method, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMayReachSkipsHostsOnlyInternalOperationsName: the policy DNS (which
// asks MayReach) answers a host only internal operations name as it answers
// an unknown one, and a CONNECT to it is refused like one to an unknown host.
func TestMayReachSkipsHostsOnlyInternalOperationsName(t *testing.T) {
	e := newEnv(t, nil)
	spec := strings.Replace(testSpec, `{"name": "items.create"`,
		`{"name": "hidden.get", "method": "GET", "path": "/v1/x", "hosts": ["hidden.example.com"]},
    {"name": "items.create"`, 1)
	e.usePolicy(t, spec, "hidden.get")
	sess := &Session{ID: "s1", CA: e.sessCA}
	if e.proxy.MayReach(sess, "hidden.example.com") || !e.proxy.MayReach(sess, "api.example.com") {
		t.Fatalf("MayReach: hidden %v, api %v; want false, true", e.proxy.MayReach(sess, "hidden.example.com"), e.proxy.MayReach(sess, "api.example.com"))
	}
	_, hidden := rawConnect(t, e, "hidden.example.com:443")
	_, unknown := rawConnect(t, e, "unknown.example.com:443")
	h, u := readEnvelope(t, hidden.Body), readEnvelope(t, unknown.Body)
	if hidden.StatusCode != 403 || h.Reason != policy.ReasonHostNotAllowed ||
		h.Message != strings.Replace(u.Message, "unknown.example.com", "hidden.example.com", 1) {
		t.Fatalf("CONNECT hidden: %d %+v; unknown: %+v", hidden.StatusCode, h, u)
	}
}
