package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// Timeouts bound how long the proxy waits on a client. Zero fields take the
// defaults in parentheses.
type Timeouts struct {
	Handshake   time.Duration // CONNECT accepted → TLS handshake done (10 s)
	ReadHeader  time.Duration // request line and headers (10 s)
	Idle        time.Duration // keep-alive with no request (90 s)
	TunnelIdle  time.Duration // passthrough tunnel or WebSocket with no bytes (5 min)
	BodyIdle    time.Duration // longest pause between request-body bytes, or in the client's reading of an answer (30 s)
	BodyMinRate int           // bytes/s a request body must average after its first BodyIdle (0: no rate check)
	MaxHeader   int           // request head size (64 KiB)
	UpstreamTLS time.Duration // upstream TLS handshake (10 s)
	UpstreamHdr time.Duration // upstream response headers (60 s)
}

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Handshake, 10*time.Second)
	def(&t.ReadHeader, 10*time.Second)
	def(&t.Idle, 90*time.Second)
	def(&t.TunnelIdle, 5*time.Minute)
	def(&t.BodyIdle, defaultBodyIdle)
	def(&t.UpstreamTLS, 10*time.Second)
	def(&t.UpstreamHdr, 60*time.Second)
	if t.MaxHeader <= 0 {
		t.MaxHeader = 64 << 10
	}
	return t
}

// Proxy is the data plane. Set the fields, then call Serve. Sessions and
// Policy are required; every other nil field has the documented default.
type Proxy struct {
	// Sessions authenticates Proxy-Authorization.
	Sessions Sessions
	// Policy holds the compiled policy; swapping it takes effect on the next
	// request.
	Policy *policy.Holder
	// Guard dials upstreams; nil means a Guard with no overrides and no
	// allowed special-purpose addresses.
	Guard *Guard
	// RootCAs verifies upstream certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// Injector puts credentials on the outbound copy of matched requests;
	// nil means no credential stage (requests go out as the client sent
	// them, and placeholders are still refused).
	Injector Injector
	// Approvals holds operations marked approval "required" until a human
	// decides; nil means such operations are refused (approval_pending).
	Approvals Approvals
	// ApprovalHold is how long a held client waits (60 s); ApprovalMaxBody
	// bounds the body of a held request (1 MiB); ApprovalMaxHeld bounds
	// the bodies of all requests held at once (64 MiB), and
	// ApprovalMaxHeldPerSession those of one session's (8 MiB).
	ApprovalHold              time.Duration
	ApprovalMaxBody           int64
	ApprovalMaxHeld           int64
	ApprovalMaxHeldPerSession int64
	// MaxCheckedBody bounds a request body read whole to check it against
	// its operation's input schema (1 MiB); a longer one is refused 413
	// body_too_large and never forwarded.
	MaxCheckedBody int64
	// SandboxAPI answers the requests a sandbox sends through the proxy to
	// APIHost (port 443), with the authenticated session in the context
	// (SessionFrom). Nil means APIHost is an ordinary, unknown host.
	SandboxAPI http.Handler
	// APIHost is the sandbox API's reserved host name; "" means
	// DefaultAPIHost. It is answered by the daemon and never dialled.
	APIHost string
	// Budgets enforces the limits of sessions that have them (models and
	// budgets); nil means no budget stage, and a session with limits is
	// refused rather than served unbounded.
	Budgets Budgets
	// Proposals records the unknown requests of sessions in learn mode
	// (unknown.go); nil refuses them as in deny mode, recording nothing.
	Proposals Proposals
	// Recorder receives one record per decision; nil records nothing beyond
	// the log line.
	Recorder Recorder
	// Usage reads the tokens model calls report (dataplane/usage.go); nil
	// reads none, and a model call's record still names its model.
	Usage Usage
	// Log receives the canonical line per request and errors; nil discards.
	Log *zerolog.Logger
	// Timeouts bound client-side waits.
	Timeouts Timeouts
	// RevokeCheck is how often the proxy looks for sessions that were
	// deleted or expired while they had tunnels open, and cuts those
	// tunnels; zero means 250 ms. (Every request checks its session
	// besides.)
	RevokeCheck time.Duration

	once    sync.Once
	initErr error
	t       Timeouts
	log     zerolog.Logger
	outer   *http.Server
	// inner holds the HTTP/2 tunnels' server settings and shutdown hooks
	// (x/net's ServeConn); it serves no listener. HTTP/1.1 tunnels are
	// served by serveH1.
	inner     *http.Server
	h1        h1Conns
	up        *upstream1       // HTTP/1.1 to the upstream
	up2       *upstream2       // the requests of HTTP/2 clients: HTTP/2 where the upstream offers it, else up
	buffers   *copyBuffers     // body copy buffers
	redactors inject.Redactors // one echo redactor per set of injected secrets
	dates     dates
	raw       sync.WaitGroup // passthrough tunnels
	rawMu     sync.Mutex
	rawConns  map[net.Conn]struct{}
	ids       *auditIDs
	open      sessionTunnels // every open tunnel, by session

	transparent transparentListeners // ServeTransparent's listeners
	h2          *h2Conns             // HTTP/2 tunnels

	stopping    context.Context        // ends when Shutdown starts
	stop        context.CancelFunc     // ends stopping
	limits      atomic.Pointer[Limits] // set by SetLimits
	held        heldBudget             // bytes of held bodies in memory (readHeld)
	checking    heldBudget             // bytes of bodies read whole to check their arguments or model (readBody)
	connsOpen   atomic.Int64           // client connections to the proxy port
	tunnelsOpen atomic.Int64           // intercepted tunnels being served, plus passthrough tunnels
}

