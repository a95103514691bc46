package dataplane

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// tunnel is what every request inside one CONNECT shares: who asked, for
// which authority, and what the TLS handshake said.
type tunnel struct {
	sess      *Session
	authority policy.Authority // canonical CONNECT target
	sni       string           // canonical SNI; "" when the client sent none
	id        string           // tunnel id for logs
	client    string           // client address
	api       bool             // the sandbox API host: served by the daemon
	// transparent: the connection came from a fenced sandbox to a
	// transparent listener; no CONNECT was made, so none is answered.
	transparent bool
	// hangup closes an HTTP/2 tunnel's client connection (set by serveH2);
	// nil for HTTP/1.1 and Execute calls.
	hangup func()
}

// tunnelConn is an intercepted tunnel's client connection; closing it
// forgets the tunnel in the proxy's per-session registry. A write the
// client does not take within writeIdle fails, so a client that stops
// reading an answer does not hold the tunnel, its goroutines and the
// upstream exchange.
type tunnelConn struct {
	net.Conn
	t         *tunnel
	forget    func()
	once      sync.Once
	writeIdle time.Duration
}

func (c *tunnelConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.writeIdle))
	return c.Conn.Write(b)
}

// Close closes the connection and forgets the tunnel.
func (c *tunnelConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.forget)
	return err
}

// authenticate identifies the session from Proxy-Authorization. Every
// failure wraps ErrProxyAuth.
func (p *Proxy) authenticate(r *http.Request) (*Session, error) {
	h := r.Header.Get("Proxy-Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return nil, ErrProxyAuth
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return nil, ErrProxyAuth
	}
	id, token, ok := strings.Cut(string(raw), ":")
	if !ok || id == "" || token == "" {
		return nil, ErrProxyAuth
	}
	s, err := p.Sessions.Authenticate(id, token)
	if err != nil {
		return nil, errors.Join(ErrProxyAuth, err)
	}
	return s, nil
}

// handleConnect decides a CONNECT: authenticate, canonicalise the
// authority, then intercept (MITM), tunnel (passthrough) or refuse.
func (p *Proxy) handleConnect(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
	rec := p.newRecord(ctx.Req)
	reject := func(err error) (*goproxy.ConnectAction, string) {
		ref := classify(err)
		rec.refused(ref)
		p.finish(rec)
		ref.AuditID = rec.AuditID
		ctx.Resp = ref.Response(ctx.Req)
		return &goproxy.ConnectAction{Action: goproxy.ConnectReject}, host
	}
	sess, err := p.authenticate(ctx.Req)
	if err != nil {
		return reject(err)
	}
	rec.Session = sess.ID
	auth, err := policy.ParseAuthority(host, 443)
	if err != nil {
		return reject(deny(policy.ReasonBadRequest, "CONNECT target %q is not host:port: %v", host, err))
	}
	rec.Host, rec.Port = auth.Host, auth.Port
	t := &tunnel{sess: sess, authority: auth, id: rec.AuditID, client: ctx.Req.RemoteAddr}
	if p.SandboxAPI != nil && auth.Host == p.apiHost() {
		if auth.Port != 443 {
			return reject(deny(policy.ReasonHostNotAllowed, "the sandbox API is at https://%s (port 443), not port %d", auth.Host, auth.Port))
		}
		t.api = true
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			p.intercept(c, t)
		}}, host
	}
	d := p.Policy.Load().DecideConnect(auth.Host, auth.Port, sess.Connectors)
	switch d.Verdict {
	case policy.Allow:
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			p.intercept(c, t)
		}}, host
	case policy.Passthrough:
		rec.Name, rec.Decision, rec.Reason = audit.EventPassthrough, d.Verdict.String(), string(d.Reason)
		return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
			p.passthrough(c, t, rec)
		}}, host
	default:
		if p.learnsHost(sess, auth, d) { // its requests are learned and refused, never sent
			return &goproxy.ConnectAction{Action: goproxy.ConnectHijack, Hijack: func(_ *http.Request, c net.Conn, _ *goproxy.ProxyCtx) {
				p.intercept(c, t)
			}}, host
		}
		return reject(&DenyError{Reason: d.Reason, Message: d.Message})
	}
}

// intercept answers the CONNECT, completes TLS with a leaf from the
// session's CA within the handshake timeout, checks that SNI agrees with the
// CONNECT authority, and serves the tunnel: serveH1, or serveH2 when the
// client chose h2.
func (p *Proxy) intercept(c net.Conn, t *tunnel) {
	_ = c.SetDeadline(time.Now().Add(p.t.Handshake))
	if err := p.connected(c, t); err != nil {
		_ = c.Close()
		return
	}
	var sniErr error
	var sniSent string
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName != "" {
				sni, err := policy.CanonicalHost(hello.ServerName)
				if err != nil || sni != t.authority.Host {
					sniErr = deny(policy.ReasonAuthorityMismatch, "TLS SNI %q does not match the CONNECT host %q", clip(hello.ServerName), t.authority.Host)
					sniSent = hello.ServerName
					return nil, sniErr
				}
				t.sni = sni
			}
			return t.sess.CA.Leaf(t.authority.Host)
		},
	}
	tc := tls.Server(c, cfg)
	if err := tc.Handshake(); err != nil {
		if sniErr != nil { // domain fronting: a refusal like any other, on the record
			p.sniRefused(t, sniSent, sniErr)
		} else {
			p.log.Info().Str("event", "proxy.handshake_failed").Str("session", t.sess.ID).
				Str("host", t.authority.Host).Str("reason", "tls_handshake_failed").Msg(err.Error())
		}
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if tc.ConnectionState().NegotiatedProtocol == "h2" {
		p.serveH2(tc, c, t)
		return
	}
	guarded := NewFramingGuard(tc, FramingOptions{MaxHeaderBytes: p.t.MaxHeader, Reject: p.malformed(t)})
	conn := &tunnelConn{Conn: guarded, t: t, forget: p.open.add(c, t), writeIdle: p.t.BodyIdle}
	if err := p.Sessions.Live(t.sess.ID); err != nil { // revoked during the handshake: cut, audited
		p.cut(t.sess.ID, err, nil)
		_ = conn.Close()
		return
	}
	p.serveH1(conn, tc.ConnectionState())
}

