package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// upstream1 is the HTTP/1.1 RoundTripper to upstreams: verified TLS over
// the Guard's dials, one pool of idle connections per authority. An
// exchange runs in the caller's goroutine (write the head, read the
// answer's head, hand back a body that returns the connection to its
// pool at its end); a request body streams from a second goroutine, so an
// upstream that answers before reading all of it is not deadlocked.
type upstream1 struct {
	p    *Proxy
	tls  *tls.Config // verified, http/1.1 only; cloned per dial with the server name
	pool upPool
}

// Upstream pool bounds, as the net/http Transport they replace.
const (
	upIdlePerHost = 128
	upIdleTotal   = 1024
	upIdleTimeout = 90 * time.Second
	upMax1xx      = 5 // interim answers before the final one
)

// upConn is one upstream connection: a verified TLS session and its
// buffers.
type upConn struct {
	key    string
	conn   net.Conn          // *tls.Conn
	raw    net.Conn          // the TCP connection under it
	lr     *io.LimitedReader // under br: bounds an answer's head
	br     *bufio.Reader
	bw     *bufio.Writer
	idleAt time.Time
	reused bool
}

// close drops the connection without a TLS close_notify: an upstream
// must not take a request cut short for one that ended, and answer it,
// before the connection is gone.
func (uc *upConn) close() { _ = uc.raw.Close() }

func (u *upstream1) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := upKey(req)
	if err != nil {
		return nil, err
	}
	replay := replayable(req)
	for attempt := 0; ; attempt++ {
		uc := u.pool.take(key, replay)
		if uc == nil {
			if uc, err = u.dial(req.Context(), key); err != nil {
				return nil, err
			}
		}
		resp, err := u.exchange(uc, req)
		if err == nil {
			return resp, nil
		}
		if !(replay && uc.reused && attempt == 0 && connGone(err)) {
			return nil, err
		}
		// A pooled connection the upstream had closed: a request that may
		// be sent twice goes once more, on a new connection.
	}
}

// replayable: a request with no body whose method may be repeated, as
// net/http's Transport retries on a reused connection that turns out
// closed, unless it must be sent once (sendOnce).
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0 || sendOnce(req.Context()) {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// sendOnceKey marks, in an outbound request's context, a request no
// transport may send a second time, whatever its method: a human approved
// it (exactly what was approved is sent, once), or its operation says
// not_idempotent. A connection that breaks under it fails it; the upstream
// may have acted on it already.
type sendOnceKey struct{}

func withSendOnce(ctx context.Context) context.Context {
	return context.WithValue(ctx, sendOnceKey{}, true)
}

func sendOnce(ctx context.Context) bool { return ctx.Value(sendOnceKey{}) != nil }

// connGone: the error of a connection the peer had closed.
func connGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func upKey(req *http.Request) (string, error) {
	if req.URL == nil || req.URL.Scheme != "https" || req.URL.Host == "" {
		return "", errors.New("dataplane: upstream requests are https://host only")
	}
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(host, port), nil
}

// dial opens a verified TLS connection to key within the upstream TLS
// timeout, through the Guard.
func (u *upstream1) dial(ctx context.Context, key string) (*upConn, error) {
	ctx, cancel := context.WithTimeout(ctx, u.p.t.UpstreamTLS+u.p.Guard.dialTimeout())
	defer cancel()
	raw, err := u.p.Guard.DialContext(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(key)
	cfg := u.tls.Clone()
	cfg.ServerName = host
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return newUpConn(key, tc, raw), nil
}

// newUpConn is an HTTP/1.1 connection to key: tc, verified, over raw.
func newUpConn(key string, tc *tls.Conn, raw net.Conn) *upConn {
	lr := &io.LimitedReader{R: tc, N: maxResponseHead}
	return &upConn{key: key, conn: tc, raw: raw, lr: lr, br: bufio.NewReaderSize(lr, 4<<10), bw: bufio.NewWriterSize(tc, 4<<10)}
}

// exchange sends req on uc and reads the answer's head.
func (u *upstream1) exchange(uc *upConn, req *http.Request) (*http.Response, error) {
	t := u.p.t
	ctx := req.Context()
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = uc.conn.SetDeadline(time.Unix(1, 0)) })
	}
	fail := func(err error) (*http.Response, error) {
		stop()
		uc.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	body, chunked := requestBody(req)
	_ = uc.conn.SetWriteDeadline(time.Now().Add(t.TunnelIdle))
	if err := writeRequestHead(uc.bw, req, chunked); err != nil {
		return fail(err)
	}
	var wrote chan error // the streaming body's outcome; nil when sent inline
	if body == nil {
		if err := uc.bw.Flush(); err != nil {
			return fail(err)
		}
		_ = uc.conn.SetReadDeadline(time.Now().Add(t.UpstreamHdr))
	} else {
		_ = uc.conn.SetReadDeadline(time.Time{}) // the answer's clock starts when the body is sent
		wrote = make(chan error, 1)
		go func() {
			err := u.writeBody(uc, req, body, chunked)
			if err != nil {
				uc.close() // the request cannot be completed: stop waiting for its answer
			}
			wrote <- err
		}()
	}
	resp, err := u.readHead(uc, req)
	if err == nil && wrote != nil && resp.StatusCode == http.StatusSwitchingProtocols {
		err = errors.New("dataplane: the upstream switched protocols while the request body was still being sent")
	}
	if err == nil && wrote != nil {
		select {
		case werr := <-wrote: // the body failed: the answer is to a request cut short
			wrote <- werr // for whoever looks next
			if werr != nil {
				_ = resp.Body.Close()
				resp, err = nil, werr
			}
		default:
		}
	}
	if err != nil {
		if wrote != nil {
			uc.close()
			if werr := <-wrote; werr != nil && !errors.Is(werr, net.ErrClosed) {
				err = werr // the body failed first (a stalled client): that is the cause
			}
		}
		return fail(err)
	}
	return u.wrapBody(uc, req, resp, wrote, stop), nil
}

