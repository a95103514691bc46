package dataplane

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// swapSessions is one session whose current value a test replaces.
type swapSessions struct {
	token string
	mu    sync.Mutex
	sess  *Session
}

func (s *swapSessions) now() *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess
}

func (s *swapSessions) set(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sess = sess
}

func (s *swapSessions) Live(id string) error {
	if id != s.now().ID {
		return ErrProxyAuth
	}
	return nil
}

func (s *swapSessions) Session(id string) (*Session, error) {
	if id != s.now().ID {
		return nil, ErrProxyAuth
	}
	return s.now(), nil
}

func (s *swapSessions) Authenticate(id, token string) (*Session, error) {
	if id != s.now().ID || token == "" || token != s.token {
		return nil, ErrProxyAuth
	}
	return s.now(), nil
}

const learnedScopeSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://learned/extra", "version": "1.0.0"},
  "tools": [{"name": "learned-extra", "operations": [
    {"name": "get-v2-extra", "method": "GET", "path": "/v2/extra", "hosts": ["api.example.com"]}
  ]}]
}`

// compileSpecs compiles the spec texts into one policy, each connector's
// FQN as its hash.
func compileSpecs(t *testing.T, texts ...string) *policy.Policy {
	t.Helper()
	var srcs []policy.Source
	for _, text := range texts {
		spec, err := policy.ParseSpec("test.json", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, policy.Source{Spec: spec, Hash: spec.Connector.FQN, Origin: "test.json"})
	}
	pol, errs := policy.Compile(srcs, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return pol
}

// TestScopeChangeReachesOpenTunnel: a connector added to a live session's
// scope applies to the next request of a tunnel opened before, not only to
// new tunnels.
func TestScopeChangeReachesOpenTunnel(t *testing.T) {
	var ss *swapSessions
	e := newEnv(t, func(p *Proxy) {
		pol := compileSpecs(t, testSpec, learnedScopeSpec)
		p.Policy.Store(pol)
		old := p.Sessions.(staticSessions)["s1"]
		ss = &swapSessions{token: old.token, sess: &Session{ID: "s1", CA: old.sess.CA, Connectors: []string{"local://test/items"}}}
		p.Sessions = ss
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	get := func() (int, bool) {
		t.Helper()
		reused := false
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/v2/extra", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, reused
	}
	if status, _ := get(); status != http.StatusForbidden {
		t.Fatalf("outside the session's scope: %d, want 403", status)
	}
	ss.set(&Session{ID: "s1", CA: ss.now().CA, Connectors: []string{"local://test/items", "local://learned/extra"}})
	status, reused := get()
	if !reused {
		t.Fatal("the second request did not reuse the tunnel; the test proves nothing")
	}
	if status != http.StatusOK {
		t.Errorf("after the connector was added to the session: %d on the open tunnel, want 200", status)
	}
}
