package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"
)

// upstream2 carries the requests of HTTP/2 clients: over HTTP/2 to an
// upstream that offers it in ALPN, pooled and multiplexed (a new
// connection only when every one to that authority is at its stream
// limit), and over HTTP/1.1 (upstream1) to one that does not. Both go
// through one dial (the Guard, verified TLS offering h2 and http/1.1): a
// connection whose upstream chose http/1.1 goes to upstream1's pool, and
// the authority is remembered as HTTP/1.1-only for upH1Memo, so its
// requests go straight to upstream1 until a later dial asks again. Policy,
// injection and audit happened before; this is only the wire.
type upstream2 struct {
	p  *Proxy
	h1 *upstream1
	// tr makes the HTTP/2 connections (NewClientConn, dialling through
	// dialTLS); it pools nothing itself.
	tr  *http.Transport
	tls *tls.Config // verified; offers h2 and http/1.1
	// connect makes one connection to key; nil means tr.NewClientConn.
	connect func(ctx context.Context, key string) (*http.ClientConn, error)

	mu      sync.Mutex
	conns   map[string][]*h2Up // per authority, oldest first
	dialing map[string]*h2Dial // a dial under way per authority: others wait for it
	h1only  map[string]time.Time
	closed  bool // shutdown: nothing more is pooled
}

// upMaxDials bounds the new connections one request waits for (get).
const upMaxDials = 3

// upH1Memo is how long an authority that answered ALPN with http/1.1 is
// sent HTTP/1.1 without asking again.
const upH1Memo = 10 * time.Minute

// h2Up is one pooled HTTP/2 connection; born is when it was made, and
// idleSince when it was last seen with nothing in flight (zero while busy).
type h2Up struct {
	cc        *http.ClientConn
	born      time.Time
	idleSince time.Time
}

// upSettle is how long a new HTTP/2 connection's stream limit may still be
// the client's guess (100) rather than the upstream's SETTINGS: a request
// on a connection younger than that bounds its wait for a stream (send).
const upSettle = time.Second

// h2Dial is a dial in progress; done closes when it ended.
type h2Dial struct {
	done chan struct{}
	cc   *http.ClientConn // the connection it made; nil for HTTP/1.1 or on error
	err  error
}

// errUpstreamH1 is dialTLS's answer when the upstream chose http/1.1: the
// connection went to upstream1's pool.
var errUpstreamH1 = errors.New("dataplane: the upstream chose HTTP/1.1")

func newUpstream2(p *Proxy, h1 *upstream1, base *tls.Config) *upstream2 {
	u := &upstream2{p: p, h1: h1, conns: map[string][]*h2Up{}, dialing: map[string]*h2Dial{}, h1only: map[string]time.Time{}}
	u.tls = base.Clone()
	u.tls.NextProtos = []string{"h2", "http/1.1"}
	var protos http.Protocols
	protos.SetHTTP2(true)
	u.tr = &http.Transport{
		DialTLSContext:         u.dialTLS,
		Protocols:              &protos,
		ResponseHeaderTimeout:  p.t.UpstreamHdr,
		MaxResponseHeaderBytes: maxResponseHead,
		DisableCompression:     true,
	}
	return u
}

func (u *upstream2) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := upKey(req)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if u.prefersH1(key) {
			return u.h1.RoundTrip(req)
		}
		c, fresh, err := u.get(req.Context(), key)
		if errors.Is(err, errUpstreamH1) {
			return u.h1.RoundTrip(req) // takes the connection the dial pooled
		}
		if err != nil {
			return nil, err
		}
		var resp *http.Response
		if time.Since(c.born) < upSettle {
			resp, err = u.send(c.cc, req)
		} else {
			resp, err = c.cc.RoundTrip(req)
		}
		if err == nil || fresh || attempt > 0 || !replayable(req) || c.cc.Err() == nil {
			return resp, err
		}
		// A pooled connection that died under the request: one that may be
		// sent twice goes once more, on another connection.
	}
}

// errNoStream: the upstream gave the request no stream in time.
var errNoStream = fmt.Errorf("dataplane: the upstream's HTTP/2 connection had no stream free within the upstream header timeout: %w", context.DeadlineExceeded)