// requestBody returns the body to send (nil: none) and whether it is sent
// chunked (its length is unknown).
func requestBody(req *http.Request) (io.Reader, bool) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, false
	}
	return req.Body, req.ContentLength < 0
}

// writeBody streams the request body (then closes it), flushing each
// chunk so that a slowly sent body reaches the upstream as it comes. When
// it is all sent, the wait for the answer's head begins.
func (u *upstream1) writeBody(uc *upConn, req *http.Request, body io.Reader, chunked bool) error {
	defer req.Body.Close()
	pooled := u.p.buffers.get()
	defer u.p.buffers.put(pooled)
	buf := *pooled
	var sent int64
	if !chunked { // never more than announced: extra bytes would be a request of their own upstream
		body = io.LimitReader(body, req.ContentLength)
	}
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			_ = uc.conn.SetWriteDeadline(time.Now().Add(u.p.t.TunnelIdle))
			if chunked {
				_, _ = uc.bw.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n")
			}
			_, _ = uc.bw.Write(buf[:n])
			if chunked {
				_, _ = uc.bw.WriteString("\r\n")
			}
			if err := uc.bw.Flush(); err != nil {
				return err
			}
			sent += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	switch {
	case chunked:
		_, _ = uc.bw.WriteString("0\r\n\r\n")
	case sent != req.ContentLength:
		return fmt.Errorf("dataplane: request body of %d bytes, announced as %d", sent, req.ContentLength)
	default:
		if n, _ := req.Body.Read(buf[:1]); n > 0 {
			return fmt.Errorf("dataplane: request body longer than the %d bytes announced", req.ContentLength)
		}
	}
	if err := uc.bw.Flush(); err != nil {
		return err
	}
	_ = uc.conn.SetReadDeadline(time.Now().Add(u.p.t.UpstreamHdr))
	return nil
}

