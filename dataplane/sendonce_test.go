package dataplane

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// rawH2Up is an h2 upstream for api.example.com that speaks frames
// itself: serve runs for each connection after the preface was read and
// the server's SETTINGS (settings(n), for connection n from 1; nil: none) written.
type rawH2Up struct {
	ln      net.Listener
	roots   *x509.CertPool
	accepts atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
}

func newRawH2Up(t *testing.T, settings func(n int64) []http2.Setting, serve func(n int64, fr *http2.Framer, c net.Conn)) *rawH2Up {
	t.Helper()
	upCA, err := ca.New(ca.Options{CommonName: "raw upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawH2Up{ln: ln, roots: x509.NewCertPool()}
	u.roots.AddCert(upCA.Certificate())
	cfg := &tls.Config{NextProtos: []string{"h2"}, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return upCA.Leaf("api.example.com")
	}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := u.accepts.Add(1)
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				tc := tls.Server(c, cfg)
				if tc.Handshake() != nil {
					return
				}
				pre := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(tc, pre); err != nil {
					return
				}
				fr := http2.NewFramer(tc, tc)
				var set []http2.Setting
				if settings != nil {
					set = settings(n)
				}
				_ = fr.WriteSettings(set...)
				serve(n, fr, tc)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			_ = c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *rawH2Up) tune(p *Proxy) {
	p.RootCAs = u.roots
	p.Guard.Resolve = map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort(u.ln.Addr().String())}
}

const sendOnceSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/once", "version": "1.0.0"},
  "tools": [{"name": "items", "operations": [
    {"name": "items.get", "method": "GET", "path": "/v1/items/{id}", "hosts": ["api.example.com"]},
    {"name": "mail.send", "method": "GET", "path": "/v1/send/{id}", "hosts": ["api.example.com"], "approval": "required", "idempotency": "not_idempotent"}
  ]}]
}`

type countingApprovals struct{ n atomic.Int64 }

func (a *countingApprovals) Await(context.Context, *ApprovalRequest, time.Duration) (ApprovalResult, error) {
	a.n.Add(1)
	return ApprovalResult{ID: "ap_once", Outcome: ApprovalApproved}, nil
}

func (a *countingApprovals) Covers(context.Context, string, string, string) error {
	return errors.New("no actions here")
}

// TestH2ApprovedRequestSentOnce: an approved request (a GET whose
// operation says not_idempotent) that the upstream received on a pooled
// HTTP/2 connection, which then broke before the answer, must not be
// sent a second time: what a human approved is sent once.
func TestH2ApprovedRequestSentOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	up := newRawH2Up(t, nil, func(_ int64, fr *http2.Framer, c net.Conn) {
		dec := hpack.NewDecoder(4096, nil)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.HeadersFrame:
				fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
				var path string
				for _, hf := range fields {
					if hf.Name == ":path" {
						path = hf.Value
					}
				}
				mu.Lock()
				seen[path]++
				mu.Unlock()
				if strings.HasPrefix(path, "/v1/send/") {
					_ = c.Close() // acted on it, then the connection broke before the answer
					return
				}
				var b bytes.Buffer
				_ = hpack.NewEncoder(&b).WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: b.Bytes(), EndHeaders: true, EndStream: true})
			}
		}
	})
	appr := &countingApprovals{}
	e := newEnvUp(t, func(p *Proxy) {
		up.tune(p)
		spec, err := policy.ParseSpec("once.json", []byte(sendOnceSpec))
		if err != nil {
			t.Fatal(err)
		}
		pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "once.json"}}, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		h := &policy.Holder{}
		h.Store(pol)
		p.Policy = h
		p.Approvals = appr
	}, false)
	cc := e.h2Client(t)
	for _, path := range []string{"/v1/items/1", "/v1/send/1"} {
		req, _ := http.NewRequest("GET", "https://api.example.com"+path, nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		t.Logf("%s: %d", path, resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("approvals asked %d, upstream saw %v, connections %d", appr.n.Load(), seen, up.accepts.Load())
	if seen["/v1/send/1"] != 1 {
		t.Fatalf("the approved request reached the upstream %d times, want once", seen["/v1/send/1"])
	}
}

// TestH1ApprovedRequestSentOnce: the HTTP/1.1 leg's counterpart
// (a connection the upstream closed after acting on the request, before its answer).
func TestH1ApprovedRequestSentOnce(t *testing.T) {
	upCA, err := ca.New(ca.Options{CommonName: "raw h1 root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.URL.Path]++
			mu.Unlock()
			if strings.HasPrefix(r.URL.Path, "/v1/send/") {
				c, _, _ := http.NewResponseController(w).Hijack()
				_ = c.Close()
			}
		}),
		TLSConfig: &tls.Config{NextProtos: []string{"http/1.1"}, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return upCA.Leaf("api.example.com")
		}},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	e := newEnvUp(t, func(p *Proxy) {
		p.RootCAs = roots
		p.Guard.Resolve = map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort(ln.Addr().String())}
		spec, _ := policy.ParseSpec("once.json", []byte(sendOnceSpec))
		pol, _ := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "once.json"}}, nil)
		h := &policy.Holder{}
		h.Store(pol)
		p.Policy = h
		p.Approvals = &countingApprovals{}
	}, false)
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, path := range []string{"/v1/items/1", "/v1/send/1"} {
		resp, err := c.Get("https://api.example.com" + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["/v1/send/1"] != 1 {
		t.Fatalf("the approved request reached the upstream %d times, want once (%v)", seen["/v1/send/1"], seen)
	}
}
