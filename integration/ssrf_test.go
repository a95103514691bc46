package integration

import (
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"
)

// ssrfTarget is one host the SSRF daemon must refuse to dial.
type ssrfTarget struct {
	name, authority string
	dialTo          string // upstream.resolve target; "" dials the literal
	path            string // request path for spec hosts; "" for passthrough hosts
}

// ssrfTargets are spec and passthrough hosts resolved to loopback (v4,
// 4-in-6, v6), to the proxy's own address, to the approvals page (web, an
// address egress.allow_cidrs covers: the daemon's own listeners are refused
// whatever it says), and the metadata IP literal.
func ssrfTargets(t *testing.T, self, web string) []ssrfTarget {
	t.Helper()
	st := theSuite
	tapV4 := net.JoinHostPort("127.0.0.1", st.loopTap.Port())
	tapMapped := "[::ffff:127.0.0.1]:" + st.loopTap.Port()
	tapV6 := "[::1]:9"
	if st.loop6Tap != nil {
		tapV6 = "[::1]:" + st.loop6Tap.Port()
	}
	reg := regionalOp(t)
	gm := gmailMessageGet(t)
	return []ssrfTarget{
		{"spec_host_to_127.0.0.1", authority(gm.Hosts[0]), tapV4, concretePath(gm.Path, "ssrf")},
		{"spec_host_to_4in6_loopback", authority(hostWithPort(reg.Hosts, "")), tapMapped, concretePath(reg.Path, "ssrf")},
		{"spec_host_to_proxy_itself", authority(hostWithPort(reg.Hosts, "8443")), self, concretePath(reg.Path, "ssrf")},
		{"passthrough_to_127.0.0.1", "ssrf-v4.example.org:443", tapV4, ""},
		{"passthrough_to_4in6_loopback", "ssrf-mapped.example.org:443", tapMapped, ""},
		{"passthrough_to_ipv6_loopback", "ssrf-v6.example.org:443", tapV6, ""},
		{"passthrough_to_proxy_itself", "ssrf-self.example.org:443", self, ""},
		{"passthrough_to_approvals_page", "ssrf-web.example.org:443", web, ""},
		{"passthrough_metadata_ip", "169.254.169.254:443", "", ""},
	}
}

// ssrfConfig is the SSRF daemon's configuration: listen on self, the
// approvals page on web (inside egress.allow_cidrs), resolve and passthrough
// entries for targets, api.linear.app to the real fake upstream,
// handshake_timeout 1s.
func ssrfConfig(self, web string, targets []ssrfTarget) map[string]any {
	resolve := map[string]string{"api.linear.app:443": theSuite.up.Addr}
	passthrough := []any{}
	for _, tg := range targets {
		if tg.dialTo != "" {
			resolve[tg.authority] = tg.dialTo
		}
		if tg.path == "" {
			h, _, _ := net.SplitHostPort(tg.authority)
			passthrough = append(passthrough, map[string]any{"host": h, "port": 443})
		}
	}
	return map[string]any{
		"proxy":    map[string]any{"listen": self, "passthrough": passthrough, "handshake_timeout": "1s"},
		"upstream": map[string]any{"resolve": resolve, "ca_files": []string{filepath.Join(theSuite.pkiDir, "root.pem")}},
		"egress":   map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
		"admin":    map[string]any{"web_listen": web},
		"log":      map[string]any{"level": "debug"},
	}
}

// TestSSRFAndHandshake runs a dedicated daemon whose upstream.resolve points
// spec and passthrough hosts at loopback and itself, with a passthrough rule
// for the metadata address. Every one must be refused with private_address
// and nothing dialled. The same daemon has handshake_timeout 1s for the
// stalled-ClientHello test, and proxy variables in its environment that it
// must ignore.
func TestSSRFAndHandshake(t *testing.T) {
	self := freeLoopbackAddr(t)
	web := freeAddrOn(t, "127.0.0.2")
	targets := ssrfTargets(t, self, web)
	dead := "http://127.0.0.1:1"
	d := theSuite.startTestDaemon(t, ssrfConfig(self, web, targets),
		[]string{"HTTPS_PROXY=" + dead, "HTTP_PROXY=" + dead, "ALL_PROXY=" + dead, "https_proxy=" + dead, "http_proxy=" + dead})
	for _, name := range []string{"gmail", "linear", "regional"} {
		d.install(t, mustSpec(t, name))
	}
	s := d.newSession(t, "--name", "ssrf")

	t.Run("control_allowed_request_ignores_proxy_env", func(t *testing.T) {
		st, h, body := goDo(t, goClient(t, s), http.MethodPost, "https://api.linear.app/graphql", `{"query":"{ viewer { id } }"}`)
		if st != http.StatusOK || h.Get("X-Aileron-Audit-Id") == "" {
			t.Errorf("allowed request on the SSRF daemon: %d %s", st, trunc(body))
		}
	})
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) { assertPrivateRefused(t, d, s, tg) })
	}
	t.Run("stalled_client_hello_closed", func(t *testing.T) {
		tun, o := rawConnect(t, d.ProxyAddr, "api.linear.app:443", s.auth(t))
		if tun == nil {
			t.Fatalf("CONNECT api.linear.app:443 refused: %s", o)
		}
		defer tun.Close()
		// Send nothing. handshake_timeout is 1s; allow far more before
		// calling it a hang.
		_ = tun.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err := io.Copy(io.Discard, tun)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the proxy kept a tunnel with no ClientHello open for 30s (handshake_timeout is 1s)")
		}
	})
}

// assertPrivateRefused sends a CONNECT (passthrough) or a request (spec host)
// for tg and expects 403 private_address with no loopback dial.
func assertPrivateRefused(t *testing.T, d *daemon, s *session, tg ssrfTarget) {
	t.Helper()
	st := theSuite
	v4, v6 := st.loopTap.accepted.Load(), int64(0)
	if st.loop6Tap != nil {
		v6 = st.loop6Tap.accepted.Load()
	}
	var o outcome
	if tg.path == "" {
		var tun net.Conn
		tun, o = rawConnect(t, d.ProxyAddr, tg.authority, s.auth(t))
		if tun != nil {
			_ = tun.Close()
			t.Fatalf("CONNECT %s (resolved to %q) was tunnelled; want 403 private_address", tg.authority, tg.dialTo)
		}
	} else {
		h, p, _ := net.SplitHostPort(tg.authority)
		hostHdr := h
		if p != "443" {
			hostHdr = tg.authority
		}
		o = rawExchange(t, d.ProxyAddr, s.auth(t), tg.authority, tlsOpts{SNI: h, Roots: s.caPool(t)}, getReq(tg.path, hostHdr))
	}
	assertDenial(t, tg.name+" "+o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "private_address")
	if st.loopTap.accepted.Load() != v4 || (st.loop6Tap != nil && st.loop6Tap.accepted.Load() != v6) {
		t.Errorf("the proxy dialled the loopback target %s", tg.dialTo)
	}
}

// freeLoopbackAddr returns a 127.0.0.1 address that was free a moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	return freeAddrOn(t, "127.0.0.1")
}

// freeAddrOn returns ip:port with a port free on ip right now.
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp4", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
