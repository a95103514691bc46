package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Tunnel opens a CONNECT to api.example.com through e's proxy and
// completes TLS offering only h2; it returns the TLS connection.
func (e *env) h2Tunnel(t *testing.T) *tls.Conn {
	t.Helper()
	c, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	auth := base64.StdEncoding.EncodeToString([]byte("s1:" + e.token))
	fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots, NextProtos: []string{"h2"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	return tc
}

// h2Head is the header block of a GET to api.example.com with the given
// :scheme and :path, for tests that write frames themselves.
func h2Head(scheme, path string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", scheme}, {":authority", "api.example.com"}, {":path", path}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return b.Bytes()
}

// h2Client is an HTTP/2 client connection over a tunnel of e's.
func (e *env) h2Client(t *testing.T) *http2.ClientConn {
	t.Helper()
	cc, err := (&http2.Transport{}).NewClientConn(e.h2Tunnel(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// TestH2StreamsTakeThePipeline: each HTTP/2 stream is decided like an
// HTTP/1.1 request, and a stream for another origin gets 421.
func TestH2StreamsTakeThePipeline(t *testing.T) {
	e := newEnv(t, nil)
	cc := e.h2Client(t)
	for _, c := range []struct {
		method, host, path string
		status             int
		reason             string
	}{
		{"GET", "api.example.com", "/v1/items/42", 200, ""},
		{"GET", "api.example.com", "/v1/items", 403, "no_matching_operation"},
		{"GET", "other.example.com", "/v1/items/42", 421, "authority_mismatch"},
		{"GET", "api.example.com:8443", "/v1/items/42", 421, "authority_mismatch"},
		{"GET", "api.example.com", "/v1/../v1/items/42", 403, "non_canonical_path"},
		{"POST", "api.example.com", "/v1/items", 200, ""},
	} {
		before := e.hits.Load()
		req, _ := http.NewRequest(c.method, "https://"+c.host+c.path, strings.NewReader("{}"))
		req.URL.Opaque = c.path // keep the path as sent
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s%s: %v", c.method, c.host, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != c.status || (c.reason != "" && !strings.Contains(string(body), `"reason":"`+c.reason+`"`)) {
			t.Errorf("%s %s%s: %d %s; want %d %s", c.method, c.host, c.path, resp.StatusCode, body, c.status, c.reason)
		}
		if reached := e.hits.Load() > before; reached != (c.status == 200) {
			t.Errorf("%s %s%s: reached the upstream: %v", c.method, c.host, c.path, reached)
		}
	}
}

// gatedApprovals holds every approval until release is closed, then
// approves.
type gatedApprovals struct {
	release chan struct{}
	asked   chan struct{}
}

func (g *gatedApprovals) Await(ctx context.Context, _ *ApprovalRequest, _ time.Duration) (ApprovalResult, error) {
	g.asked <- struct{}{}
	select {
	case <-g.release:
		return ApprovalResult{ID: "ap_h2", Outcome: ApprovalApproved}, nil
	case <-ctx.Done():
		return ApprovalResult{}, ctx.Err()
	}
}

func (g *gatedApprovals) Covers(context.Context, string, string, string) error {
	return fmt.Errorf("no actions here")
}

// TestH2HeldStreamLeavesOthersFlowing: while one stream waits for a human,
// other streams on the same connection are decided and answered; the held
// one is forwarded once approved.
func TestH2HeldStreamLeavesOthersFlowing(t *testing.T) {
	g := &gatedApprovals{release: make(chan struct{}), asked: make(chan struct{}, 1)}
	e := newEnv(t, func(p *Proxy) { p.Approvals = g })
	cc := e.h2Client(t)
	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/7", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Logf("held stream: %v", err)
			held <- -1
			return
		}
		_ = resp.Body.Close()
		held <- resp.StatusCode
	}()
	select {
	case <-g.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the DELETE never asked for approval")
	}
	for i := range 5 {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com/v1/items/%d", i), nil)
		resp, err := cc.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("stream beside the held one: %v %v", resp, err)
		}
		_ = resp.Body.Close()
	}
	select {
	case s := <-held:
		t.Fatalf("the held stream ended (%d) before approval", s)
	default:
	}
	close(g.release)
	if s := <-held; s != 200 {
		t.Fatalf("the approved stream got %d, want 200", s)
	}
}

