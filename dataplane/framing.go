package dataplane

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// ErrMalformedRequest is wrapped by every error a FramingGuard reports for a
// request whose HTTP/1.1 framing it refuses: from Read, from Write after the
// rejection was sent, and in the error handed to FramingOptions.Reject.
var ErrMalformedRequest = errors.New("malformed request framing")

// FramingOptions configures NewFramingGuard. The zero value is ready to use.
type FramingOptions struct {
	// MaxHeaderBytes bounds a request head (with any leading empty lines) and
	// a chunked trailer section. Zero or negative means 64 KiB. A larger head
	// is answered with 431 instead of 400.
	MaxHeaderBytes int
	// Reject, if set, is called once with the violation (wrapping
	// ErrMalformedRequest; the text says what was wrong) to log or audit it,
	// on the reading goroutine; the audit id it returns goes into the
	// client's envelope. Nil means nothing is called and no id is sent.
	Reject func(err error) (auditID string)
}

const (
	defaultMaxHeaderBytes = 64 << 10
	initialGuardBuf       = 4 << 10
	maxChunkLine          = 4 << 10 // chunk-size line incl. extensions and CRLF, as net/http
	lingerTimeout         = 500 * time.Millisecond
	lingerMaxBytes        = 256 << 10
)

type guardState uint8

const (
	stHead      guardState = iota // a request head starts at buf[d]
	stBody                        // remain Content-Length bytes to pass
	stChunkLine                   // a chunk-size line starts at buf[d]
	stChunkData                   // remain chunk-data bytes to pass
	stChunkCRLF                   // the CRLF closing chunk data starts at buf[d]
	stTrailer                     // a trailer line (or the final empty line) starts at buf[d]
	stRaw                         // protocol switched: everything passes unchecked
	stFailed                      // a violation was found; Read returns err
)

// framingGuard is the net.Conn returned by NewFramingGuard. buf[r:d] is
// validated and may be returned by Read; buf[d:w] is read but not validated
// (an incomplete head or chunk/trailer line). Body bytes pass straight into
// the caller's slice once buf is drained. One Read never returns bytes of two
// requests, so the server reading it (serveH1, or any http.Server) gets a
// request's last head byte only after it has answered the previous one; from then on Write watches the response to a
// CONNECT or Upgrade request: 101 (2xx to CONNECT) switches to raw, any other
// final status means the next bytes are another request.
type framingGuard struct {
	net.Conn
	reject   func(error) string
	maxHead  int
	bufLimit int

	rmu          sync.Mutex // serialises Read
	buf          []byte
	r, d, w      int
	ls, scan     int // line state: start of the current line, where the '\n' search resumes
	state        guardState
	remain       int64 // bytes left in the Content-Length body or the current chunk
	head         headInfo
	skipped      int // leading empty-line bytes dropped before the current head
	trailerBytes int
	tunnel       bool  // the current request is CONNECT or Upgrade: watch its response
	sniffCONNECT bool  // ... and it is a CONNECT
	tunnelNext   bool  // the previous request was; the next bytes may be non-HTTP
	headEnd      int   // buf index where the released, undelivered head ends, or -1
	curServed    bool  // the server has the current request's whole head
	served       int   // request heads fully delivered so far
	delivered    int64 // bytes returned by Read so far
	err          error // sticky; set with state stFailed

	onMessageEnd func(end int64) // test hook: stream offset where a request ended

	watch       atomic.Bool // Write must take wmu: sniffing, or a rejection was sent
	wmu         sync.Mutex  // guards the fields below
	sniff       respSniffer
	pendingResp []byte // rejection response not written yet
	rejectSent  bool
	lingered    bool
}

