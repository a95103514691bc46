package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// h1Conn is one intercepted HTTP/1.1 tunnel, served in the goroutine that
// accepted it: read a request, run it through the request path, write the
// answer, read the next. Nothing reads ahead while a request is served, so
// a pipelined request waits in the buffer for its turn; a second goroutine
// runs only while a request body streams to the upstream, while a held
// request watches for its client to leave, or after a protocol switch.
type h1Conn struct {
	p      *Proxy
	t      *tunnel
	c      *tunnelConn
	br     *bufio.Reader
	bw     *bufio.Writer
	tls    *tls.ConnectionState
	remote string
	ctx    context.Context // the requests' context: ends when the tunnel is cut at shutdown
	cancel context.CancelFunc
	active bool // a request is being read or served (guarded by h1Conns.mu)
	watch  clientWatch
}

// h1Conns is the registry of HTTP/1.1 tunnels, for Shutdown: idle ones
// are closed at once, busy ones when their answer is done.
type h1Conns struct {
	mu      sync.Mutex
	conns   map[*h1Conn]struct{}
	wg      sync.WaitGroup
	closing atomic.Bool
}

func (h *h1Conns) add(hc *h1Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing.Load() {
		return false
	}
	if h.conns == nil {
		h.conns = map[*h1Conn]struct{}{}
	}
	h.conns[hc] = struct{}{}
	h.wg.Add(1)
	return true
}

func (h *h1Conns) remove(hc *h1Conn) {
	h.mu.Lock()
	delete(h.conns, hc)
	h.mu.Unlock()
	h.wg.Done()
}

// setActive marks hc busy with a request; false once drain began.
func (h *h1Conns) setActive(hc *h1Conn, on bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc.active = on
	return !h.closing.Load()
}

// switched takes hc out of the drain's wait: its protocol switched
// (a WebSocket), so it has no answer to finish and is closed at once.
// False once drain began.
func (h *h1Conns) switched(hc *h1Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	hc.active = false
	return !h.closing.Load()
}

// drain closes the idle tunnels and waits for the busy ones to finish
// their answers (each closes after it) or for ctx to end.
func (h *h1Conns) drain(ctx context.Context) error {
	h.mu.Lock()
	h.closing.Store(true)
	for hc := range h.conns {
		if !hc.active {
			_ = hc.c.Close()
		}
	}
	h.mu.Unlock()
	return waitFor(ctx, &h.wg)
}

// waitFor waits for wg or for ctx to end. Its goroutine outlives a ctx
// that ends first until the connections are closed, which Shutdown does
// next.
func waitFor(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeAll cuts every tunnel, answered or not, and ends its requests.
func (h *h1Conns) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for hc := range h.conns {
		hc.cancel()
		_ = hc.c.Close()
	}
}

// serveH1 serves an intercepted HTTP/1.1 tunnel until the client leaves,
// a request asks to close, or the proxy shuts down.
func (p *Proxy) serveH1(c *tunnelConn, cs tls.ConnectionState) {
	ctx, cancel := context.WithCancel(context.Background())
	hc := &h1Conn{p: p, t: c.t, c: c, br: bufio.NewReaderSize(c, 4<<10), bw: bufio.NewWriterSize(c, 4<<10),
		tls: &cs, remote: c.RemoteAddr().String(), ctx: ctx, cancel: cancel}
	hc.watch.hc = hc
	defer cancel()
	defer hc.watch.disarm()
	if !p.h1.add(hc) {
		_ = c.Close()
		return
	}
	defer p.h1.remove(hc)
	p.tunnelsOpen.Add(1)
	defer p.tunnelsOpen.Add(-1)
	for first := true; ; first = false {
		r, err := hc.next(first)
		if err != nil {
			hc.readFailed(err)
			_ = c.Close()
			return
		}
		keep, hijacked := hc.serve(r)
		if hijacked {
			return // the protocol switch owns the connection, and closed it
		}
		if !keep || !p.h1.setActive(hc, false) {
			_ = c.Close()
			return
		}
	}
}

// errDraining: the proxy is shutting down; the tunnel takes no request.
var errDraining = errors.New("proxy shutting down")

