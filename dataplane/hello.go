package dataplane

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"slices"
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

// clientHello is what peekHello learnt of a ClientHello.
type clientHello struct {
	name string // canonical server name; "" when none or not TLS
	ech  bool   // it carries encrypted_client_hello: the real name is hidden
	raw  []byte // every byte read, which must go to the upstream first
}

// extECH is the encrypted_client_hello extension (RFC 9849).
const extECH = 0xfe0d

// peekHello reads the client's TLS ClientHello from c within timeout.
func peekHello(c net.Conn, timeout time.Duration) clientHello {
	hc := &helloConn{Conn: c}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	var h clientHello
	srv := tls.Server(hc, &tls.Config{GetConfigForClient: func(info *tls.ClientHelloInfo) (*tls.Config, error) {
		h.name = info.ServerName
		h.ech = slices.Contains(info.Extensions, extECH)
		return nil, errHelloSeen
	}})
	_ = srv.Handshake() // always fails: at errHelloSeen, or on bytes that are not a ClientHello
	h.raw = hc.seen.Bytes()
	if h.name != "" {
		if canon, err := policy.CanonicalHost(h.name); err == nil {
			h.name = canon
		} else {
			h.name = ""
		}
	}
	return h
}

// helloMismatch refuses a passthrough tunnel whose ClientHello does not
// plainly name its CONNECT host: another name (domain fronting), none, or
// an encrypted inner ClientHello that could name any.
func helloMismatch(h clientHello, a policy.Authority) error {
	switch {
	case h.ech:
		return deny(policy.ReasonAuthorityMismatch, "the TLS ClientHello through the passthrough tunnel to %s carries Encrypted Client Hello, "+
			"so the server it asks for cannot be checked; turn ECH off in the client (Chromium sends it even without a real ECH config: "+
			"--disable-features=EncryptedClientHello)", a)
	case h.name == "":
		return deny(policy.ReasonAuthorityMismatch, "the TLS ClientHello through the passthrough tunnel to %s names no server (or is not TLS); "+
			"a passthrough tunnel must name its CONNECT host", a)
	case h.name != a.Host:
		return deny(policy.ReasonAuthorityMismatch, "the TLS ClientHello through the passthrough tunnel to %s names %q; it must name the CONNECT host", a, h.name)
	}
	return nil
}