// NewFramingGuard wraps a client connection and checks each HTTP/1.1 request
// head and chunked framing before the server's parser (net/http's) sees it. A head is held back until
// validated whole; bodies pass through unbuffered. At most MaxHeaderBytes
// (at least 4 KiB) is buffered. Leading empty lines before a request are
// dropped. It rejects: Content-Length with Transfer-Encoding; more than one
// Content-Length or Transfer-Encoding; a Content-Length other than digits; a
// Transfer-Encoding other than exactly "chunked", or any on HTTP/1.0;
// obs-fold; whitespace before a colon; bare LF; controls other than HTAB; a
// request line other than "METHOD SP target SP HTTP/1.x"; a head over
// MaxHeaderBytes (431); bad chunk-size lines, chunk terminators, trailers.
//
// On a violation it sends 400 (or 431) with the JSON error envelope and
// Connection: close, and Read returns a *net.OpError (Op "read", so a
// server closes quietly) wrapping ErrMalformedRequest. The response goes
// out at once if it cannot overtake another (first request, or inside the
// body the server is reading), else at the next Read or Close, once earlier
// pipelined requests are answered. Then Write fails wrapping
// ErrMalformedRequest, and Close half-closes and drains for up to 500 ms so
// the client reads the response rather than a reset.
//
// After a CONNECT or Upgrade request answered through this conn with 2xx
// (CONNECT) or 101, the rest of the connection passes unchecked. Deadlines
// and addresses pass through.
func NewFramingGuard(c net.Conn, opts FramingOptions) net.Conn {
	maxHead := opts.MaxHeaderBytes
	if maxHead <= 0 {
		maxHead = defaultMaxHeaderBytes
	}
	return &framingGuard{
		Conn:     c,
		reject:   opts.Reject,
		maxHead:  maxHead,
		bufLimit: max(maxHead, maxChunkLine),
		headEnd:  -1,
	}
}

// Read returns validated request bytes; see NewFramingGuard.
func (g *framingGuard) Read(p []byte) (int, error) {
	g.rmu.Lock()
	defer g.rmu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if g.err != nil {
			g.flushReject()
			return 0, g.err
		}
		if g.r < g.d {
			return g.deliver(p), nil
		}
		if g.d == g.w && g.passthrough() {
			return g.readDirect(p)
		}
		if err := g.advance(); err != nil {
			return 0, err
		}
		if g.r < g.d || (g.d == g.w && g.passthrough()) {
			continue
		}
		if n, err := g.fill(); err != nil || n == 0 {
			return 0, err
		}
	}
}

// Write passes p to the connection, watching response status lines while a
// tunnel decision is pending. After a rejection was sent it fails instead.
func (g *framingGuard) Write(p []byte) (int, error) {
	if g.watch.Load() {
		g.wmu.Lock()
		if g.rejectSent {
			g.wmu.Unlock()
			return 0, fmt.Errorf("%w: the connection was already answered with a rejection", ErrMalformedRequest)
		}
		g.sniff.feed(p) // before the bytes leave: a client's reaction cannot precede it
		g.wmu.Unlock()
	}
	return g.Conn.Write(p)
}

// Close sends a pending rejection, lingers briefly after one (half-close and
// drain, so the client is not reset before reading it) and closes the conn.
func (g *framingGuard) Close() error {
	g.wmu.Lock()
	linger := (g.pendingResp != nil || g.rejectSent) && !g.lingered
	g.lingered = g.lingered || linger
	g.wmu.Unlock()
	if linger {
		g.flushReject()
		_ = g.CloseWrite()
		_ = g.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, g.Conn, lingerMaxBytes)
	}
	return g.Conn.Close()
}

