package integration

import (
	"net/http"
	"path/filepath"
	"testing"
)

// TestPassthroughRefusesDomainFronting: a passthrough tunnel carries TLS for
// its CONNECT host only. A ClientHello naming another host that shares the
// address (here api.linear.app, served by the same fake upstream) or naming
// none is refused before a byte reaches the upstream, and audited
// authority_mismatch; the honest tunnel still works.
func TestPassthroughRefusesDomainFronting(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "fronting")
	roots := certPoolFrom(t, filepath.Join(theSuite.pkiDir, "root.pem"))
	const path = "/fronting/admin/everything"
	for _, tc := range []struct{ name, sni string }{
		{"another host", "api.linear.app"},
		{"no server name", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := theSuite.up.Hits("api.linear.app", path) + theSuite.up.Hits("passthrough.example.org", path)
			o := rawExchange(t, d.ProxyAddr, s.auth(t), "passthrough.example.org:443",
				tlsOpts{SNI: tc.sni, Roots: roots, Insecure: tc.sni == ""}, "DELETE "+path+" HTTP/1.1\r\nHost: api.linear.app\r\nConnection: close\r\n\r\n")
			if o.Stage == "request" && o.Status != 0 {
				t.Fatalf("a fronted request through the passthrough tunnel was answered: %s", o)
			}
			after := theSuite.up.Hits("api.linear.app", path) + theSuite.up.Hits("passthrough.example.org", path)
			if after != before {
				t.Fatal("the fronted request reached the upstream")
			}
		})
	}
	waitAudit(t, d, "the fronting refusals", func(lines []auditLine) bool {
		refused, named := 0, 0 // two refusals; the one that named another host names it on the record
		for _, l := range lines {
			if l.str("session") == s.ID && l.str("reason") == "authority_mismatch" && l.str("host") == "passthrough.example.org" {
				refused++
				if l.detail("sni") == "api.linear.app" {
					named++
				}
			}
		}
		return refused == 2 && named == 1
	})
	o := rawExchange(t, d.ProxyAddr, s.auth(t), "passthrough.example.org:443", tlsOpts{SNI: "passthrough.example.org", Roots: roots},
		getReq("/fronting/honest", "passthrough.example.org"))
	if o.Status != http.StatusOK {
		t.Fatalf("the honest passthrough request: %s", o)
	}
}
