package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// newTransport builds the one upstream transport: verified TLS against
// RootCAs (system roots by default), the SSRF guard as dialer, no proxy from
// the environment, no transparent compression (the client's Accept-Encoding
// goes through untouched and bodies are relayed as sent).
func (p *Proxy) newTransport() (*http.Transport, error) {
	roots := p.RootCAs
	if roots == nil {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, err
		}
		roots = sys
	}
	idle := p.t.TunnelIdle
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := p.Guard.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: c, idle: idle}, nil
		},
		TLSClientConfig: &tls.Config{
			RootCAs:    roots,
			MinVersion: tls.VersionTLS12,
		},
		TLSHandshakeTimeout:   p.t.UpstreamTLS,
		ResponseHeaderTimeout: p.t.UpstreamHdr,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false, // HTTP/1.1; build sets it on the h2 transport (wantsH2)
	}, nil
}

// newReverseProxy builds the forwarding stage shared by every request. The
// per-request outbound target travels in the request context (see
// pipeline.go); ReverseProxy strips hop-by-hop headers, Proxy-Authorization
// and client-sent X-Forwarded-* before rewrite runs, streams bodies both
// ways, and relays protocol upgrades. FlushInterval 0 lets ReverseProxy
// flush each write of a streamed answer (unknown length, event streams)
// as it arrives, while a sized answer goes out with its header in one
// write. Copy buffers are pooled.
func (p *Proxy) newReverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      forwarder{p: p},
		FlushInterval:  0,
		BufferPool:     &copyBuffers{},
		ErrorLog:       log.New(debugLines{p}, "", 0), // outcomes go to the record; the cause to the debug log
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamFailed,
	}
}

// wantsH2 reports whether out must reach its upstream over HTTP/2: an
// HTTP/2 request that needs trailers end to end (gRPC says so with
// "TE: trailers" and an application/grpc body), which HTTP/1.1 cannot
// carry to a gRPC server. Everything else goes over HTTP/1.1, where each
// request has its upstream connection to itself.
func wantsH2(out *http.Request) bool {
	if out.ProtoMajor != 2 {
		return false
	}
	if strings.HasPrefix(out.Header.Get("Content-Type"), "application/grpc") {
		return true
	}
	for _, v := range out.Header.Values("Te") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "trailers") {
				return true
			}
		}
	}
	return false
}

// debugLines writes ReverseProxy's own messages (why a body copy broke
// off) to the operational log at debug level; the record has the outcome.
type debugLines struct{ p *Proxy }

func (d debugLines) Write(b []byte) (int, error) {
	d.p.log.Debug().Str("event", "proxy.forward_error").Msg(strings.TrimSpace(string(b)))
	return len(b), nil
}

// copyBuffers is ReverseProxy's BufferPool: 32 KiB buffers, reused.
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) Get() []byte {
	if v, ok := b.pool.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *copyBuffers) Put(buf []byte) { b.pool.Put(&buf) }

// idleConn closes a connection that moves no byte either way for idle.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}