// TestH2PriorKnowledgeRefused: a client that negotiated HTTP/1.1 and then
// speaks HTTP/2 anyway (prior knowledge) gets no HTTP/2.
func TestH2PriorKnowledgeRefused(t *testing.T) {
	e := newEnv(t, nil)
	c, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	auth := base64.StdEncoding.EncodeToString([]byte("s1:" + e.token))
	fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic %s\r\n\r\n", auth)
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(e.sessCA.Certificate())
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err == nil && resp.StatusCode < 400 {
		t.Fatalf("prior-knowledge HTTP/2 answered %d", resp.StatusCode)
	}
	if e.hits.Load() != 0 {
		t.Fatal("a prior-knowledge request reached the upstream")
	}
}

// TestH2StreamAbuseIsBounded: whatever a client does with streams, the
// proxy never works on more than h2MaxStreams of them at once (the
// upstream never sees more in flight from that connection); a reset flood
// and streams beyond the limit leave the proxy answering; a header block
// grown with CONTINUATION frames past the header limit ends the connection
// and reaches nobody.
func TestH2StreamAbuseIsBounded(t *testing.T) {
	hdr := func(path string) []byte { return h2Head("https", path) }
	for _, c := range []struct {
		name  string
		abuse func(fr *http2.Framer) error
		cut   bool // the server must end the connection, and nothing reach the upstream
	}{
		{"rapid reset", func(fr *http2.Framer) error {
			for id := uint32(1); id < 20000; id += 2 {
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr("/v1/items/1"), EndStream: true, EndHeaders: true}); err != nil {
					return err
				}
				if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
					return err
				}
			}
			return nil
		}, false},
		{"continuation flood", func(fr *http2.Framer) error {
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr("/v1/items/1"), EndHeaders: false}); err != nil {
				return err
			}
			junk := make([]byte, 16<<10)
			for range 4096 {
				if err := fr.WriteContinuation(1, false, junk); err != nil {
					return err
				}
			}
			return nil
		}, true},
		{"streams beyond the limit", func(fr *http2.Framer) error {
			for id := uint32(1); id < 2*h2MaxStreams*8; id += 2 { // never ends them: each holds a handler
				if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hdr("/v1/items/1"), EndStream: false, EndHeaders: true}); err != nil {
					return err
				}
			}
			return nil
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(p *Proxy) { p.Timeouts.MaxHeader = 8 << 10 })
			tc := e.h2Tunnel(t)
			if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(tc, tc)
			_ = fr.WriteSettings()
			closed := make(chan error, 1)
			go func() { // read until the server hangs up
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						closed <- err
						return
					}
					if ga, ok := f.(*http2.GoAwayFrame); ok && ga.ErrCode != http2.ErrCodeNo {
						closed <- fmt.Errorf("GOAWAY %v", ga.ErrCode)
						return
					}
				}
			}()
			_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
			werr := c.abuse(fr)
			select {
			case err := <-closed:
				t.Logf("connection ended: %v (writer: %v)", err, werr)
			case <-time.After(5 * time.Second):
				if c.cut {
					t.Fatal("the connection is still served after the abuse")
				}
			}
			_ = tc.Close()
			if c.cut && e.hits.Load() != 0 {
				t.Errorf("the upstream saw %d requests", e.hits.Load())
			}
			if m := e.maxInflight.Load(); m > h2MaxStreams {
				t.Errorf("the upstream had %d requests of one connection in flight at once, want at most %d", m, h2MaxStreams)
			}
			resp, err := e.client(t, url.UserPassword("s1", e.token)).Get("https://api.example.com/v1/items/2")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("after the abuse, a new request: %v %v", resp, err)
			}
			_ = resp.Body.Close()
		})
	}
}

// TestHeldRequestsPerSessionBounded: a session cannot park more than
// maxHeldRequests requests waiting for a human, however many streams it
// opens; the next one is refused at once with approval_limit.
func TestHeldRequestsPerSessionBounded(t *testing.T) {
	g := &gatedApprovals{release: make(chan struct{}), asked: make(chan struct{}, maxHeldRequests+1)}
	e := newEnv(t, func(p *Proxy) { p.Approvals = g })
	cc := e.h2Client(t)
	statuses := make(chan int, maxHeldRequests+1)
	for i := range maxHeldRequests + 1 {
		go func() {
			req, _ := http.NewRequest("DELETE", fmt.Sprintf("https://api.example.com/v1/items/%d", i), nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				statuses <- -1
				return
			}
			_ = resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	select {
	case s := <-statuses:
		if s != http.StatusTooManyRequests {
			t.Fatalf("the first answer was %d, want 429 for the request over the limit", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no request was refused: every one was held")
	}
	close(g.release)
	for range maxHeldRequests {
		if s := <-statuses; s != 200 {
			t.Errorf("a held request got %d once approved", s)
		}
	}
}
