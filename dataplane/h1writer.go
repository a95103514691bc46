package dataplane

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// h1Writer is the http.ResponseWriter of one request on an HTTP/1.1
// tunnel. It writes into the tunnel's buffered writer, so a small answer
// (head and body) leaves in one write when the request ends; Flush sends
// what is buffered at once (an event stream, a chunked upstream answer).
//
// The head is fixed by the first WriteHeader with a final status (or the
// first Write): its framing is the handler's Content-Length when set,
// else chunked (an HTTP/1.0 client gets a body ended by closing the
// connection). Header changes after that are trailers only, as in
// net/http: keys announced in "Trailer" and keys with http.TrailerPrefix,
// sent after a chunked body. A 1xx status is written at once (a 100
// Continue at most once), and Hijack hands the connection over for a
// protocol switch.
type h1Writer struct {
	hc     *h1Conn
	req    *http.Request
	body   *h1Body // the request body; nil without one
	header http.Header

	mu        sync.Mutex // orders a 100 Continue (sent from whichever goroutine reads the body) with the head
	committed bool       // the final head is in the buffer
	continued bool       // a 100 Continue went out, or none may be sent any more
	hijacked  bool

	status     int
	declared   int64 // Content-Length of the head, or -1
	written    int64
	chunked    bool
	noBody     bool // HEAD, 1xx, 204, 304: nothing after the head
	closeAfter bool // the connection closes after this answer
	trailers   []string
	err        error // the first failed write: the client stopped taking the answer
}

func newH1Writer(hc *h1Conn, r *http.Request, body *h1Body) *h1Writer {
	return &h1Writer{hc: hc, req: r, body: body, header: make(http.Header, 8), declared: -1}
}

func (w *h1Writer) Header() http.Header { return w.header }

// WriteHeader writes a 1xx head at once; a final status fixes the head.
// Later calls, and codes outside 100–999, are ignored.
func (w *h1Writer) WriteHeader(code int) {
	if w.hijacked || code < 100 || code > 999 {
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.interim(code)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.committed {
		w.commit(code)
	}
}

// interim writes a 1xx response before the final one.
func (w *h1Writer) interim(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committed || code == http.StatusContinue && w.continued {
		return
	}
	if code == http.StatusContinue {
		w.continued = true
	}
	bw := w.hc.bw
	writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
	writeHeaderLines(bw, w.header, nil)
	_, _ = bw.WriteString("\r\n")
	w.setErr(bw.Flush())
}

// sendContinue answers Expect: 100-continue when the body is first read,
// unless the final head went out first.
func (w *h1Writer) sendContinue() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committed || w.continued {
		return
	}
	w.continued = true
	_, _ = w.hc.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	w.setErr(w.hc.bw.Flush())
}

