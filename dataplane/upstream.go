package dataplane

import (
	"crypto/tls"
	"crypto/x509"
	"net"
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

// idleConn closes a connection that moves no byte either way for idle
// (zero: never; set once, before the connection is shared).
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	if c.idle > 0 {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	if c.idle > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Write(b)
}