// send runs req on cc, a stream reserved on a new connection whose
// upstream's SETTINGS may not be in yet: had the client reserved on its
// guess and the upstream then allow fewer streams (none, say), the request
// would wait for one. That wait is bounded like waiting for an answer's
// head: the clock stops when the request's head is written, where the
// transport's own header timeout takes over. (A settled connection's
// reservation is the upstream's own limit; only an upstream that lowers it
// later could make a request wait, and then until its client gives up.)
func (u *upstream2) send(cc *http.ClientConn, req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	wait := time.AfterFunc(u.p.t.UpstreamHdr, func() { cancel(errNoStream) })
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wait.Stop() }})
	resp, err := cc.RoundTrip(req.WithContext(ctx))
	wait.Stop()
	if err != nil {
		if errors.Is(context.Cause(ctx), errNoStream) {
			err = errNoStream
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends its request's context when it is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

func (u *upstream2) prefersH1(key string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.h1only[key]
	if ok && time.Since(at) >= upH1Memo {
		delete(u.h1only, key)
		ok = false
	}
	return ok
}

// get reserves a stream on a connection to key, dialling one (shared with
// the requests that arrive meanwhile) when none has room. fresh: the
// connection was made for this wait. A request that found no room on
// upMaxDials new connections in turn (an upstream that takes no stream, or
// a crowd of others claiming each one first) is refused rather than left
// to dial on.
func (u *upstream2) get(ctx context.Context, key string) (c *h2Up, fresh bool, err error) {
	var waited *h2Dial
	for dials := 0; ; dials++ {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, false, errors.New("dataplane: the proxy is stopping")
		}
		if c := u.reserve(key); c != nil {
			u.mu.Unlock()
			return c, waited != nil && c.cc == waited.cc, nil
		}
		if dials == upMaxDials {
			u.mu.Unlock()
			return nil, false, fmt.Errorf("dataplane: %d new HTTP/2 connections to %s took no stream", dials, key)
		}
		d := u.dialing[key]
		if d == nil {
			d = &h2Dial{done: make(chan struct{})}
			u.dialing[key] = d
			go u.dial(key, d)
		}
		u.mu.Unlock()
		select {
		case <-d.done:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
		if d.err != nil {
			return nil, false, d.err
		}
		if d.cc == nil {
			return nil, false, errUpstreamH1
		}
		waited = d
	}
}

// reserve returns a connection to key with room for one more stream, its
// slot reserved, dropping the ones that died. u.mu is held.
func (u *upstream2) reserve(key string) *h2Up {
	list := u.conns[key]
	kept := list[:0]
	var got *h2Up
	for _, c := range list {
		if c.cc.Err() != nil {
			_ = c.cc.Close()
			continue
		}
		kept = append(kept, c)
		if got == nil && c.cc.Reserve() == nil {
			got, c.idleSince = c, time.Time{}
		}
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(u.conns, key)
	} else {
		u.conns[key] = kept
	}
	return got
}

// dial makes a connection to key for d's waiters, bounded by the upstream
// TLS timeout and by the proxy's run, not by any one request: the first
// to ask may leave, the others still want it.
func (u *upstream2) dial(key string, d *h2Dial) {
	ctx, cancel := context.WithTimeout(u.p.stopping, u.p.t.UpstreamTLS+u.p.Guard.dialTimeout())
	defer cancel()
	connect := u.connect
	if connect == nil {
		connect = func(ctx context.Context, key string) (*http.ClientConn, error) {
			return u.tr.NewClientConn(ctx, "https", key)
		}
	}
	cc, err := connect(ctx, key)
	u.mu.Lock()
	delete(u.dialing, key)
	switch {
	case errors.Is(err, errUpstreamH1):
		u.h1only[key], err = time.Now(), nil
	case err == nil && u.closed:
		_ = cc.Close()
		err = errors.New("dataplane: the proxy is stopping")
	case err == nil:
		u.conns[key] = append(u.conns[key], &h2Up{cc: cc, born: time.Now()})
		d.cc = cc
	}
	d.err = err
	u.mu.Unlock()
	close(d.done)
}

// dialTLS opens a verified TLS connection to addr through the Guard,
// offering h2 and http/1.1. A connection whose upstream chose http/1.1 is
// handed to upstream1's pool (errUpstreamH1); an h2 one closes when no
// byte moves either way for the tunnel idle timeout, and its TLS records
// leave in batches (batchConn).
func (u *upstream2) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := u.p.Guard.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	cfg := u.tls.Clone()
	cfg.ServerName = host
	ic := &idleConn{Conn: raw} // no deadlines until it is known to be h2
	bc := newBatchConn(ic)     // no batches either
	tc := tls.Client(bc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != "h2" {
		u.h1.pool.put(newUpConn(addr, tc, raw))
		return nil, errUpstreamH1
	}
	ic.idle = u.p.t.TunnelIdle
	bc.batch() // a request's HEADERS, DATA and END_STREAM records leave in one write
	return tc, nil
}

// sweep closes the connections with nothing in flight for upIdleTimeout
// (all of them, and pools nothing more, when all is set).
func (u *upstream2) sweep(all bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = u.closed || all
	now := time.Now()
	for key, list := range u.conns {
		kept := list[:0]
		for _, c := range list {
			busy := c.cc.InFlight() > 0
			if busy {
				c.idleSince = time.Time{}
			} else if c.idleSince.IsZero() {
				c.idleSince = now
			}
			if all || c.cc.Err() != nil || !busy && now.Sub(c.idleSince) >= upIdleTimeout {
				_ = c.cc.Close()
				continue
			}
			kept = append(kept, c)
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(u.conns, key)
		} else {
			u.conns[key] = kept
		}
	}
	for key, at := range u.h1only {
		if now.Sub(at) >= upH1Memo {
			delete(u.h1only, key)
		}
	}
}