// next reads the next request head: within ReadHeader on a new tunnel,
// else after up to Idle of waiting for its first byte.
func (hc *h1Conn) next(first bool) (*http.Request, error) {
	t := hc.p.t
	if first {
		_ = hc.c.SetReadDeadline(time.Now().Add(t.ReadHeader))
	} else {
		_ = hc.c.SetReadDeadline(time.Now().Add(t.Idle))
		if _, err := hc.br.Peek(1); err != nil {
			return nil, err
		}
		_ = hc.c.SetReadDeadline(time.Now().Add(t.ReadHeader))
	}
	if !hc.p.h1.setActive(hc, true) {
		return nil, errDraining
	}
	r, err := http.ReadRequest(hc.br)
	_ = hc.c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, err
	}
	if r.ProtoAtLeast(1, 1) && r.Host == "" {
		return nil, &malformedError{msg: "HTTP/1.1 request without a Host header; send one"}
	}
	if ex := r.Header.Get("Expect"); ex != "" && (!strings.EqualFold(ex, "100-continue") || !r.ProtoAtLeast(1, 1)) {
		return nil, &malformedError{status: http.StatusExpectationFailed,
			msg: fmt.Sprintf("Expect: %q is not supported; only HTTP/1.1's 100-continue is", clip(ex))}
	}
	r.RemoteAddr, r.TLS = hc.remote, hc.tls
	return r.WithContext(hc.ctx), nil
}

// malformedError is a request that parsed but that net/http's server
// would also have refused.
type malformedError struct {
	status int
	msg    string
}

func (e *malformedError) Error() string { return e.msg }

// readFailed answers a request that could not be read. A client that
// left or went quiet, and a framing violation (the guard answered it
// already), get nothing more.
func (hc *h1Conn) readFailed(err error) {
	var me *malformedError
	switch {
	case errors.As(err, &me):
	case errors.Is(err, ErrMalformedRequest), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errDraining), isTimeout(err), errors.Is(err, net.ErrClosed):
		return
	default:
		me = &malformedError{msg: "the request does not parse: " + clip(err.Error())}
	}
	ref := mkRefusal(http.StatusBadRequest, ClassBadRequest, policy.ReasonMalformedRequest, me.msg)
	if me.status != 0 {
		ref.Status = me.status
	}
	ref.AuditID = hc.p.malformed(hc.t)(fmt.Errorf("%w: %s", ErrMalformedRequest, me.msg))
	_ = hc.c.SetWriteDeadline(time.Now().Add(lingerTimeout))
	if ref.Response(nil).Write(hc.bw) == nil {
		_ = hc.bw.Flush()
	}
}

// serve runs one request through the request path and ends its answer.
func (hc *h1Conn) serve(r *http.Request) (keep, hijacked bool) {
	var body *h1Body
	if r.Body != nil && r.Body != http.NoBody {
		body = &h1Body{rc: r.Body}
		r.Body = body
	}
	w := newH1Writer(hc, r, body)
	hc.watch.arm(body)
	defer hc.watch.disarm()
	if body != nil && r.Header.Get("Expect") != "" {
		body.w.Store(w) // 100 Continue on the first read
	} else {
		w.continued = true
	}
	if !hc.run(w, r) {
		if !w.hijacked {
			_ = hc.bw.Flush() // what was answered before the abort; no last chunk
		}
		return false, w.hijacked
	}
	keep = w.finish() && hc.discard(body)
	if body != nil {
		_ = body.Close()
		if !keep && !body.eof.Load() {
			hc.linger(body)
		}
	}
	return keep, w.hijacked
}

// linger ends a connection whose client may still be sending a body the
// proxy will not read (the upstream answered early, or the body is too
// big to discard), as net/http's server does: once the answer is out, the
// write side is shut (TLS close_notify) and what the client sends is
// dropped until it closes or lingerTimeout passes. Closing with unread
// bytes resets the connection, and a reset destroys the part of the answer
// the client has not read yet: a client uploading to an early 413 would
// see only "connection reset". The bound is time alone: on loopback a
// client sends tens of MiB in lingerTimeout, and dropping bytes costs the
// proxy no memory.
func (hc *h1Conn) linger(b *h1Body) {
	_ = hc.c.SetReadDeadline(time.Now().Add(lingerTimeout)) // a body goroutine blocked in a read returns,
	b.mu.Lock()                                             // gives way, and finds the body closed next time
	defer b.mu.Unlock()
	if cw, ok := hc.c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = hc.c.SetReadDeadline(time.Now().Add(lingerTimeout))
	_, _ = io.Copy(io.Discard, hc.br)
}

// run calls the request path and reports whether the answer is complete:
// an abort (the upstream cut the answer off, or the client left first) and
// a panic, which is a bug and is logged, both close the connection.
func (hc *h1Conn) run(w *h1Writer, r *http.Request) (ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				hc.p.log.Error().Str("event", "proxy.panic").Str("session", hc.t.sess.ID).Msg(fmt.Sprint(v))
			}
			ok = false
		}
	}()
	return !hc.p.serveRequest(w, hc.p.newExchange(r, hc.t)).abort
}

