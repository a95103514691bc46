package integration

import (
	"net/http"
	"strings"
	"testing"
)

// TestAdversarial sends hand-made bytes through the shared daemon: authority
// games, non-canonical paths, request smuggling and redirects.
func TestAdversarial(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "adversarial")
	up := theSuite.up
	gmail := mustSpec(t, "gmail")
	gmailGet := gmail.findOp(t, "a GET on a templated messages path", func(op specOp) bool {
		return op.Method == http.MethodGet && strings.HasPrefix(op.Path, "/gmail/v1/users/me/messages/") && strings.Contains(op.Path, "{")
	})
	gmailHost := hostOnly(authority(gmailGet.Hosts[0]))
	gmailAuth := authority(gmailGet.Hosts[0])
	auth := s.auth(t)
	mitm := tlsOpts{SNI: gmailHost, Roots: s.caPool(t)}
	okPath := concretePath(gmailGet.Path, "adv")

	// quiet fails t if any of hosts saw a request during fn.
	quiet := func(t *testing.T, hosts []string, fn func()) {
		t.Helper()
		before := make([]int, len(hosts))
		for i, h := range hosts {
			before[i] = up.HostHits(h)
		}
		fn()
		for i, h := range hosts {
			if n := up.HostHits(h) - before[i]; n != 0 {
				t.Errorf("upstream %s saw %d request(s); the proxy must not forward", h, n)
			}
		}
	}
	both := []string{gmailHost, "api.linear.app"}

	t.Run("authority", func(t *testing.T) {
		cases := []struct{ name, raw string }{
			{"inner_host_other_allowed_host",
				"POST /graphql HTTP/1.1\r\nHost: api.linear.app\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"},
			{"absolute_form_other_host", "GET https://api.linear.app/graphql HTTP/1.1\r\nHost: " + gmailHost + "\r\nConnection: close\r\n\r\n"},
			{"absolute_form_and_host_other_host", "GET https://api.linear.app/graphql HTTP/1.1\r\nHost: api.linear.app\r\nConnection: close\r\n\r\n"},
			{"host_other_port", getReq(okPath, gmailHost+":8443")},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				quiet(t, both, func() {
					o := rawExchange(t, d.ProxyAddr, auth, gmailAuth, mitm, tc.raw)
					assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
				})
			})
		}
	})
	t.Run("sni_unlike_connect_host", func(t *testing.T) {
		quiet(t, both, func() {
			// Accept any certificate: what matters is whether the proxy
			// lets a request through, not what the client would verify.
			o := rawExchange(t, d.ProxyAddr, auth, gmailAuth, tlsOpts{SNI: "api.linear.app", Insecure: true}, getReq(okPath, gmailHost))
			if o.Stage == "handshake" && o.Err != nil {
				return // refused at the handshake: fine
			}
			assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
		})
	})
	t.Run("non_canonical_path", func(t *testing.T) {
		base := "/gmail/v1/users/me/messages/"
		for _, p := range []string{
			base + "../../x",
			base + "./x",
			base + "%2e%2e/x",
			base + "%2E%2E/x",
			base + ".%2e/x",
			"/gmail/v1/users/me//messages/x",
			base + "a%2Fb",
			base + "a%2fb",
			base + "a%5Cb",
			base + "a\\b",
			base + "a%00b",
		} {
			t.Run(p, func(t *testing.T) {
				quiet(t, []string{gmailHost}, func() {
					o := rawExchange(t, d.ProxyAddr, auth, gmailAuth, mitm, getReq(p, gmailHost))
					assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "non_canonical_path")
				})
			})
		}
	})
	t.Run("redirect_not_followed", func(t *testing.T) {
		before := up.HostHits("other.example.com")
		st, h, body := goDo(t, goClient(t, s), http.MethodGet, "https://stream.example.com/redirect", "")
		if st != http.StatusFound || h.Get("Location") != "https://other.example.com/landed" {
			t.Errorf("got %d Location=%q, want the upstream's 302 to https://other.example.com/landed; body %s", st, h.Get("Location"), trunc(body))
		}
		if h.Get("X-Aileron-Audit-Id") == "" {
			t.Errorf("passed-through 302 lacks X-Aileron-Audit-Id")
		}
		if n := up.HostHits("other.example.com") - before; n != 0 {
			t.Errorf("the proxy followed the redirect: other.example.com saw %d request(s)", n)
		}
	})
	t.Run("smuggling", func(t *testing.T) {
		streamAuth := "stream.example.com:443"
		streamTLS := tlsOpts{SNI: "stream.example.com", Roots: s.caPool(t)}
		smuggled := "GET /echo/smuggled HTTP/1.1\r\nHost: stream.example.com\r\n\r\n"
		cases := []struct{ name, raw string }{
			{"cl_and_te", "POST /echo/cl-te HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
			{"te_and_cl", "POST /echo/te-cl HTTP/1.1\r\nHost: stream.example.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\n" + smuggled},
			{"two_content_lengths", "POST /echo/two-cl HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"},
			{"te_not_chunked_last", "POST /echo/te-gzip HTTP/1.1\r\nHost: stream.example.com\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				quiet(t, []string{"stream.example.com"}, func() {
					o := rawExchange(t, d.ProxyAddr, auth, streamAuth, streamTLS, tc.raw)
					assertDenial(t, o.String(), o.Status, o.Body, http.StatusBadRequest, "bad_request", "malformed_request")
				})
			})
		}
	})
}
