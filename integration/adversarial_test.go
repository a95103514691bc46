package integration

import (
	"net/http"
	"testing"
)

// advFixture is what the hand-made-bytes tests share: the shared daemon, a
// session, and a tunnel target on the Gmail host.
type advFixture struct {
	d         *daemon
	s         *session
	auth      string
	gmailHost string // gmail.googleapis.com
	gmailAuth string // gmail.googleapis.com:443
	mitm      tlsOpts
	okPath    string // a path the Gmail spec allows
}

func newAdvFixture(t *testing.T, name string) *advFixture {
	t.Helper()
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", name)
	op := gmailMessageGet(t)
	host := hostOnly(authority(op.Hosts[0]))
	return &advFixture{
		d: d, s: s, auth: s.auth(t),
		gmailHost: host, gmailAuth: authority(op.Hosts[0]),
		mitm:   tlsOpts{SNI: host, Roots: s.caPool(t)},
		okPath: concretePath(op.Path, "adv"),
	}
}

// assertQuiet fails t if any of hosts saw an upstream request during fn.
func assertQuiet(t *testing.T, hosts []string, fn func()) {
	t.Helper()
	up := theSuite.up
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

// TestAuthorityMismatch: inside a tunnel to one allowed host, requests whose
// Host or absolute-form target name another (allowed) host or port.
func TestAuthorityMismatch(t *testing.T) {
	f := newAdvFixture(t, "authority")
	cases := []struct{ name, raw string }{
		{"inner_host_other_allowed_host",
			"POST /graphql HTTP/1.1\r\nHost: api.linear.app\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"},
		{"absolute_form_other_host", "GET https://api.linear.app/graphql HTTP/1.1\r\nHost: " + f.gmailHost + "\r\nConnection: close\r\n\r\n"},
		{"absolute_form_and_host_other_host", "GET https://api.linear.app/graphql HTTP/1.1\r\nHost: api.linear.app\r\nConnection: close\r\n\r\n"},
		{"host_other_port", getReq(f.okPath, f.gmailHost+":8443")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertQuiet(t, []string{f.gmailHost, "api.linear.app"}, func() {
				o := rawExchange(t, f.d.ProxyAddr, f.auth, f.gmailAuth, f.mitm, tc.raw)
				assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
			})
		})
	}
}

// TestSNIUnlikeConnectHost: CONNECT to one host, ClientHello naming another.
// The proxy may refuse the handshake or deny the request; it must not forward.
func TestSNIUnlikeConnectHost(t *testing.T) {
	f := newAdvFixture(t, "sni")
	assertQuiet(t, []string{f.gmailHost, "api.linear.app"}, func() {
		// Accept any certificate: what matters is whether the proxy lets a
		// request through, not what the client would verify.
		o := rawExchange(t, f.d.ProxyAddr, f.auth, f.gmailAuth, tlsOpts{SNI: "api.linear.app", Insecure: true}, getReq(f.okPath, f.gmailHost))
		if o.Stage == "handshake" && o.Err != nil {
			return // refused at the handshake: fine
		}
		assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "authority_mismatch")
	})
	// Either way the refusal is on the record, naming the SNI it asked for.
	waitAudit(t, f.d, "the fronting refusal", func(lines []auditLine) bool {
		for _, l := range lines {
			if l.str("session") == f.s.ID && l.str("reason") == "authority_mismatch" && l.str("decision") == "deny" &&
				l.str("host") == f.gmailHost && l.detail("sni") == "api.linear.app" {
				return true
			}
		}
		return false
	})
}

// TestNonCanonicalPaths: dot segments (raw and encoded), empty segments,
// encoded slash, backslash and NUL are denied, never normalised and sent.
func TestNonCanonicalPaths(t *testing.T) {
	f := newAdvFixture(t, "paths")
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
			assertQuiet(t, []string{f.gmailHost}, func() {
				o := rawExchange(t, f.d.ProxyAddr, f.auth, f.gmailAuth, f.mitm, getReq(p, f.gmailHost))
				assertDenial(t, o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "non_canonical_path")
			})
		})
	}
}

// TestRedirectNotFollowed: an upstream 302 to another (allowed) host goes back
// to the client; the proxy never fetches the target itself.
func TestRedirectNotFollowed(t *testing.T) {
	f := newAdvFixture(t, "redirect")
	up := theSuite.up
	before := up.HostHits("other.example.com")
	st, h, body := goDo(t, goClient(t, f.s), http.MethodGet, "https://stream.example.com/redirect", "")
	if st != http.StatusFound || h.Get("Location") != "https://other.example.com/landed" {
		t.Errorf("got %d Location=%q, want the upstream's 302 to https://other.example.com/landed; body %s", st, h.Get("Location"), trunc(body))
	}
	if h.Get("X-Aileron-Audit-Id") == "" {
		t.Errorf("passed-through 302 lacks X-Aileron-Audit-Id")
	}
	if n := up.HostHits("other.example.com") - before; n != 0 {
		t.Errorf("the proxy followed the redirect: other.example.com saw %d request(s)", n)
	}
}

// TestRequestSmuggling: ambiguous framing inside the tunnel is answered 400
// malformed_request and neither request reaches the upstream.
func TestRequestSmuggling(t *testing.T) {
	f := newAdvFixture(t, "smuggling")
	streamTLS := tlsOpts{SNI: "stream.example.com", Roots: f.s.caPool(t)}
	smuggled := "GET /echo/smuggled HTTP/1.1\r\nHost: stream.example.com\r\n\r\n"
	cases := []struct{ name, raw string }{
		{"cl_and_te", "POST /echo/cl-te HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled},
		{"te_and_cl", "POST /echo/te-cl HTTP/1.1\r\nHost: stream.example.com\r\nTransfer-Encoding: chunked\r\nContent-Length: 40\r\n\r\n0\r\n\r\n" + smuggled},
		{"two_content_lengths", "POST /echo/two-cl HTTP/1.1\r\nHost: stream.example.com\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"},
		{"te_not_just_chunked", "POST /echo/te-list HTTP/1.1\r\nHost: stream.example.com\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertQuiet(t, []string{"stream.example.com"}, func() {
				o := rawExchange(t, f.d.ProxyAddr, f.auth, "stream.example.com:443", streamTLS, tc.raw)
				assertDenial(t, o.String(), o.Status, o.Body, http.StatusBadRequest, "bad_request", "malformed_request")
			})
		})
	}
}
