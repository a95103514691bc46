package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"net/url"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/ca"
)

// newH2UpEnv is newEnv whose api.example.com is handler, served over h2.
func newH2UpEnv(t *testing.T, tune func(*Proxy), handler http.HandlerFunc) *env {
	t.Helper()
	upCA, err := ca.New(ca.Options{CommonName: "attack upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, TLSConfig: &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf("api.example.com") }}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return newEnv(t, func(p *Proxy) {
		p.RootCAs.AddCert(upCA.Certificate())
		p.Guard.Resolve["api.example.com:443"] = netip.MustParseAddrPort(ln.Addr().String())
		if tune != nil {
			tune(p)
		}
	})
}

// TestInterim101NotRelayed: an HTTP/2 upstream sends ":status 101"
// as an informational answer before its 200. The proxy relays it to the
// client as an interim answer (HTTP/2 has no 101, RFC 9113 §8.6) and the
// countingWriter latches 101 as the status: the audit record says 101 for
// an exchange whose client got 200.
func TestInterim101NotRelayed(t *testing.T) {
	rec := &listRecorder{}
	e := newH2UpEnv(t, func(p *Proxy) { p.Recorder = rec }, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Upgrade", "h2c")
		w.WriteHeader(http.StatusSwitchingProtocols) // an interim HEADERS frame over h2
		w.Header().Del("Upgrade")
		_, _ = io.WriteString(w, "final answer")
	})
	cc := e.h2Client(t)
	var mu sync.Mutex
	var interim []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			interim = append(interim, code)
			mu.Unlock()
			return nil
		}})
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/v1/items/1", nil)
	req.Header.Set("Te", "trailers")
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	waitRecords(t, rec, audit.EventProxied, 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if resp.StatusCode != 200 || string(body) != "final answer" {
		t.Fatalf("client got %d %q", resp.StatusCode, body)
	}
	if len(interim) > 0 {
		t.Errorf("a 101 the client never asked for was relayed to it: %v", interim)
	}
	if rec.completed[0].Status != resp.StatusCode {
		t.Errorf("audit record status %d, but the client got %d", rec.completed[0].Status, resp.StatusCode)
	}
}

// TestUpstreamCannotForgeProxyFields: the proxy's own X-Aileron-Audit-Id
// and hop-by-hop fields reach the client from an upstream's 1xx answer and
// from its trailers, which the relay copies without the filtering the
// final head gets.
func TestUpstreamCannotForgeProxyFields(t *testing.T) {
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nX-Aileron-Audit-Id: a_forged103\r\nConnection: close\r\nUpgrade: h2c\r\nKeep-Alive: x\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Aileron-Audit-Id\r\n\r\n2\r\nok\r\n0\r\nX-Aileron-Audit-Id: a_forgedtrailer\r\n\r\n")
	})
	var mu sync.Mutex
	var early []textproto.MIMEHeader
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			mu.Lock()
			early = append(early, h)
			mu.Unlock()
			return nil
		}})
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/v1/items/1", nil)
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(early) != 1 || resp.Header.Get(HeaderAuditID) == "" {
		t.Fatalf("1xx answers %v, audit id %q", early, resp.Header.Get(HeaderAuditID))
	}
	for _, h := range early {
		if h.Get(HeaderAuditID) != "" || h.Get("Connection") != "" || h.Get("Upgrade") != "" {
			t.Errorf("the 1xx the client got carries the upstream's proxy/hop-by-hop fields: %v", h)
		}
	}
	for _, v := range resp.Trailer.Values(HeaderAuditID) {
		if v != resp.Header.Get(HeaderAuditID) {
			t.Errorf("a trailer forges the audit id: %q (head says %q)", v, resp.Header.Get(HeaderAuditID))
		}
	}
}

// newRawH2Env: api.example.com is a scripted HTTP/2 upstream that answers
// every stream with the :status given.
func newRawH2Env(t *testing.T, tune func(*Proxy), status string) *env {
	t.Helper()
	upCA, err := ca.New(ca.Options{CommonName: "raw h2 upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(tl, &tls.Config{NextProtos: []string{"h2"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf("api.example.com") }})
	var wg sync.WaitGroup
	var cmu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cmu.Lock()
			conns = append(conns, c)
			cmu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(c, preface); err != nil {
					return
				}
				fr := http2.NewFramer(c, c)
				_ = fr.WriteSettings()
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
						var b bytes.Buffer
						enc := hpack.NewEncoder(&b)
						_ = enc.WriteField(hpack.HeaderField{Name: ":status", Value: status})
						_ = enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "text/plain"})
						_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: b.Bytes(), EndHeaders: true})
						_ = fr.WriteData(f.StreamID, true, []byte("odd status"))
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
		wg.Wait()
	})
	return newEnv(t, func(p *Proxy) {
		p.RootCAs.AddCert(upCA.Certificate())
		p.Guard.Resolve["api.example.com:443"] = netip.MustParseAddrPort(tl.Addr().String())
		if tune != nil {
			tune(p)
		}
	})
}

// TestBadUpstreamStatusRefused: an HTTP/2 upstream answering a status
// outside 200–999 (Go's HTTP/2 transport takes any number) gets the client
// a 502 envelope, and the exchange its outcome line.
func TestBadUpstreamStatusRefused(t *testing.T) {
	for _, status := range []string{"099", "1000"} {
		t.Run(status, func(t *testing.T) {
			rec := &listRecorder{}
			e := newRawH2Env(t, func(p *Proxy) { p.Recorder = rec }, status)
			cc := e.h2Client(t)
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/1", nil)
			req.Header.Set("Te", "trailers")
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := readEnvelope(t, resp.Body); resp.StatusCode != http.StatusBadGateway || got.Reason != "upstream_unavailable" {
				t.Fatalf("%d %+v, want 502 upstream_unavailable", resp.StatusCode, got)
			}
			waitRecords(t, rec, audit.EventRejected, 1)
		})
	}
}