// Stats is a snapshot of the proxy's gauges, for metrics.
type Stats struct {
	ConnectionsOpen int64
	TunnelsOpen     int64
}

// Stats reports how many client connections and tunnels are open.
func (p *Proxy) Stats() Stats {
	return Stats{ConnectionsOpen: p.connsOpen.Load(), TunnelsOpen: p.tunnelsOpen.Load()}
}

// gauge returns a ConnState hook counting connections from accept (or
// hand-over) until they close or are hijacked (a CONNECT becomes a tunnel,
// counted there).
func (p *Proxy) gauge(g *atomic.Int64) func(net.Conn, http.ConnState) {
	return func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			g.Add(1)
		case http.StateClosed, http.StateHijacked:
			g.Add(-1)
		}
	}
}

// Serve accepts proxy clients on l until Shutdown. It returns
// http.ErrServerClosed after Shutdown.
func (p *Proxy) Serve(l net.Listener) error {
	if err := p.init(); err != nil {
		return err
	}
	if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil {
		p.Guard.AddSelf(ap)
	}
	return p.outer.Serve(&guardedListener{Listener: l, max: p.t.MaxHeader, reject: p.malformed(nil)})
}

// Shutdown stops accepting, lets in-flight requests finish until ctx ends,
// then closes every remaining connection, tunnels included.
func (p *Proxy) Shutdown(ctx context.Context) error {
	if err := p.init(); err != nil {
		return err
	}
	p.stop() // held requests answer approval_pending now instead of being cut off
	p.transparent.closeAll()
	err := errors.Join(p.outer.Shutdown(ctx), p.inner.Shutdown(ctx), p.h1.drain(ctx), p.h2.drain(ctx))
	if err != nil {
		_ = p.outer.Close()
		p.h1.closeAll()
	}
	p.closeRaw()
	p.up.pool.sweep(true)
	p.up2.sweep(true)
	p.raw.Wait()
	return err
}

func (p *Proxy) init() error {
	p.once.Do(func() { p.initErr = p.build() })
	return p.initErr
}

