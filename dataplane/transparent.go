package dataplane

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// ErrNotResolved is wrapped by Origins.Origin when a connection's
// destination is not an address the sandbox's DNS handed out.
var ErrNotResolved = errors.New("destination was not resolved through Aileron's DNS")

// Origins tells a transparent listener whose connection it accepted. The
// fence (a sandbox's veth and policy DNS) implements it.
type Origins interface {
	// Origin returns the live session of the fenced sandbox at src and the
	// canonical host name its DNS handed dst out for. An error wrapping
	// ErrProxyAuth (src is no sandbox of a live session) or ErrNotResolved
	// refuses the connection.
	Origin(src, dst netip.AddrPort) (*Session, string, error)
}

// transparentListeners are the listeners ServeTransparent accepts on,
// closed by Shutdown.
type transparentListeners struct {
	mu sync.Mutex
	ls map[net.Listener]struct{}
}

func (t *transparentListeners) add(l net.Listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ls == nil {
		t.ls = map[net.Listener]struct{}{}
	}
	t.ls[l] = struct{}{}
}

func (t *transparentListeners) remove(l net.Listener) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ls, l)
}

func (t *transparentListeners) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for l := range t.ls {
		_ = l.Close()
	}
}

// ServeTransparent accepts connections a fenced sandbox made to port 443
// (tls) or 80 (plain HTTP) of an address its DNS handed out, redirected
// to l. The session comes from where the connection came from and the host
// from the name the address was handed out for (o); the connection then
// takes the same path as an explicit CONNECT to that host: intercepted and
// decided per request, passed through, or refused. It returns when l is
// closed (net.ErrClosed) or Shutdown starts.
func (p *Proxy) ServeTransparent(l net.Listener, o Origins, tls bool) error {
	if err := p.init(); err != nil {
		return err
	}
	if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil {
		p.Guard.AddSelf(ap)
		defer p.Guard.removeSelf(ap) // a sandbox's listeners come and go
	}
	p.transparent.add(l)
	defer p.transparent.remove(l)
	for {
		c, err := l.Accept()
		if err != nil {
			if p.stopping.Err() != nil {
				return http.ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(50 * time.Millisecond) // out of descriptors: keep the listener, try again
				continue
			}
			return err
		}
		if tls {
			go p.transparentTLS(c, o)
		} else {
			go p.transparentHTTP(c, o)
		}
	}
}

// origin identifies a transparent connection's session and host, or
// records the refusal and closes c.
func (p *Proxy) origin(c net.Conn, o Origins, port int) (*tunnel, *Record, bool) {
	if p.stopping.Err() != nil { // accepted as Shutdown began: not served
		_ = c.Close()
		return nil, nil, false
	}
	rec := p.newRecord(nil)
	rec.Client = c.RemoteAddr().String()
	src, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	dst := originalDst(c)
	rec.Port = int(dst.Port())
	sess, host, err := o.Origin(netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), dst)
	if err == nil {
		err = p.Sessions.Live(sess.ID)
	}
	if err != nil {
		if errors.Is(err, ErrNotResolved) {
			err = deny(policy.ReasonNotResolved, "%s was not handed out by Aileron's DNS: connect by a name the session may reach", dst.Addr())
		} else {
			err = errors.Join(ErrProxyAuth, err)
		}
		rec.Host = dst.Addr().String()
		rec.refused(classify(err))
		rec.Status = 0 // nothing was answered: the connection is closed
		p.finish(rec)
		_ = c.Close()
		return nil, nil, false
	}
	rec.Session, rec.Host, rec.Port = sess.ID, host, port
	t := &tunnel{sess: sess, authority: policy.Authority{Host: host, Port: port}, id: rec.AuditID,
		client: rec.Client, transparent: true}
	return t, rec, true
}

// transparentTLS takes a redirected TLS connection where an explicit
// CONNECT to its host would go.
func (p *Proxy) transparentTLS(c net.Conn, o Origins) {
	t, rec, ok := p.origin(c, o, 443)
	if !ok {
		return
	}
	if p.SandboxAPI != nil && t.authority.Host == p.apiHost() {
		t.api = true
		p.intercept(c, t)
		return
	}
	d := p.Policy.Load().DecideConnect(t.authority.Host, t.authority.Port, p.sessionScope(t.sess))
	switch {
	case d.Verdict == policy.Allow, p.learnsHost(t.sess, t.authority, d):
		p.intercept(c, t) // a host learned: its requests are refused or held inside, never sent unasked
	case d.Verdict == policy.Passthrough:
		rec.Name, rec.Decision, rec.Reason = audit.EventPassthrough, d.Verdict.String(), string(d.Reason)
		p.passthrough(c, t, rec)
	default:
		rec.refused(classify(&DenyError{Reason: d.Reason, Message: d.Message}))
		rec.Status = 0
		p.finish(rec)
		_ = c.Close()
	}
}

// transparentHTTP answers a redirected plain-HTTP request with the
// insecure-scheme refusal (or authority_mismatch when its Host is not the
// name the address was handed out for), then closes the connection.
func (p *Proxy) transparentHTTP(c net.Conn, o Origins) {
	defer c.Close()
	t, rec, ok := p.origin(c, o, 80)
	if !ok {
		return
	}
	_ = c.SetDeadline(time.Now().Add(p.t.ReadHeader))
	r, err := http.ReadRequest(bufio.NewReader(io.LimitReader(c, int64(p.t.MaxHeader))))
	if err != nil {
		rec.refused(classify(deny(policy.ReasonMalformedRequest, "plain-HTTP request does not parse")))
		rec.Status = 0
		p.finish(rec)
		return
	}
	rec.Method, rec.Path = r.Method, "/"
	host, herr := policy.ParseAuthority(r.Host, 80)
	if herr != nil || host.Host != t.authority.Host {
		err = deny(policy.ReasonAuthorityMismatch, "Host %q is not %q, the name this address was resolved from", r.Host, t.authority.Host)
	} else {
		err = deny(policy.ReasonInsecureScheme, "plain-HTTP requests are not forwarded; use https://%s instead", t.authority.Host)
	}
	ref := classify(err)
	rec.refused(ref)
	p.finish(rec)
	ref.AuditID = rec.AuditID
	resp := ref.Response(r)
	resp.Close = true
	_ = c.SetDeadline(time.Now().Add(p.t.BodyIdle))
	_ = resp.Write(c)
}

// MayReach reports whether session s may reach host at all: the sandbox
// API host, a host an operation or passthrough rule of its connectors
// names (port 443), or, for a session in learn or ask mode, any name
// (learnsHost: its requests are learned or held, never sent unasked). The
// policy DNS answers only such names.
func (p *Proxy) MayReach(s *Session, host string) bool {
	if s == nil {
		return false
	}
	if p.SandboxAPI != nil && host == p.apiHost() {
		return true
	}
	d := p.Policy.Load().DecideConnect(host, 443, p.sessionScope(s))
	switch d.Verdict {
	case policy.Allow, policy.Passthrough:
		return true
	}
	// a session in learn or ask mode reaches a host no connector names
	// too: its requests are learned (and, in ask mode, held for a human)
	return p.learnsHost(s, policy.Authority{Host: host, Port: 443}, d)
}