// readHead reads the answer's head, passing interim (1xx) answers to the
// request's client trace.
func (u *upstream1) readHead(uc *upConn, req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(req.Context())
	if _, err := uc.br.Peek(1); err != nil {
		return nil, err // not a byte of an answer: io.EOF or a reset when the upstream had closed
	}
	for n := 0; ; n++ {
		uc.lr.N = maxResponseHead - int64(uc.br.Buffered())
		resp, err := http.ReadResponse(uc.br, req)
		if err != nil {
			return nil, err
		}
		code := resp.StatusCode
		if code == http.StatusSwitchingProtocols && !switchAsked(req, resp) {
			return nil, errors.New("dataplane: the upstream switched protocols on a request that asked for no upgrade")
		}
		if code >= 200 || code == http.StatusSwitchingProtocols {
			uc.lr.N = math.MaxInt64 // the head is read; the body's length is the body's business
			return resp, nil
		}
		if n >= upMax1xx {
			return nil, errors.New("dataplane: too many interim (1xx) answers")
		}
		if trace != nil && trace.Got1xxResponse != nil {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// switchAsked: a 101 answers a request that asked for an upgrade, and
// says Connection: upgrade. Any other 101 would turn the tunnel into a
// raw pipe that no later request's decision would see.
func switchAsked(req *http.Request, resp *http.Response) bool {
	return len(upgradeTokens(req.Header)) > 0 && httpguts.HeaderValuesContainsToken(resp.Header["Connection"], "upgrade")
}

// maxResponseHead bounds an upstream answer's head (each 1xx one too),
// as net/http's Transport bounds it (10 MiB there).
const maxResponseHead = 1 << 20

// wrapBody gives resp a body that, read to its end with the request body
// sent, returns the connection to the pool; closed early, or with the
// request body still going, it closes the connection. A protocol switch
// gets the connection itself as its body.
func (u *upstream1) wrapBody(uc *upConn, req *http.Request, resp *http.Response, wrote chan error, stop func() bool) *http.Response {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		stop()
		idle := u.p.t.TunnelIdle
		resp.Body = &switchedConn{Reader: &idleReader{r: uc.br, c: uc.conn, idle: idle}, conn: &idleConn{Conn: uc.conn, idle: idle}}
		return resp
	}
	resp.Body = &upBody{u: u, uc: uc, rc: resp.Body, ctx: req.Context(), wrote: wrote, stop: stop, reuse: !resp.Close && !req.Close}
	return resp
}

// upBody is an upstream answer's body. Each read must come within the
// tunnel idle timeout.
type upBody struct {
	u     *upstream1
	uc    *upConn
	rc    io.ReadCloser
	ctx   context.Context // the request's: once it ends, no read is started
	wrote chan error
	stop  func() bool
	reuse bool
	done  bool
}

func (b *upBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if err := b.ctx.Err(); err != nil { // its cancel hook's past deadline must not be pushed out again
		b.end(false)
		return 0, err
	}
	_ = b.uc.conn.SetReadDeadline(time.Now().Add(b.u.p.t.TunnelIdle))
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.end(true)
	}
	return n, err
}

func (b *upBody) Close() error {
	b.end(false)
	return nil
}

// end releases the connection once: back to the pool after a whole
// exchange, closed otherwise.
func (b *upBody) end(complete bool) {
	if b.done {
		return
	}
	b.done = true
	if !b.stop() {
		// The request's context ended and its hook may still put a past
		// deadline on the connection: never hand that one to another request.
		complete = false
	}
	if complete && b.reuse && b.wrote != nil {
		select {
		case err := <-b.wrote:
			complete = err == nil
		default:
			complete = false // the upstream answered before taking the whole request
		}
	}
	if complete && b.reuse && b.uc.br.Buffered() == 0 {
		b.u.pool.put(b.uc)
		return
	}
	b.uc.close()
}

// idleReader reads r, each read within idle (a silent WebSocket is closed
// after proxy.tunnel_idle_timeout).
type idleReader struct {
	r    io.Reader
	c    net.Conn
	idle time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	_ = i.c.SetReadDeadline(time.Now().Add(i.idle))
	return i.r.Read(p)
}

// switchedConn is the upstream side of a protocol switch: what the
// upstream sent after its 101 is read first.
type switchedConn struct {
	io.Reader
	conn net.Conn
}

func (c *switchedConn) Write(p []byte) (int, error) { return c.conn.Write(p) }
func (c *switchedConn) Close() error                { return c.conn.Close() }

// writeRequestHead writes req's request line and header, with the
// framing headers of its body. Like net/http's Transport, it refuses a
// header name or value that would not survive the trip (a credential with
// a line break, say) rather than sending it altered.
func writeRequestHead(bw *bufio.Writer, req *http.Request, chunked bool) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if !httpguts.ValidHostHeader(host) {
		return fmt.Errorf("dataplane: invalid Host %q", host)
	}
	_, _ = bw.WriteString(req.Method + " " + req.URL.RequestURI() + " HTTP/1.1\r\nHost: " + host + "\r\n")
	for k, vv := range req.Header {
		if requestFraming(k) {
			continue
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("dataplane: invalid header field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("dataplane: invalid header field value for %q", k)
			}
			if k == "User-Agent" && v == "" {
				continue // an empty User-Agent sends none (exchange.outbound), as net/http does
			}
			_, _ = bw.WriteString(k + ": " + v + "\r\n")
		}
	}
	switch {
	case chunked:
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	case req.ContentLength > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch:
		_, _ = bw.WriteString("Content-Length: " + strconv.FormatInt(max(req.ContentLength, 0), 10) + "\r\n")
	}
	if req.Close {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, err := bw.WriteString("\r\n")
	return err
}

// requestFraming: a header key writeRequestHead writes itself (or drops:
// Expect was answered to the client, and the body goes at once).
func requestFraming(k string) bool {
	switch k {
	case "Host", "Content-Length", "Transfer-Encoding", "Trailer", "Expect":
		return true
	}
	return false
}

// upPool keeps idle upstream connections per authority, newest first.
type upPool struct {
	mu     sync.Mutex
	idle   map[string][]*upConn
	total  int
	closed bool // sweep(true) ran: the proxy shut down, nothing is pooled any more
}

// take returns an idle connection to key that is still open, or nil.
// It peeks at a connection first (one system call), unless the request
// can be retried (replay) and the connection was idle under a second:
// then a closed one costs a retry, not a refusal.
func (p *upPool) take(key string, replay bool) *upConn {
	for {
		p.mu.Lock()
		list := p.idle[key]
		if len(list) == 0 {
			p.mu.Unlock()
			return nil
		}
		uc := list[len(list)-1]
		p.idle[key] = list[:len(list)-1]
		p.total--
		p.mu.Unlock()
		idle := time.Since(uc.idleAt)
		if idle < upIdleTimeout && (replay && idle < time.Second || peekAlive(uc.raw)) {
			uc.reused = true
			return uc
		}
		uc.close()
	}
}

func (p *upPool) put(uc *upConn) {
	_ = uc.conn.SetDeadline(time.Time{})
	uc.idleAt = time.Now()
	p.mu.Lock()
	if p.idle == nil {
		p.idle = map[string][]*upConn{}
	}
	if p.closed || p.total >= upIdleTotal || len(p.idle[uc.key]) >= upIdlePerHost {
		p.mu.Unlock()
		uc.close()
		return
	}
	p.idle[uc.key] = append(p.idle[uc.key], uc)
	p.total++
	p.mu.Unlock()
}

// sweep closes the connections idle for longer than upIdleTimeout.
func (p *upPool) sweep(all bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = p.closed || all
	for key, list := range p.idle {
		kept := list[:0]
		for _, uc := range list {
			if all || time.Since(uc.idleAt) >= upIdleTimeout {
				uc.close()
				p.total--
				continue
			}
			kept = append(kept, uc)
		}
		if len(kept) == 0 {
			delete(p.idle, key)
		} else {
			p.idle[key] = kept
		}
	}
}

// sweepEvery runs sweep(false) every period until ctx ends (the upstream
// pools' idle sweep).
func sweepEvery(ctx context.Context, every time.Duration, sweep func(all bool)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			sweep(false)
		}
	}
}