func (p *Proxy) build() error {
	if p.Sessions == nil || p.Policy == nil {
		return errors.New("dataplane: Proxy.Sessions and Proxy.Policy are required")
	}
	p.t = p.Timeouts.withDefaults()
	p.stopping, p.stop = context.WithCancel(context.Background())
	p.ids = newAuditIDs()
	p.log = zerolog.Nop()
	if p.Log != nil {
		p.log = *p.Log
	}
	if p.Guard == nil {
		p.Guard = &Guard{}
	}
	tlsUp, err := p.upstreamTLS()
	if err != nil {
		return err
	}
	p.up = &upstream1{p: p, tls: tlsUp}
	p.up2 = newUpstream2(p, p.up, tlsUp)
	p.buffers = &copyBuffers{}
	p.rawConns = make(map[net.Conn]struct{})
	errLog := log.New(io.Discard, "", 0)
	p.inner = &http.Server{
		// inner serves nothing itself: it holds the settings HTTP/2 tunnels
		// are served with (serveH2 names its handler), and its shutdown
		// hooks.
		Handler:           http.NotFoundHandler(),
		ReadHeaderTimeout: p.t.ReadHeader,
		IdleTimeout:       p.t.Idle,
		MaxHeaderBytes:    p.t.MaxHeader,
		ErrorLog:          errLog,
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if p.h2, err = p.newH2(p.inner); err != nil {
		return err
	}
	go p.watchRevocations()
	go sweepEvery(p.stopping, upIdleTimeout/3, p.up.pool.sweep)
	go sweepEvery(p.stopping, upIdleTimeout/3, p.up2.sweep)
	p.outer = &http.Server{
		Handler:           p.newGoproxy(),
		ReadHeaderTimeout: p.t.ReadHeader,
		// The proxy port reads no request body (CONNECTs carry none; plain
		// HTTP is refused unread), so net/http's discard of one must not
		// wait on a client that stalls. Hijacked tunnels set their own.
		ReadTimeout:    p.t.ReadHeader + p.t.BodyIdle,
		IdleTimeout:    p.t.Idle,
		MaxHeaderBytes: p.t.MaxHeader,
		ConnState:      p.gauge(&p.connsOpen),
		ErrorLog:       errLog,
		TLSNextProto:   map[string]func(*http.Server, *tls.Conn, http.Handler){},
		// "OPTIONS *" on the proxy port gets the proxy's own refusal.
		DisableGeneralOptionsHandler: true,
	}
	return nil
}

// newGoproxy wires goproxy as the outer dispatcher, replacing each of its
// defaults: no environment proxies, no skip-verify transport, no bundled CA,
// no built-in MITM loop. CONNECTs are handed to handleConnect; plain-HTTP
// proxy requests to handlePlain; anything else gets a 400 envelope.
func (p *Proxy) newGoproxy() *goproxy.ProxyHttpServer {
	gp := goproxy.NewProxyHttpServer()
	gp.Logger = log.New(io.Discard, "", 0)
	gp.Verbose = false
	gp.Tr = &http.Transport{Proxy: nil, DialContext: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("dataplane: plain-HTTP requests are refused, never dialled")
	}}
	gp.ConnectDial = nil
	gp.ConnectDialWithReq = nil
	gp.CertStore = nil
	gp.AllowHTTP2 = false
	gp.KeepHeader = false
	gp.NonproxyHandler = http.HandlerFunc(p.serveNonProxy)
	gp.OnRequest().HandleConnectFunc(p.handleConnect)
	gp.OnRequest().DoFunc(p.handlePlain)
	return gp
}

func (p *Proxy) serveNonProxy(w http.ResponseWriter, r *http.Request) {
	WriteRefusal(w, mkRefusal(http.StatusBadRequest, ClassBadRequest, policy.ReasonBadRequest,
		"this is Aileron's proxy port: send requests through it as a proxy (HTTPS_PROXY=proxy_url), not to it"))
}

func (p *Proxy) trackRaw(c net.Conn, add bool) {
	p.rawMu.Lock()
	defer p.rawMu.Unlock()
	if add {
		p.rawConns[c] = struct{}{}
	} else {
		delete(p.rawConns, c)
	}
}

func (p *Proxy) closeRaw() {
	p.rawMu.Lock()
	defer p.rawMu.Unlock()
	for c := range p.rawConns {
		_ = c.Close()
	}
}

// malformed returns the framing guard's Reject hook: each refused request
// is recorded like any other decision (with the tunnel's session and
// authority when it arrived inside one) and its audit id goes to the client.
func (p *Proxy) malformed(t *tunnel) func(error) string {
	return func(err error) string {
		rec := p.newRecord(nil)
		if t != nil {
			rec.Session, rec.Host, rec.Port = t.sess.ID, t.authority.Host, t.authority.Port
		}
		rec.refused(classify(err))
		p.finish(rec)
		return rec.AuditID
	}
}