// connected answers an explicit CONNECT with 200; a transparent
// connection made none and gets nothing.
func (p *Proxy) connected(c net.Conn, t *tunnel) error {
	if t.transparent {
		return nil
	}
	_, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	return err
}

// sniRefused audits an intercepted tunnel whose TLS ClientHello named
// another server than the one the tunnel was opened to (CONNECT, or the
// name a fenced sandbox resolved): the handshake is aborted, so the client
// gets no HTTP answer (status 0), and the line names what it asked for.
func (p *Proxy) sniRefused(t *tunnel, sni string, err error) {
	rec := p.newRecord(nil)
	rec.Session, rec.Client, rec.Host, rec.Port = t.sess.ID, t.client, t.authority.Host, t.authority.Port
	rec.refused(classify(err))
	rec.Status = 0
	rec.Details = map[string]string{"sni": clip(sni)}
	p.finish(rec)
}

// passthrough relays raw bytes between the client and the vetted upstream,
// closing both when either side stays silent for the tunnel idle timeout.
// The client's ClientHello must name the CONNECT host: a tunnel opened to
// an allowed host and then pointed at another one sharing its address
// (domain fronting) is refused, as is one whose ClientHello names no host.
func (p *Proxy) passthrough(c net.Conn, t *tunnel, rec *Record) {
	p.raw.Add(1)
	defer p.raw.Done()
	p.tunnelsOpen.Add(1)
	defer p.tunnelsOpen.Add(-1)
	var up net.Conn
	err := p.decided(rec)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.t.UpstreamTLS+p.Guard.dialTimeout())
		up, err = p.Guard.DialContext(ctx, "tcp", t.authority.String())
		cancel()
		if err != nil {
			err = &upstreamError{Authority: t.authority.String(), Err: err}
		}
	}
	if err != nil {
		ref := classify(err)
		rec.refused(ref)
		p.finish(rec)
		ref.AuditID = rec.AuditID
		if !t.transparent { // a transparent client expects TLS: it is closed, not answered
			_ = ref.Response(nil).Write(c)
		} else {
			rec.Status = 0
		}
		_ = c.Close()
		return
	}
	if err := p.connected(c, t); err != nil {
		_ = c.Close()
		_ = up.Close()
		return
	}
	defer p.open.add(c, t)()
	if err := p.Sessions.Live(t.sess.ID); err != nil { // revoked during the dial: cut, audited
		p.cut(t.sess.ID, err, nil)
		_ = up.Close()
		return
	}
	p.trackRaw(c, true)
	p.trackRaw(up, true)
	defer p.trackRaw(c, false)
	defer p.trackRaw(up, false)
	hello := peekHello(c, p.t.Handshake)
	if err := helloMismatch(hello, t.authority); err != nil {
		rec.refused(classify(err))
		rec.Status = 0 // the client had its 200 to the CONNECT; the tunnel is closed, not answered
		rec.BytesIn = int64(len(hello.raw))
		if hello.name != "" {
			rec.Details = map[string]string{"sni": clip(hello.name)}
		}
		p.finish(rec)
		_ = c.Close()
		_ = up.Close()
		return
	}
	if _, err := up.Write(hello.raw); err != nil {
		_ = c.Close()
		_ = up.Close()
		return
	}
	in, out := splice(&idleConn{Conn: c, idle: p.t.TunnelIdle}, &idleConn{Conn: up, idle: p.t.TunnelIdle})
	in += int64(len(hello.raw))
	rec.BytesIn, rec.BytesOut, rec.Status = in, out, http.StatusOK
	p.finish(rec)
}

// splice copies both ways until either side ends, then closes both.
func splice(client, upstream net.Conn) (fromClient, toClient int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fromClient, _ = io.Copy(upstream, client)
		_ = upstream.Close()
		_ = client.Close()
	}()
	toClient, _ = io.Copy(client, upstream)
	_ = client.Close()
	_ = upstream.Close()
	wg.Wait()
	return fromClient, toClient
}

// guardedListener puts a FramingGuard on every accepted client connection.
type guardedListener struct {
	net.Listener
	max    int
	reject func(error) string
}

func (l *guardedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewFramingGuard(c, FramingOptions{MaxHeaderBytes: l.max, Reject: l.reject}), nil
}