// commit writes the final head into the buffer; w.mu is held.
func (w *h1Writer) commit(code int) {
	owed := !w.continued // the client waits for a 100 Continue before it sends the body
	w.committed, w.continued, w.status = true, true, code
	h := w.header
	w.noBody = w.req.Method == http.MethodHead || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified
	if cl := h.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n >= 0 {
			w.declared = n
		} else {
			h.Del("Content-Length")
		}
	}
	for _, v := range h["Trailer"] {
		for _, k := range strings.Split(v, ",") {
			if k = http.CanonicalHeaderKey(strings.TrimSpace(k)); k != "" {
				w.trailers = append(w.trailers, k)
			}
		}
	}
	switch {
	case w.noBody || w.declared >= 0:
	case w.req.ProtoAtLeast(1, 1):
		w.chunked = true
	default:
		w.closeAfter = true // HTTP/1.0 and no length: the body ends when the connection does
	}
	if !w.body.reusable(owed) || w.req.Close || httpguts.HeaderValuesContainsToken(h["Connection"], "close") || w.hc.draining() {
		w.closeAfter = true
	}
	bw := w.hc.bw
	writeStatusLine(bw, w.req.ProtoAtLeast(1, 1), code)
	writeHeaderLines(bw, h, hopResponseHeader)
	if _, ok := h["Date"]; !ok {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.WriteString(w.hc.p.dates.now())
		_, _ = bw.WriteString("\r\n")
	}
	if w.chunked {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.closeAfter {
		_, _ = bw.WriteString("Connection: close\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// hopResponseHeader: a header the writer writes itself, never copies.
func hopResponseHeader(k string) bool {
	return k == "Transfer-Encoding" || k == "Connection" || k == "Keep-Alive"
}

func (w *h1Writer) Write(b []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.committed {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		if w.status == http.StatusNoContent || w.status == http.StatusNotModified || w.status < 200 {
			return 0, http.ErrBodyNotAllowed
		}
		return len(b), nil // HEAD: the body is not sent
	}
	if w.err != nil {
		return 0, w.err
	}
	var over error
	if w.declared >= 0 && w.written+int64(len(b)) > w.declared {
		b, over = b[:w.declared-w.written], http.ErrContentLength
	}
	if len(b) == 0 {
		return 0, over
	}
	bw := w.hc.bw
	if w.chunked {
		_, _ = bw.WriteString(strconv.FormatInt(int64(len(b)), 16))
		_, _ = bw.WriteString("\r\n")
	}
	n, err := bw.Write(b)
	if w.chunked && err == nil {
		_, err = bw.WriteString("\r\n")
	}
	w.written += int64(n)
	if err != nil {
		w.setErr(err)
		return n, err
	}
	return n, over
}

// Flush sends what is buffered (FlushError for http.ResponseController).
func (w *h1Writer) Flush() { _ = w.FlushError() }

func (w *h1Writer) FlushError() error {
	if w.hijacked {
		return http.ErrHijacked
	}
	if !w.committed {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	err := w.hc.bw.Flush()
	w.setErr(err)
	return err
}

// Hijack hands the connection over (a protocol switch). What the client
// sent after the request head, still in the read buffer, is read first
// from the returned connection.
func (w *h1Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hijacked || w.committed {
		return nil, nil, errors.New("dataplane: Hijack after the response head was written")
	}
	if w.body != nil && !w.body.eof.Load() {
		return nil, nil, errors.New("dataplane: no protocol switch before the request body has been read")
	}
	if !w.hc.p.h1.switched(w.hc) {
		return nil, nil, errDraining
	}
	w.hijacked, w.continued = true, true
	hc := w.hc
	hc.watch.disarm() // the switched protocol reads the connection from now on
	return &hijackedConn{Conn: hc.c, br: hc.br}, bufio.NewReadWriter(hc.br, hc.bw), nil
}

func (w *h1Writer) SetReadDeadline(t time.Time) error  { return w.hc.c.SetReadDeadline(t) }
func (w *h1Writer) SetWriteDeadline(t time.Time) error { return w.hc.c.SetWriteDeadline(t) }

// EnableFullDuplex: an HTTP/1.1 tunnel already reads the request body
// while the answer is written.
func (w *h1Writer) EnableFullDuplex() error { return nil }

func (w *h1Writer) setErr(err error) {
	if err != nil && w.err == nil {
		w.err = err
	}
}

// finish ends the answer after the handler returned: an answer never
// started is a 200 with no body; a chunked body gets its last chunk and
// trailers; a body shorter than its Content-Length closes the connection.
// It reports whether the connection may serve another request.
func (w *h1Writer) finish() bool {
	if w.hijacked {
		return false
	}
	w.mu.Lock()
	if !w.committed {
		if _, ok := w.header["Content-Length"]; !ok && w.req.Method != http.MethodHead {
			w.header.Set("Content-Length", "0")
		}
		w.commit(http.StatusOK)
	}
	w.mu.Unlock()
	bw := w.hc.bw
	if w.chunked && w.err == nil {
		_, _ = bw.WriteString("0\r\n")
		writeHeaderLines(bw, w.finalTrailers(), nil)
		_, _ = bw.WriteString("\r\n")
	}
	if w.declared >= 0 && !w.noBody && w.written < w.declared {
		w.closeAfter = true
	}
	w.setErr(bw.Flush())
	return w.err == nil && !w.closeAfter
}

// finalTrailers collects the announced trailers and the TrailerPrefix
// keys from the handler's header map.
func (w *h1Writer) finalTrailers() http.Header {
	var t http.Header
	add := func(k string, vv []string) {
		if len(vv) == 0 || hopResponseHeader(k) || k == "Content-Length" || k == "Trailer" {
			return
		}
		if t == nil {
			t = make(http.Header)
		}
		t[k] = append(t[k], vv...)
	}
	for _, k := range w.trailers {
		add(k, w.header[k])
	}
	for k, vv := range w.header {
		if rest, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			add(http.CanonicalHeaderKey(rest), vv)
		}
	}
	return t
}

func writeStatusLine(bw *bufio.Writer, http11 bool, code int) {
	if http11 {
		_, _ = bw.WriteString("HTTP/1.1 ")
	} else {
		_, _ = bw.WriteString("HTTP/1.0 ")
	}
	_, _ = bw.WriteString(strconv.Itoa(code))
	_ = bw.WriteByte(' ')
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	_, _ = bw.WriteString(text)
	_, _ = bw.WriteString("\r\n")
}

// writeHeaderLines writes h's lines, skipping the keys skip reports (nil:
// none) and TrailerPrefix keys; a value's CR or LF becomes a space, so no value can
// end the head early.
func writeHeaderLines(bw *bufio.Writer, h http.Header, skip func(string) bool) {
	for k, vv := range h {
		if skip != nil && skip(k) || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		for _, v := range vv {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			_, _ = bw.WriteString(strings.TrimSpace(v))
			_, _ = bw.WriteString("\r\n")
		}
	}
}

// dates formats the Date header once a second.
type dates struct{ last atomic.Pointer[cachedDate] }

type cachedDate struct {
	sec  int64
	text string
}

func (d *dates) now() string {
	now := time.Now().Unix()
	if c := d.last.Load(); c != nil && c.sec == now {
		return c.text
	}
	c := &cachedDate{sec: now, text: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	d.last.Store(c)
	return c.text
}

// hijackedConn reads first what the tunnel's reader buffered.
type hijackedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *hijackedConn) Read(p []byte) (int, error) { return c.br.Read(p) }
