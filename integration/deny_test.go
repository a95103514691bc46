package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDenials exercises each deny reason once through the shared daemon and
// checks the status, the envelope and that the upstream was never reached.
func TestDenials(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "denials")
	up := theSuite.up
	gmail := mustSpec(t, "gmail")
	gmailGet := gmail.findOp(t, "a GET on a templated messages path", func(op specOp) bool {
		return op.Method == http.MethodGet && strings.HasPrefix(op.Path, "/gmail/v1/users/me/messages/") && strings.Contains(op.Path, "{")
	})
	gmailHost := hostOnly(authority(gmailGet.Hosts[0]))
	gmailAuth := authority(gmailGet.Hosts[0])
	mitm := tlsOpts{SNI: gmailHost, Roots: s.caPool(t)}

	// unmoved fails t if the upstream saw any request for host during fn.
	unmoved := func(t *testing.T, host string, fn func()) {
		t.Helper()
		before := up.HostHits(host)
		fn()
		if after := up.HostHits(host); after != before {
			t.Errorf("upstream %s saw %d request(s) during a denied exchange", host, after-before)
		}
	}

	t.Run("host_not_allowed_at_connect", func(t *testing.T) {
		before := up.Total()
		_, o := rawConnect(t, d.ProxyAddr, "not-allowed.example.net:443", s.auth(t))
		assertDenial(t, "CONNECT not-allowed.example.net:443", o.Status, o.Body, http.StatusForbidden, "capability_denied", "host_not_allowed")
		if up.Total() != before {
			t.Errorf("upstream saw a request")
		}
	})
	t.Run("no_matching_operation", func(t *testing.T) {
		c := goClient(t, s)
		unmoved(t, gmailHost, func() {
			st, _, body := goDo(t, c, http.MethodGet, urlFor(gmailGet.Hosts[0], "/gmail/v1/users/me/aileron-deny-nomatch"), "")
			assertDenial(t, "unknown path", st, body, http.StatusForbidden, "capability_denied", "no_matching_operation")
			st, _, body = goDo(t, c, http.MethodDelete, urlFor(gmailGet.Hosts[0], concretePath(gmailGet.Path, "wrong-method")), "")
			assertDenial(t, "DELETE on a GET-only path", st, body, http.StatusForbidden, "capability_denied", "no_matching_operation")
		})
	})
	t.Run("non_canonical_path", func(t *testing.T) {
		unmoved(t, gmailHost, func() {
			o := rawExchange(t, d.ProxyAddr, s.auth(t), gmailAuth, mitm, getReq("/gmail/v1/users/me/messages/%2e%2e/x", gmailHost))
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "non_canonical_path")
		})
	})
	t.Run("authority_mismatch", func(t *testing.T) {
		unmoved(t, "api.linear.app", func() {
			unmoved(t, gmailHost, func() {
				o := rawExchange(t, d.ProxyAddr, s.auth(t), gmailAuth, mitm, getReq(concretePath(gmailGet.Path, "mismatch"), "api.linear.app"))
				assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
			})
		})
	})
	t.Run("connector_not_in_session", func(t *testing.T) {
		scoped := d.newSession(t, "--name", "scoped", "--connector", "local://test/stream")
		unmoved(t, gmailHost, func() {
			o := rawExchange(t, d.ProxyAddr, scoped.auth(t), gmailAuth, tlsOpts{SNI: gmailHost, Roots: scoped.caPool(t)},
				getReq(concretePath(gmailGet.Path, "out-of-scope"), gmailHost))
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "connector_not_in_session")
		})
		// The scoped session still reaches its own connector.
		st, _, body := goDo(t, goClient(t, scoped), http.MethodGet, "https://stream.example.com/echo/in-scope", "")
		if st != http.StatusOK {
			t.Errorf("scoped session denied on its own connector: %d %s", st, trunc(body))
		}
	})
	t.Run("insecure_scheme", func(t *testing.T) {
		unmoved(t, gmailHost, func() {
			st, _, body := goDo(t, goClient(t, s), http.MethodGet, "http://"+gmailHost+concretePath(gmailGet.Path, "plain-http"), "")
			assertDenial(t, "plain http:// proxy request", st, body, http.StatusForbidden, "capability_denied", "insecure_scheme")
		})
	})
	t.Run("upstream_tls_failed", func(t *testing.T) {
		c := goClient(t, s)
		for name, port := range badTLSPorts() {
			t.Run(name, func(t *testing.T) {
				bad := theSuite.badTLS[name]
				st, _, body := goDo(t, c, http.MethodGet, "https://stream.example.com:"+port+"/echo/"+name, "")
				assertDenial(t, name+" upstream certificate", st, body, http.StatusBadGateway, "upstream_error", "upstream_tls_failed")
				if n := bad.Total(); n != 0 {
					t.Errorf("the %s upstream served %d request(s) despite its certificate", name, n)
				}
			})
		}
	})
	t.Run("proxy_auth", func(t *testing.T) {
		testProxyAuth(t, d, s, gmailAuth, gmailHost)
	})
}

func testProxyAuth(t *testing.T, d *daemon, s *session, gmailAuth, gmailHost string) {
	deleted := d.newSession(t, "--name", "to-delete")
	if tun, o := rawConnect(t, d.ProxyAddr, gmailAuth, deleted.auth(t)); tun == nil {
		t.Fatalf("fresh session refused before delete: %s", o)
	} else {
		_ = tun.Close()
	}
	d.cli(t, "session", "delete", deleted.ID)

	expired := d.newSession(t, "--name", "short", "--ttl", "1s")
	if expired.ExpiresAt.IsZero() {
		t.Fatalf("session create --ttl 1s printed no expires_at")
	}
	// Wait until the session's own expiry time has passed.
	time.Sleep(time.Until(expired.ExpiresAt.Add(200 * time.Millisecond)))

	id := s.proxyURL(t).User.Username()
	cases := []struct{ name, auth string }{
		{"no_credentials", ""},
		{"wrong_token", basicAuth(id, "not-the-token")},
		{"empty_token", basicAuth(id, "")},
		{"unknown_session", basicAuth("s_doesnotexist", "whatever")},
		{"deleted_session", deleted.auth(t)},
		{"expired_session", expired.auth(t)},
		{"not_basic", "Bearer " + id},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := theSuite.up.HostHits(gmailHost)
			tun, o := rawConnect(t, d.ProxyAddr, gmailAuth, tc.auth)
			if tun != nil {
				_ = tun.Close()
				t.Fatalf("CONNECT accepted with %s", tc.name)
			}
			assertDenial(t, tc.name, o.Status, o.Body, http.StatusProxyAuthRequired, "proxy_auth", "proxy_auth_required")
			if got := o.Header.Get("Proxy-Authenticate"); got != `Basic realm="aileron"` {
				t.Errorf("Proxy-Authenticate = %q, want %q", got, `Basic realm="aileron"`)
			}
			if theSuite.up.HostHits(gmailHost) != before {
				t.Errorf("upstream reached")
			}
		})
	}
	t.Run("plain_http_without_credentials", func(t *testing.T) {
		o := rawPlain(t, d.ProxyAddr, "GET http://"+gmailHost+"/gmail/v1/users/me/messages HTTP/1.1\r\nHost: "+gmailHost+"\r\n\r\n")
		assertDenial(t, "plain http request without credentials", o.Status, o.Body, http.StatusProxyAuthRequired, "proxy_auth", "proxy_auth_required")
	})
}
