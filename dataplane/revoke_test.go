package dataplane

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
)

// revocable is a Sessions whose sessions can be deleted while tunnels are
// open.
type revocable struct {
	staticSessions
	mu    sync.Mutex
	gone  map[string]bool
	blind bool // no session can be checked (a fleet node cut off)
}

func (r *revocable) revoke(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone[id] = true
}

func (r *revocable) Live(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blind {
		return fmt.Errorf("%w: %w: cut off from the shared state", ErrProxyAuth, ErrSessionsUnavailable)
	}
	if r.gone[id] {
		return errors.New("deleted")
	}
	return r.staticSessions.Live(id)
}

func (r *revocable) Authenticate(id, token string) (*Session, error) {
	if err := r.Live(id); err != nil {
		return nil, errors.Join(ErrProxyAuth, err)
	}
	return r.staticSessions.Authenticate(id, token)
}

// TestRevokedSessionSendsNothingMore: after its session is revoked, a
// tunnel opened before sends no request upstream, and the proxy closes it
// (intercepted and passthrough alike) within a second, auditing the
// revocation once and each tunnel it cut.
func TestRevokedSessionSendsNothingMore(t *testing.T) {
	var sess *revocable
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) {
		sess = &revocable{staticSessions: p.Sessions.(staticSessions), gone: map[string]bool{}}
		p.Sessions, p.Recorder, p.RevokeCheck = sess, rec, 50*time.Millisecond
	})
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	other := tunnelTLSTo(t, e, "api.example.com", "api.example.com") // idle, cut at the refusal
	for _, c := range []*tls.Conn{tc, other} {
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
	}
	waitTunnels(t, e.proxy, "s1", 2) // the client's handshake ends before the proxy's
	var otherClosed atomic.Bool
	go func() { _, _ = io.Copy(io.Discard, other); otherClosed.Store(true) }()
	br := bufio.NewReader(tc)
	get := func() (*http.Response, error) {
		if _, err := io.WriteString(tc, "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	if resp, err := get(); err != nil || resp.StatusCode != 200 {
		t.Fatalf("before revocation: %v %v", resp, err)
	}
	hits := e.hits.Load()
	sess.revoke("s1")
	resp, err := get()
	if err == nil && resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a request on the open tunnel after revocation got %d", resp.StatusCode)
	}
	if e.hits.Load() != hits {
		t.Fatal("a request of a revoked session reached the upstream")
	}
	_ = tc.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Fatal("the revoked session's tunnel stayed open")
	}
	waitRecords(t, rec, audit.EventSessionRevoked, 1)
	waitRecords(t, rec, audit.EventTunnelCut, 1)
	for start := time.Now(); !otherClosed.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > time.Second {
			t.Fatal("the session's other tunnel stayed open")
		}
	}
}

// TestRevocationCutsAnIdleTunnel: a tunnel with nothing in flight is closed
// too, without waiting for its next request.
func TestRevocationCutsAnIdleTunnel(t *testing.T) {
	var sess *revocable
	e := newEnv(t, func(p *Proxy) {
		sess = &revocable{staticSessions: p.Sessions.(staticSessions), gone: map[string]bool{}}
		p.Sessions, p.RevokeCheck = sess, 50*time.Millisecond
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Get("https://api.example.com/v1/items/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	var closed atomic.Bool
	go func() { _, _ = io.Copy(io.Discard, tc); closed.Store(true) }()
	start := time.Now()
	sess.revoke("s1")
	for !closed.Load() {
		if time.Since(start) > time.Second {
			t.Fatal("an idle tunnel of a revoked session was still open after 1s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRecords waits until rec completed n records named name.
func waitRecords(t *testing.T, rec *listRecorder, name audit.EventName, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		got := 0
		for _, r := range rec.completed {
			if r.Name == name {
				got++
			}
		}
		rec.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s records, want %d", got, name, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitTunnels waits until the proxy has n open tunnels of session id.
func waitTunnels(t *testing.T, p *Proxy, id string, n int) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		p.open.mu.Lock()
		got := len(p.open.open[id])
		p.open.mu.Unlock()
		if got == n {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("%d open tunnels of %s, want %d", got, id, n)
		}
	}
}

// TestRevokedDuringTheHandshake: a session revoked between its CONNECT and
// the end of the TLS handshake gets its tunnel closed at once, audited as
// cut.
func TestRevokedDuringTheHandshake(t *testing.T) {
	var sess *revocable
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) {
		sess = &revocable{staticSessions: p.Sessions.(staticSessions), gone: map[string]bool{}}
		p.Sessions, p.Recorder, p.RevokeCheck = sess, rec, time.Hour
	})
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	sess.revoke("s1")
	_ = tc.Handshake()
	if _, err := io.Copy(io.Discard, tc); err != nil && strings.Contains(err.Error(), "timeout") {
		t.Fatal("the tunnel of a session revoked during its handshake stayed open")
	}
	waitRecords(t, rec, audit.EventTunnelCut, 1)
}

// TestUnvouchedSessionsAreUnavailableNotUnauthenticated: while the
// sessions cannot be checked at all (a fleet node cut off from its shared
// state), a request on an open tunnel and a new CONNECT with good
// credentials are refused with 503 not_ready and Retry-After, never 407
// (which sends the client to check credentials that are fine) nor
// "session revoked"; nothing reaches the upstream.
func TestUnvouchedSessionsAreUnavailableNotUnauthenticated(t *testing.T) {
	var sess *revocable
	e := newEnv(t, func(p *Proxy) {
		sess = &revocable{staticSessions: p.Sessions.(staticSessions), gone: map[string]bool{}}
		p.Sessions, p.RevokeCheck = sess, time.Hour
	})
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(tc)
	get := func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(tc, "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := get(); resp.StatusCode != 200 {
		t.Fatalf("before: %d", resp.StatusCode)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	hits := e.hits.Load()
	sess.mu.Lock()
	sess.blind = true
	sess.mu.Unlock()
	check := func(what string, resp *http.Response) {
		t.Helper()
		env := readEnvelope(t, resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || env.Reason != "not_ready" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %+v (Retry-After %q); want 503 not_ready with Retry-After", what, resp.StatusCode, env, resp.Header.Get("Retry-After"))
		}
	}
	check("a request on an open tunnel", get())
	_, resp := rawConnect(t, e, "api.example.com:443")
	check("a new CONNECT with good credentials", resp)
	if e.hits.Load() != hits {
		t.Fatal("a request reached the upstream while no session could be checked")
	}
}
