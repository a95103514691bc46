package integration

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// openTunnels opens, for session s, one idle tunnel of every kind: an
// intercepted one (TLS with the session CA), one to the sandbox API host,
// and a passthrough one (TLS to the fake upstream through it). Each reports
// on its flag when the proxy closes it.
func openTunnels(t *testing.T, d *daemon, s *session) map[string]*atomic.Bool {
	t.Helper()
	kinds := []struct{ name, authority, sni string }{
		{"intercepted", "api.linear.app:443", "api.linear.app"},
		{"sandbox_api", "aileron.internal:443", "aileron.internal"},
		{"passthrough", "passthrough.example.org:443", "passthrough.example.org"},
	}
	closed := map[string]*atomic.Bool{}
	for _, k := range kinds {
		tun, o := rawConnect(t, d.ProxyAddr, k.authority, s.auth(t))
		if tun == nil {
			t.Fatalf("CONNECT %s: %s", k.authority, o)
		}
		roots := s.caPool(t)
		if k.name == "passthrough" {
			roots = certPoolFrom(t, filepath.Join(theSuite.pkiDir, "root.pem"))
		}
		tc := tls.Client(tun, &tls.Config{ServerName: k.sni, RootCAs: roots, NextProtos: []string{"http/1.1"}})
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS through the %s tunnel: %v", k.name, err)
		}
		_ = tc.SetDeadline(time.Time{})
		flag := &atomic.Bool{}
		closed[k.name] = flag
		go func(c net.Conn) { _, _ = io.Copy(io.Discard, c); flag.Store(true) }(tc)
		t.Cleanup(func() { _ = tc.Close() })
	}
	return closed
}

// waitClosed fails t unless every tunnel is closed within limit.
func waitClosed(t *testing.T, what string, closed map[string]*atomic.Bool, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for name, flag := range closed {
		for !flag.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the %s tunnel was still open %s later", what, name, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestRevocationStopsOpenTunnels: deleting a session, or its expiry, stops
// it at once: a keep-alive tunnel that was already open gets its next
// request refused (session_revoked), nothing more reaches the upstream, and
// the proxy closes every tunnel of the session (intercepted, sandbox API,
// passthrough) within a second, auditing session.revoked and each cut.
func TestRevocationStopsOpenTunnels(t *testing.T) {
	d := theSuite.mainDaemon(t)
	const linear = "https://api.linear.app/graphql"
	const query = `{"query":"{ viewer { id } }"}`

	t.Run("delete", func(t *testing.T) {
		s := d.newSession(t, "--name", "revoke-delete")
		c := goClient(t, s)
		if st, _, body := goDo(t, c, http.MethodPost, linear, query); st != http.StatusOK {
			t.Fatalf("before the delete: %d %s", st, trunc(body))
		}
		closed := openTunnels(t, d, s)
		d.cli(t, "session", "delete", s.ID)
		start := time.Now()
		waitClosed(t, "session delete", closed, 1500*time.Millisecond)
		t.Logf("every tunnel closed %s after the delete returned", time.Since(start).Round(time.Millisecond))
		// The Go client's pooled tunnel is gone too: its next request opens a
		// new CONNECT, which the deleted session cannot authenticate.
		req, _ := http.NewRequest(http.MethodPost, linear, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("a request of the deleted session got %d", resp.StatusCode)
		}
		waitAudit(t, d, "session.revoked and the cut tunnels of "+s.ID, func(lines []auditLine) bool {
			revoked, cut := 0, 0
			for _, l := range lines {
				if l.str("session") != s.ID || l.str("reason") != "session_revoked" {
					continue
				}
				switch l.str("event") {
				case "session.revoked":
					revoked++
				case "sandbox.proxy.tunnel_cut":
					cut++
				}
			}
			return revoked == 1 && cut >= 3
		})
	})

	t.Run("busy_tunnel", func(t *testing.T) {
		s := d.newSession(t, "--name", "revoke-busy")
		tun, o := rawConnect(t, d.ProxyAddr, "api.linear.app:443", s.auth(t))
		if tun == nil {
			t.Fatalf("CONNECT: %s", o)
		}
		tc := tls.Client(tun, &tls.Config{ServerName: "api.linear.app", RootCAs: s.caPool(t)})
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		post := "POST /graphql HTTP/1.1\r\nHost: api.linear.app\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(query)) + "\r\n\r\n" + query
		if _, err := io.WriteString(tc, post); err != nil {
			t.Fatal(err)
		}
		br := newResponseReader(tc)
		if st := br.status(t); st != http.StatusOK {
			t.Fatalf("before the delete: %d", st)
		}
		d.cli(t, "session", "delete", s.ID)
		// The same keep-alive tunnel: refused, never forwarded.
		if _, err := io.WriteString(tc, post); err == nil {
			if st := br.status(t); st != 0 && st != http.StatusForbidden {
				t.Fatalf("a request on an open tunnel after the delete got %d", st)
			}
		}
		lines := waitAudit(t, d, "the cut of "+s.ID, func(lines []auditLine) bool {
			for _, l := range lines {
				if l.str("session") == s.ID && l.str("reason") == "session_revoked" {
					return true
				}
			}
			return false
		})
		proxied := 0
		for _, l := range lines {
			if l.str("session") == s.ID && l.str("event") == "connector.proxy.proxied" {
				proxied++
			}
		}
		if proxied != 1 {
			t.Fatalf("%d requests of the session were forwarded, want only the one before the delete", proxied)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		s := d.newSession(t, "--name", "revoke-expiry", "--ttl", "2s")
		closed := openTunnels(t, d, s)
		expires := time.Now().Add(2 * time.Second)
		waitClosed(t, "session expiry", closed, time.Until(expires)+1500*time.Millisecond)
	})
}

// responseReader reads successive responses from one connection.
type responseReader struct{ br *bufio.Reader }

func newResponseReader(c net.Conn) *responseReader { return &responseReader{br: bufio.NewReader(c)} }

// status reads one response and returns its status, 0 when the connection
// ended instead.
func (r *responseReader) status(t *testing.T) int {
	t.Helper()
	resp, err := http.ReadResponse(r.br, nil)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
