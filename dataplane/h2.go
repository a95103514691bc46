package dataplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// HTTP/2 limits for intercepted tunnels. x/net's server also bounds what
// the stream-abuse attacks need: handlers running at once (at most
// h2MaxStreams; streams beyond are queued, and a connection that queues
// too many is closed), reset floods (rapid reset) and header blocks of
// any number of CONTINUATION frames (the header list is capped at
// proxy.max_header_bytes).
const (
	h2MaxStreams   = 100       // concurrent streams per connection
	h2MaxFrame     = 1 << 20   // largest frame the client may send
	h2StreamWindow = 256 << 10 // per-stream receive window
	h2ConnWindow   = 1 << 20   // per-connection receive window: what one connection can make the proxy buffer
)

// h2Conns serves the HTTP/2 tunnels and lets Shutdown wait for them.
type h2Conns struct {
	srv     *http2.Server
	mu      sync.Mutex
	wg      sync.WaitGroup
	closing bool // drain began: no tunnel is added after
}

// add registers a tunnel, unless drain began.
func (h *h2Conns) add() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.wg.Add(1)
	return true
}

// newH2 configures HTTP/2 for intercepted tunnels on inner's settings
// (timeouts, header limit), and hooks its graceful shutdown (GOAWAY, then
// close once the streams in flight end) to inner's.
func (p *Proxy) newH2(inner *http.Server) (*h2Conns, error) {
	srv := &http2.Server{
		MaxConcurrentStreams:         h2MaxStreams,
		MaxReadFrameSize:             h2MaxFrame,
		MaxUploadBufferPerStream:     h2StreamWindow,
		MaxUploadBufferPerConnection: h2ConnWindow,
		IdleTimeout:                  p.t.Idle,
	}
	if err := http2.ConfigureServer(inner, srv); err != nil {
		return nil, err
	}
	// ConfigureServer offers h2 on inner's own TLS; inner never does TLS
	// (tunnels arrive decrypted), so that changes nothing.
	inner.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	return &h2Conns{srv: srv}, nil
}

// serveH2 serves one tunnel whose client chose h2 in ALPN: every stream
// takes the same path as an HTTP/1.1 request (serveRequest), each on its own
// goroutine, so a stream held for approval leaves the others flowing. raw
// is the client's TCP connection (cut on revocation and at shutdown).
func (p *Proxy) serveH2(tc *tls.Conn, raw net.Conn, t *tunnel) {
	if !p.h2.add() {
		_ = raw.Close()
		return
	}
	defer p.h2.wg.Done()
	p.tunnelsOpen.Add(1)
	defer p.tunnelsOpen.Add(-1)
	conn := &tunnelConn{Conn: tc, t: t, forget: p.open.add(raw, t), writeIdle: p.t.BodyIdle}
	var closer io.Closer = conn
	defer func() { _ = closer.Close() }()
	if err := p.Sessions.Live(t.sess.ID); err != nil { // revoked during the handshake: cut, audited
		p.cut(t.sess.ID, err, nil)
		return
	}
	if p.stopping.Err() != nil {
		return
	}
	p.trackRaw(raw, true)
	defer p.trackRaw(raw, false)
	t.hangup = func() { _ = raw.Close() }
	out := newBatchConn(conn)
	out.batch()
	hc := &h2Conn{tunnelConn: conn, out: out, cs: tc.ConnectionState(), hangup: t.hangup}
	closer = hc // the last bytes (a GOAWAY) go out before the close
	p.h2.srv.ServeConn(hc, &http2.ServeConnOpts{
		Context:    context.Background(), // as inner's: Shutdown drains, not cancels
		BaseConfig: p.inner,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer p.streamPanic(t)
			body := r.Body // x/net's own, before the request path wraps it
			end := p.serveRequest(w, p.newExchange(r, t))
			if end.abort {
				panic(http.ErrAbortHandler) // x/net's way to reset the stream: the answer is incomplete
			}
			if end.refusal != nil {
				p.finishBody(w, body)
			}
		}),
	})
}

// streamPanic, deferred by a stream's handler, logs a panic of its
// request path (a bug) as h1Conn.run does, then resets the stream: x/net
// recovers a handler's panic too, but tells only the server's error log,
// which the proxy discards.
func (p *Proxy) streamPanic(t *tunnel) {
	v := recover()
	if v == nil {
		return
	}
	if v != http.ErrAbortHandler {
		p.log.Error().Str("event", "proxy.panic").Str("session", t.sess.ID).Msg(fmt.Sprint(v))
	}
	panic(http.ErrAbortHandler)
}

// finishBody reads what is left of a request body the proxy answered
// without reading (a refusal sent on the request's head alone), once the
// answer is out: up to unreadBodyMax, within the body idle timeout, as
// HTTP/1.1 does (h1Conn.discard), and only while the client keeps sending
// (a gap of finishGap ends it). A client still uploading then sees its
// stream end after its upload has; otherwise x/net ends the stream with
// RST_STREAM(NO_ERROR) mid-upload, which curl 7.88 reports as "Stream
// error in the HTTP/2 framing layer" (exit 92) in place of the refusal. A
// client that sends nothing (it waits for the answer, or for a 100
// Continue that never comes) has its stream end after one gap.
func (p *Proxy) finishBody(w http.ResponseWriter, body io.Reader) {
	if body == nil || body == http.NoBody {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush() // the refusal goes now, not after the body
	end := time.Now().Add(p.t.BodyIdle)
	buf := make([]byte, 16<<10)
	for left := unreadBodyMax; left > 0; {
		dl := time.Now().Add(finishGap)
		if dl.After(end) {
			dl = end
		}
		if rc.SetReadDeadline(dl) != nil {
			return
		}
		n, err := body.Read(buf[:min(len(buf), left)])
		left -= n
		if err != nil {
			return
		}
	}
}

// finishGap is the longest finishBody waits for the next piece of a
// refused request's body.
const finishGap = time.Second

// drain waits until every HTTP/2 tunnel has closed (Shutdown sent each a
// GOAWAY) or ctx ends; after that Shutdown closes what is left, which ends
// the waiting goroutine too.
func (h *h2Conns) drain(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	h.mu.Unlock()
	return waitFor(ctx, &h.wg)
}
