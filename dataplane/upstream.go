package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// upstreamTLS is the verified client TLS configuration for upstreams:
// RootCAs (else the system roots), TLS 1.2 at least.
func (p *Proxy) upstreamTLS() (*tls.Config, error) {
	roots := p.RootCAs
	if roots == nil {
		sys, err := x509.SystemCertPool()
		if err != nil {
			return nil, err
		}
		roots = sys
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}

// newH2Transport is the HTTP/2 transport for the requests that need it
// (wantsH2: gRPC, TE: trailers), dialling through the Guard.
func (p *Proxy) newH2Transport(base *tls.Config) *http.Transport {
	cfg := base.Clone()
	cfg.NextProtos = nil // the transport offers h2 and http/1.1 itself
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
		TLSClientConfig:       cfg,
		TLSHandshakeTimeout:   p.t.UpstreamTLS,
		ResponseHeaderTimeout: p.t.UpstreamHdr,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       upIdleTimeout,
		DisableCompression:    true,
		ForceAttemptHTTP2:     true,
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

// copyBuffers are the 32 KiB buffers answers are copied through, reused.
type copyBuffers struct{ pool sync.Pool }

func (b *copyBuffers) get() *[]byte {
	if v, ok := b.pool.Get().(*[]byte); ok {
		return v
	}
	buf := make([]byte, 32<<10)
	return &buf
}

func (b *copyBuffers) put(buf *[]byte) { b.pool.Put(buf) }

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