// reusable tells, as the head is written, whether the connection may
// take another request after this answer, as far as the request body
// goes: yes when it was read to its end, or when nobody read any of it
// (it is discarded after the answer, as net/http does, up to 256 KiB); no
// when it was read only in part, or when the client still waits for a
// 100 Continue before sending it.
func (b *h1Body) reusable(continueOwed bool) bool {
	switch {
	case b == nil || b.eof.Load():
		return true
	case b.touched.Load():
		return false
	default:
		return !continueOwed
	}
}

// unreadBodyMax is the most of an unread body discarded after its answer
// to keep the connection, as net/http's server does.
const unreadBodyMax = 256 << 10

// discard reads what is left of a body nobody read, after its answer:
// the connection is kept when the body ends within 256 KiB and the body
// idle timeout. No lock of the writer is held, so a late reader (a body
// goroutine that started after the answer came) cannot deadlock with it.
func (hc *h1Conn) discard(b *h1Body) bool {
	if b == nil || b.eof.Load() {
		return true
	}
	if b.touched.Load() {
		return false
	}
	b.w.Store(nil)
	_ = hc.c.SetReadDeadline(time.Now().Add(hc.p.t.BodyIdle))
	n, err := io.CopyN(io.Discard, b, unreadBodyMax+1)
	_ = hc.c.SetReadDeadline(time.Time{})
	return n <= unreadBodyMax && err == io.EOF
}

// draining reports that the proxy is shutting down: answers close their
// connection.
func (hc *h1Conn) draining() bool { return hc.p.h1.closing.Load() }

// clientWatchAfter is how long a request runs before its client is
// watched for leaving.
const clientWatchAfter = 250 * time.Millisecond

// clientWatch watches a tunnel's client for a request that is still
// running after clientWatchAfter (waiting on a slow upstream, held for
// approval): once the request body was read to its end, the timer's
// goroutine peeks at the connection, and a client that left ends the
// tunnel's context, which cancels the upstream exchange or the hold. A
// request the client pipelined meanwhile is left for its turn. One timer
// serves the tunnel's requests in turn, so a request that ends sooner
// costs a timer reset and no goroutine.
type clientWatch struct {
	hc      *h1Conn
	timer   *time.Timer
	mu      sync.Mutex
	body    *h1Body       // the request's; nil without one
	armed   bool          // a request is being watched
	peeking chan struct{} // closed when the running peek returns; nil when none runs
}

// arm starts watching for the request whose body is body.
func (w *clientWatch) arm(body *h1Body) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.body, w.armed = body, true
	if w.timer == nil {
		w.timer = time.AfterFunc(clientWatchAfter, w.fire)
		return
	}
	w.timer.Reset(clientWatchAfter)
}

func (w *clientWatch) fire() {
	w.mu.Lock()
	if !w.armed || w.body != nil && !w.body.eof.Load() { // a body still being read: the client is there
		if w.armed {
			w.timer.Reset(clientWatchAfter)
		}
		w.mu.Unlock()
		return
	}
	done := make(chan struct{})
	w.peeking = done
	w.mu.Unlock()
	defer close(done)
	if _, err := w.hc.br.Peek(1); err != nil && !isTimeout(err) && !errors.Is(err, ErrMalformedRequest) {
		w.hc.cancel()
	}
}

// disarm ends the watch (idempotent); it must run before the connection
// is read again or handed over.
func (w *clientWatch) disarm() {
	w.mu.Lock()
	w.armed, w.body = false, nil
	done := w.peeking
	w.peeking = nil
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	if done != nil {
		_ = w.hc.c.SetReadDeadline(time.Unix(1, 0)) // ends the peek
		<-done
		_ = w.hc.c.SetReadDeadline(time.Time{})
	}
}

// h1Body is a request body read off the tunnel. It answers Expect:
// 100-continue on the first read and notes what settle needs.
type h1Body struct {
	rc      io.ReadCloser
	w       atomic.Pointer[h1Writer] // owed a 100 Continue; nil when none is
	mu      sync.Mutex
	closed  atomic.Bool
	touched atomic.Bool // read at least once
	eof     atomic.Bool // read to its end
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, http.ErrBodyReadAfterClose
	}
	b.touched.Store(true)
	if w := b.w.Swap(nil); w != nil {
		w.sendContinue() // before b.mu: the writer's lock is never taken under it
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eof.Load() {
		return 0, io.EOF
	}
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Close ends reading, without waiting for a read in progress; the bytes
// left decide whether the connection closes.
func (b *h1Body) Close() error {
	b.closed.Store(true)
	return nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
