package integration

import (
	"net/http"
	"testing"
	"time"
)

// TestDenials exercises each policy deny reason once through the shared
// daemon and checks the status, the envelope and that the upstream was never
// reached.
func TestDenials(t *testing.T) {
	f := newAdvFixture(t, "denials")
	op := gmailMessageGet(t)
	t.Run("host_not_allowed_at_connect", func(t *testing.T) {
		before := theSuite.up.Total()
		_, o := rawConnect(t, f.d.ProxyAddr, "not-allowed.example.net:443", f.auth)
		assertDenial(t, "CONNECT not-allowed.example.net:443", o.Status, o.Body, http.StatusForbidden, "capability_denied", "host_not_allowed")
		if theSuite.up.Total() != before {
			t.Errorf("upstream saw a request")
		}
	})
	t.Run("no_matching_operation", func(t *testing.T) {
		c := goClient(t, f.s)
		assertQuiet(t, []string{f.gmailHost}, func() {
			st, _, body := goDo(t, c, http.MethodGet, urlFor(op.Hosts[0], "/gmail/v1/users/me/aileron-deny-nomatch"), "")
			assertDenial(t, "unknown path", st, body, http.StatusForbidden, "capability_denied", "no_matching_operation")
			st, _, body = goDo(t, c, http.MethodDelete, urlFor(op.Hosts[0], concretePath(op.Path, "wrong-method")), "")
			assertDenial(t, "DELETE on a GET-only path", st, body, http.StatusForbidden, "capability_denied", "no_matching_operation")
		})
	})
	t.Run("non_canonical_path", func(t *testing.T) {
		assertQuiet(t, []string{f.gmailHost}, func() {
			o := rawExchange(t, f.d.ProxyAddr, f.auth, f.gmailAuth, f.mitm, getReq("/gmail/v1/users/me/messages/%2e%2e/x", f.gmailHost))
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "non_canonical_path")
		})
	})
	t.Run("authority_mismatch", func(t *testing.T) {
		assertQuiet(t, []string{f.gmailHost, "api.linear.app"}, func() {
			o := rawExchange(t, f.d.ProxyAddr, f.auth, f.gmailAuth, f.mitm, getReq(f.okPath, "api.linear.app"))
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
		})
	})
	t.Run("connector_not_in_session", func(t *testing.T) {
		scoped := f.d.newSession(t, "--name", "scoped", "--connector", "local://test/stream")
		assertQuiet(t, []string{f.gmailHost}, func() {
			o := rawExchange(t, f.d.ProxyAddr, scoped.auth(t), f.gmailAuth, tlsOpts{SNI: f.gmailHost, Roots: scoped.caPool(t)},
				getReq(concretePath(op.Path, "out-of-scope"), f.gmailHost))
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "connector_not_in_session")
		})
		// The scoped session still reaches its own connector.
		st, _, body := goDo(t, goClient(t, scoped), http.MethodGet, "https://stream.example.com/echo/in-scope", "")
		if st != http.StatusOK {
			t.Errorf("scoped session denied on its own connector: %d %s", st, trunc(body))
		}
	})
	t.Run("insecure_scheme", func(t *testing.T) {
		assertQuiet(t, []string{f.gmailHost}, func() {
			st, _, body := goDo(t, goClient(t, f.s), http.MethodGet, "http://"+f.gmailHost+f.okPath, "")
			assertDenial(t, "plain http:// proxy request", st, body, http.StatusForbidden, "capability_denied", "insecure_scheme")
		})
	})
}

// TestUpstreamTLSFailed: upstreams whose certificate is untrusted, for
// another name, or expired are answered 502 upstream_tls_failed.
func TestUpstreamTLSFailed(t *testing.T) {
	d := theSuite.mainDaemon(t)
	c := goClient(t, d.newSession(t, "--name", "upstream-tls"))
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
}

// TestProxyAuth: every way of not presenting a live session's credentials is
// answered 407 with a Basic challenge and the envelope.
func TestProxyAuth(t *testing.T) {
	f := newAdvFixture(t, "proxy-auth")
	d := f.d
	deleted := d.newSession(t, "--name", "to-delete")
	if tun, o := rawConnect(t, d.ProxyAddr, f.gmailAuth, deleted.auth(t)); tun == nil {
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

	id := f.s.proxyURL(t).User.Username()
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
			assertQuiet(t, []string{f.gmailHost}, func() {
				tun, o := rawConnect(t, d.ProxyAddr, f.gmailAuth, tc.auth)
				if tun != nil {
					_ = tun.Close()
					t.Fatalf("CONNECT accepted with %s", tc.name)
				}
				assertDenial(t, tc.name, o.Status, o.Body, http.StatusProxyAuthRequired, "proxy_auth", "proxy_auth_required")
				if got := o.Header.Get("Proxy-Authenticate"); got != `Basic realm="aileron"` {
					t.Errorf("Proxy-Authenticate = %q, want %q", got, `Basic realm="aileron"`)
				}
			})
		})
	}
	t.Run("plain_http_without_credentials", func(t *testing.T) {
		o := rawPlain(t, d.ProxyAddr, "GET http://"+f.gmailHost+"/gmail/v1/users/me/messages HTTP/1.1\r\nHost: "+f.gmailHost+"\r\n\r\n")
		assertDenial(t, "plain http request without credentials", o.Status, o.Body, http.StatusProxyAuthRequired, "proxy_auth", "proxy_auth_required")
	})
}
