package dataplane

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// errHelloSeen stops the handshake once the ClientHello has been read.
var errHelloSeen = errors.New("client hello read")

// maxHello bounds how much a client may send before its ClientHello is
// complete.
const maxHello = 64 << 10

// helloConn records what the client sends and discards what the TLS stack
// would answer: the ClientHello is read, never answered.
type helloConn struct {
	net.Conn
	seen bytes.Buffer
}

func (c *helloConn) Read(b []byte) (int, error) {
	if c.seen.Len() >= maxHello {
		return 0, errors.New("no complete ClientHello in the first 64 KiB")
	}
	n, err := c.Conn.Read(b[:min(len(b), maxHello-c.seen.Len())])
	c.seen.Write(b[:n])
	return n, err
}

func (c *helloConn) Write(b []byte) (int, error) { return len(b), nil }

// peekServerName reads the client's TLS ClientHello from c within timeout
// and returns the canonical server name it asks for ("" when it names none
// or is not TLS) and every byte read, which must go to the upstream first.
func peekServerName(c net.Conn, timeout time.Duration) (string, []byte) {
	hc := &helloConn{Conn: c}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var name string
	srv := tls.Server(hc, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name = h.ServerName
		return nil, errHelloSeen
	}})
	_ = srv.Handshake() // always fails: at errHelloSeen, or on bytes that are not a ClientHello
	if name == "" {
		return "", hc.seen.Bytes()
	}
	canon, err := policy.CanonicalHost(name)
	if err != nil {
		return "", hc.seen.Bytes()
	}
	return canon, hc.seen.Bytes()
}