// CloseWrite half-closes the underlying connection (as TCP and TLS conns
// do), so http.Server and tunnels can signal EOF; it returns
// errors.ErrUnsupported when the underlying conn cannot.
func (g *framingGuard) CloseWrite() error {
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (g *framingGuard) passthrough() bool {
	return g.state == stRaw || g.state == stBody || g.state == stChunkData
}

// deliver copies validated bytes out of buf.
func (g *framingGuard) deliver(p []byte) int {
	n := copy(p, g.buf[g.r:g.d])
	g.r += n
	g.delivered += int64(n)
	if g.headEnd >= 0 && g.r >= g.headEnd {
		g.headEnd = -1
		g.curServed = true
		g.served++
		if g.tunnel {
			g.setSniff(true)
		}
	}
	if g.r == g.w { // drained: rewind (no partial line can be pending here)
		g.r, g.d, g.w, g.ls, g.scan = 0, 0, 0, 0, 0
		if g.state == stRaw {
			g.buf = nil
		}
	}
	return n
}

// readDirect reads body or tunnel bytes from the connection straight into p.
func (g *framingGuard) readDirect(p []byte) (int, error) {
	if g.state != stRaw && int64(len(p)) > g.remain {
		p = p[:g.remain]
	}
	n, err := g.Conn.Read(p)
	g.delivered += int64(n)
	if g.state != stRaw && n > 0 {
		g.remain -= int64(n)
		if g.remain == 0 {
			g.bodyDone()
		}
	}
	return n, err
}

// fill reads more bytes into buf[w:], first making room when buf is full.
// It must only be called with r == d.
func (g *framingGuard) fill() (int, error) {
	switch {
	case g.buf == nil:
		g.buf = make([]byte, min(initialGuardBuf, g.bufLimit))
	case g.w < len(g.buf):
	case g.d > 0:
		n := copy(g.buf, g.buf[g.d:g.w])
		g.ls -= g.d
		g.scan -= g.d
		g.r, g.d, g.w = 0, 0, n
	case len(g.buf) < g.bufLimit:
		nb := make([]byte, min(2*len(g.buf), g.bufLimit))
		copy(nb, g.buf[:g.w])
		g.buf = nb
	default: // unreachable: every line state rejects before the buffer fills
		return 0, g.fail(http.StatusRequestHeaderFieldsTooLarge, "request framing exceeds the buffer; send shorter lines")
	}
	n, err := g.Conn.Read(g.buf[g.w:])
	g.w += n
	if n > 0 {
		return n, nil // a sticky error (EOF, timeout) will come back on the next read
	}
	return 0, err
}

// advance validates buffered bytes, moving d forward as far as the current
// request allows. It stops at the end of a request until r catches up.
func (g *framingGuard) advance() error {
	for g.state != stHead || g.r == g.d {
		var ok bool
		var err error
		switch g.state {
		case stHead:
			ok, err = g.stepHead()
		case stBody, stChunkData:
			if ok = g.d < g.w; ok {
				n := min(int64(g.w-g.d), g.remain)
				g.d += int(n)
				if g.remain -= n; g.remain == 0 {
					g.bodyDone()
				}
			}
		case stChunkCRLF:
			if ok = g.w-g.d >= 2; ok {
				if g.buf[g.d] != '\r' || g.buf[g.d+1] != '\n' {
					return g.fail(http.StatusBadRequest, "chunk data is not followed by CRLF; the chunk size does not match the data")
				}
				g.d += 2
				g.lineState(stChunkLine)
			}
		case stChunkLine:
			ok, err = g.stepChunkLine()
		case stTrailer:
			ok, err = g.stepTrailer()
		case stRaw:
			ok = g.d < g.w
			g.d = g.w
		}
		if err != nil || !ok {
			return err
		}
	}
	return nil
}

func (g *framingGuard) lineState(s guardState) {
	g.state = s
	g.ls, g.scan = g.d, g.d
}

// nextLine returns the next complete line (through '\n') starting at ls.
func (g *framingGuard) nextLine() ([]byte, bool) {
	i := bytes.IndexByte(g.buf[g.scan:g.w], '\n')
	if i < 0 {
		g.scan = g.w
		return nil, false
	}
	end := g.scan + i + 1
	line := g.buf[g.ls:end]
	g.ls, g.scan = end, end
	return line, true
}

// stepHead consumes one head line; at the empty line it validates the head
// as a whole and releases it.
func (g *framingGuard) stepHead() (bool, error) {
	if g.tunnelNext && g.decideTunnel() {
		return true, nil
	}
	line, ok := g.nextLine()
	end := g.ls
	if !ok {
		end = g.w + 1 // at least one more byte is needed
	}
	if end-g.d+g.skipped > g.maxHead {
		return false, g.fail(http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("request head exceeds %d bytes; send fewer or shorter headers", g.maxHead))
	}
	if !ok {
		return false, nil
	}
	content, msg := lineContent(line)
	if msg != "" {
		return false, g.fail(http.StatusBadRequest, msg)
	}
	switch {
	case g.head.lines == 0 && len(content) == 0: // RFC 9112 §2.2: ignore leading empty lines
		g.skipped += len(line)
		g.r, g.d = g.ls, g.ls
	case g.head.lines == 0:
		msg = g.head.requestLine(content)
	case len(content) > 0:
		msg = g.head.field(content)
	default:
		if msg = g.head.authorityConflict(); msg != "" {
			return false, g.failAs(http.StatusForbidden, policy.ReasonAuthorityMismatch, msg)
		}
		if msg = g.head.finish(); msg == "" {
			g.releaseHead()
		}
	}
	if msg != "" {
		return false, g.fail(http.StatusBadRequest, msg)
	}
	return true, nil
}

// decideTunnel runs at the start of the request after a CONNECT or Upgrade
// request and reports whether the connection switched to raw pass-through.
func (g *framingGuard) decideTunnel() bool {
	g.wmu.Lock()
	res := g.sniff.result
	g.wmu.Unlock()
	// With nothing conclusive written yet, a first byte that cannot begin a
	// request for net/http (not a token char, CR or LF) is tunnel data from
	// a client that did not wait for the response; anything else is parsed
	// as HTTP until the response says otherwise.
	raw := res == sniffSwitched || (res == sniffPending && g.head.lines == 0 && g.skipped == 0 &&
		g.ls == g.d && g.d < g.w && !isTchar(g.buf[g.d]) && g.buf[g.d] != '\r' && g.buf[g.d] != '\n')
	if raw || res == sniffRefused {
		g.tunnelNext = false
		g.setSniff(false)
	}
	if raw {
		g.state = stRaw
		g.head, g.skipped = headInfo{}, 0
	}
	return raw
}

func (g *framingGuard) releaseHead() {
	h := g.head
	g.d = g.ls
	if g.tunnelNext {
		g.tunnelNext = false
		g.setSniff(false)
	}
	g.tunnel, g.sniffCONNECT = h.connect || h.upgrade, h.connect
	g.headEnd, g.curServed = g.d, false
	g.head, g.skipped = headInfo{}, 0
	switch {
	case h.te:
		g.lineState(stChunkLine)
	case h.cl > 0:
		g.state, g.remain = stBody, h.cl
	default:
		g.endMessage()
	}
}

func (g *framingGuard) bodyDone() {
	if g.state == stBody {
		g.endMessage()
		return
	}
	g.state = stChunkCRLF
}

func (g *framingGuard) endMessage() {
	g.lineState(stHead)
	g.tunnelNext = g.tunnel
	if g.onMessageEnd != nil {
		g.onMessageEnd(g.delivered + int64(g.d-g.r))
	}
}

func (g *framingGuard) stepChunkLine() (bool, error) {
	line, ok := g.nextLine()
	if (!ok && g.w-g.d >= maxChunkLine) || len(line) > maxChunkLine {
		return false, g.fail(http.StatusBadRequest, fmt.Sprintf("chunk-size line is longer than %d bytes", maxChunkLine))
	}
	if !ok {
		return false, nil
	}
	size, msg := parseChunkLine(line)
	if msg != "" {
		return false, g.fail(http.StatusBadRequest, msg)
	}
	g.d = g.ls
	if size == 0 {
		g.state, g.trailerBytes = stTrailer, 0
	} else {
		g.state, g.remain = stChunkData, size
	}
	return true, nil
}

func (g *framingGuard) stepTrailer() (bool, error) {
	line, ok := g.nextLine()
	size := g.trailerBytes + len(line)
	if !ok {
		size = g.trailerBytes + g.w - g.d + 1
	}
	if size > g.maxHead {
		return false, g.fail(http.StatusBadRequest,
			fmt.Sprintf("chunked trailer section exceeds %d bytes; send fewer trailers", g.maxHead))
	}
	if !ok {
		return false, nil
	}
	g.trailerBytes = size
	content, msg := lineContent(line)
	if msg == "" && len(content) > 0 {
		_, _, msg = splitField(content)
	}
	if msg != "" {
		return false, g.fail(http.StatusBadRequest, "in chunked trailer: "+msg)
	}
	g.d = g.ls
	if len(content) == 0 {
		g.endMessage()
	}
	return true, nil
}

// fail records a violation of the framing rules (malformed_request, or
// request_header_too_large for 431) and sends the rejection; see failAs.
func (g *framingGuard) fail(status int, msg string) error {
	reason := policy.ReasonMalformedRequest
	if status == http.StatusRequestHeaderFieldsTooLarge {
		reason = policy.ReasonHeaderTooLarge
	}
	return g.failAs(status, reason, msg)
}

// failAs records a violation, reports it and sends (or schedules) the
// rejection response with status and reason. It returns the error Read
// must return.
func (g *framingGuard) failAs(status int, reason policy.Reason, msg string) error {
	// Answer at once unless a response to an earlier request may still be
	// on its way: only when the server has no request yet, or is reading
	// this request's body (so it is done with earlier ones).
	now := g.served == 0 || (g.state != stHead && g.curServed)
	var cause error = fmt.Errorf("%w: %s", ErrMalformedRequest, msg)
	if reason != policy.ReasonMalformedRequest && reason != policy.ReasonHeaderTooLarge {
		cause = fmt.Errorf("%w: %w", ErrMalformedRequest, &DenyError{Reason: reason, Message: msg})
	}
	g.state = stFailed
	oe := &net.OpError{Op: "read", Source: g.Conn.LocalAddr(), Addr: g.Conn.RemoteAddr(), Err: cause}
	if oe.Source != nil {
		oe.Net = oe.Source.Network()
	}
	g.err = oe
	g.buf, g.r, g.d, g.w = nil, 0, 0, 0
	auditID := ""
	if g.reject != nil {
		auditID = g.reject(cause)
	}
	g.wmu.Lock()
	g.pendingResp = rejectResponse(status, reason, msg, auditID)
	g.wmu.Unlock()
	if now {
		g.flushReject()
	}
	return g.err
}

// flushReject writes the pending rejection response, if any, with a bounded
// write deadline, and makes later Writes fail.
func (g *framingGuard) flushReject() {
	g.wmu.Lock()
	resp := g.pendingResp
	g.pendingResp, g.rejectSent = nil, g.rejectSent || resp != nil
	g.watch.Store(g.rejectSent || g.sniff.active)
	g.wmu.Unlock()
	if resp != nil {
		_ = g.Conn.SetWriteDeadline(time.Now().Add(lingerTimeout))
		_, _ = g.Conn.Write(resp)
	}
}

// setSniff starts (fresh) or stops watching written status lines.
func (g *framingGuard) setSniff(on bool) {
	g.wmu.Lock()
	g.sniff = respSniffer{active: on, connect: g.sniffCONNECT}
	g.watch.Store(on || g.rejectSent)
	g.wmu.Unlock()
}

// rejectResponse renders the rejection with the JSON error envelope.
func rejectResponse(status int, reason policy.Reason, msg, auditID string) []byte {
	class := ClassBadRequest
	if status == http.StatusForbidden {
		class = ClassCapabilityDenied
	}
	body := Refusal{Status: status, Class: class, Reason: reason, Message: msg, AuditID: auditID}.body()
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

type sniffResult uint8

const (
	sniffPending  sniffResult = iota
	sniffSwitched             // 101, or 2xx to CONNECT
	sniffRefused              // any other final status, or not a status line
)

// respSniffer classifies the response written after a CONNECT or Upgrade
// request, skipping interim 1xx responses. It keeps 16 bytes of state.
type respSniffer struct {
	active, connect bool
	skipping        bool // inside an interim response, looking for CRLFCRLF
	n               int
	line            [12]byte // "HTTP/1.1 101"
	tail            uint32
	result          sniffResult
}

func (s *respSniffer) feed(p []byte) {
	for s.active && s.result == sniffPending && len(p) > 0 {
		if s.skipping {
			for len(p) > 0 && s.tail != 0x0d0a0d0a {
				s.tail = s.tail<<8 | uint32(p[0])
				p = p[1:]
			}
			if s.tail == 0x0d0a0d0a {
				s.skipping, s.n, s.tail = false, 0, 0
			}
			continue
		}
		k := copy(s.line[s.n:], p)
		s.n += k
		p = p[k:]
		if s.n == len(s.line) {
			s.classify()
		}
	}
}

func (s *respSniffer) classify() {
	l := s.line[:]
	if string(l[:7]) != "HTTP/1." || !isDigit(l[7]) || l[8] != ' ' || !isDigit(l[9]) || !isDigit(l[10]) || !isDigit(l[11]) {
		s.result = sniffRefused
		return
	}
	code := int(l[9]-'0')*100 + int(l[10]-'0')*10 + int(l[11]-'0')
	switch {
	case code == http.StatusSwitchingProtocols, s.connect && code/100 == 2:
		s.result = sniffSwitched
	case code/100 == 1:
		s.skipping = true
	default:
		s.result = sniffRefused
	}
}
