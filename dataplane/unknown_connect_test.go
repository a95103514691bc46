package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/aileronhq/aileron/policy"
)

// connectLearnEnv is learnEnv in which unknown.example.net:443 and
// pass.example.org:443 resolve to the upstream too (so a dial of either
// would be counted), and pass.example.org is a passthrough host.
func connectLearnEnv(t *testing.T, unknown string, props Proposals) *env {
	e := newEnv(t, func(p *Proxy) {
		p.Proposals = props
		up := p.Guard.Resolve["api.example.com:443"]
		p.Guard.Resolve["unknown.example.net:443"], p.Guard.Resolve["pass.example.org:443"] = up, up
		spec, err := policy.ParseSpec("test.json", []byte(testSpec))
		if err != nil {
			t.Fatal(err)
		}
		pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "test.json"}},
			[]policy.PassthroughRule{{Host: "pass.example.org"}})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		p.Policy.Store(pol)
	})
	e.proxy.Sessions.(staticSessions)["s1"].sess.Unknown = unknown // before any request
	return e
}

// TestLearnUnknownHostOverConnect: in learn mode a CONNECT to a host no
// connector names is intercepted, and its requests (HTTP/1.1 and h2) are
// refused host_not_allowed, learned, and never dialled.
func TestLearnUnknownHostOverConnect(t *testing.T) {
	props := &recordingProposals{}
	e := connectLearnEnv(t, UnknownLearn, props)
	c := e.client(t, url.UserPassword("s1", e.token))
	req, _ := http.NewRequest("GET", "https://unknown.example.net/v2/things/9?key=SECRETQ", nil)
	req.Header.Set("Authorization", "Bearer SECRETH")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	env := readEnvelope(t, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 403 || env.Reason != policy.ReasonHostNotAllowed || env.ProposalID != "prop-GET" {
		t.Errorf("HTTP/1.1: %d %+v; want 403 host_not_allowed with proposal prop-GET", resp.StatusCode, env)
	}

	c2, connResp := rawConnect(t, e, "unknown.example.net:443")
	if connResp.StatusCode != 200 {
		t.Fatalf("CONNECT in learn mode: %d", connResp.StatusCode)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tc := tls.Client(c2, &tls.Config{ServerName: "unknown.example.net", RootCAs: roots, NextProtos: []string{"h2"}})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	cc, err := (&http2.Transport{}).NewClientConn(tc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	req2, _ := http.NewRequest("DELETE", "https://unknown.example.net/v2/things/9", nil)
	resp2, err := cc.RoundTrip(req2)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	_ = resp2.Body.Close()
	if resp2.StatusCode != 403 || !strings.Contains(string(body), `"proposal_id":"prop-DELETE"`) || resp2.ProtoMajor != 2 {
		t.Errorf("h2: %s %d %s; want HTTP/2 403 with proposal prop-DELETE", resp2.Proto, resp2.StatusCode, body)
	}

	if e.hits.Load() != 0 {
		t.Error("a request to an unknown host reached the upstream")
	}
	got := props.learned()
	want := []UnknownRequest{
		{Session: "s1", Method: "GET", Host: "unknown.example.net", Port: 443, Path: "/v2/things/9", Credential: true},
		{Session: "s1", Method: "DELETE", Host: "unknown.example.net", Port: 443, Path: "/v2/things/9"},
	}
	if len(got) != len(want) {
		t.Fatalf("learned %+v; want %+v", got, want)
	}
	for i := range want {
		g := got[i]
		if g.AuditID == "" {
			t.Errorf("learned %d has no audit id", i)
		}
		g.AuditID, g.Time = "", time.Time{}
		if g != want[i] {
			t.Errorf("learned %+v; want %+v", g, want[i])
		}
	}
}

// TestConnectUnchangedOutsideLearn: CONNECTs to unknown hosts stay refused
// in deny mode, without a proposal store and, in learn mode, to a private
// address; a passthrough host is passed through in learn mode as ever,
// and nothing is learned.
func TestConnectUnchangedOutsideLearn(t *testing.T) {
	for _, tc := range []struct {
		name, unknown, target string
		store                 bool
	}{
		{"deny mode", UnknownDeny, "unknown.example.net:443", true},
		{"no store", UnknownLearn, "unknown.example.net:443", false},
		{"private address", UnknownLearn, "127.0.0.2:443", true},
		{"loopback v6", UnknownLearn, "[::1]:443", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			props := &recordingProposals{}
			var store Proposals
			if tc.store {
				store = props
			}
			e := connectLearnEnv(t, tc.unknown, store)
			_, resp := rawConnect(t, e, tc.target)
			env := readEnvelope(t, resp.Body)
			if resp.StatusCode != 403 || env.Reason != policy.ReasonHostNotAllowed || env.ProposalID != "" {
				t.Errorf("CONNECT %s: %d %+v; want 403 host_not_allowed", tc.target, resp.StatusCode, env)
			}
			if len(props.learned()) != 0 || e.hits.Load() != 0 {
				t.Errorf("learned %+v, upstream hits %d", props.learned(), e.hits.Load())
			}
		})
	}
	t.Run("passthrough", func(t *testing.T) {
		props := &recordingProposals{}
		e := connectLearnEnv(t, UnknownLearn, props)
		c, resp := rawConnect(t, e, "pass.example.org:443")
		if resp.StatusCode != 200 {
			t.Fatalf("CONNECT to a passthrough host: %d", resp.StatusCode)
		}
		// The upstream's own certificate, not one of the session CA: the
		// tunnel is passed through, not intercepted.
		tc := tls.Client(c, &tls.Config{ServerName: "pass.example.org", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if cert := tc.ConnectionState().PeerCertificates[0]; cert.CheckSignatureFrom(e.sessCA.Certificate()) == nil {
			t.Fatal("the passthrough host was intercepted")
		}
		if _, err := io.WriteString(tc, "GET /v2/unknown HTTP/1.1\r\nHost: pass.example.org\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, tc)
		if e.hits.Load() != 1 || len(props.learned()) != 0 {
			t.Errorf("upstream hits %d, learned %+v; want the request passed through, nothing learned", e.hits.Load(), props.learned())
		}
	})
}
