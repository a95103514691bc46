package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// guardListener wraps every accepted conn with NewFramingGuard.
type guardListener struct {
	net.Listener
	opts FramingOptions
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewFramingGuard(c, l.opts), nil
}

// framingServer is a real http.Server behind a guardListener that records
// handler calls and rejections.
type framingServer struct {
	addr    string
	mu      sync.Mutex
	calls   []string
	rejects []error
	tunnels sync.WaitGroup
}

func startFramingServer(t *testing.T, opts FramingOptions) *framingServer {
	t.Helper()
	s := &framingServer{}
	opts.Reject = func(err error) string {
		s.mu.Lock()
		s.rejects = append(s.rejects, err)
		s.mu.Unlock()
		return "a_test"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(guardListener{Listener: ln, opts: opts})
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
		s.tunnels.Wait()
	})
	return s
}

func (s *framingServer) record(call string) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.mu.Unlock()
}

func (s *framingServer) snapshot() ([]string, []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...), append([]error(nil), s.rejects...)
}

func (s *framingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect && r.Host == "deny.example:443":
		s.record("CONNECT " + r.RequestURI + " ")
		w.WriteHeader(http.StatusForbidden)
		return
	case r.Method == http.MethodConnect:
		s.record("CONNECT " + r.RequestURI + " ")
		s.tunnel(w, "HTTP/1.1 200 Connection Established\r\n\r\n")
		return
	case r.URL.Path == "/ws":
		body, _ := io.ReadAll(r.Body) // an error shows as a missing body
		s.record(r.Method + " " + r.RequestURI + " " + string(body))
		s.tunnel(w, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		return
	}
	body, err := io.ReadAll(r.Body)
	switch {
	case errors.Is(err, ErrMalformedRequest):
		s.record(r.Method + " " + r.RequestURI + " !malformed")
	case err != nil:
		s.record(r.Method + " " + r.RequestURI + " !" + err.Error())
	default:
		s.record(r.Method + " " + r.RequestURI + " " + string(body))
	}
	_, _ = io.WriteString(w, "ok")
}

// tunnel hijacks, answers with status and echoes raw bytes until EOF.
func (s *framingServer) tunnel(w http.ResponseWriter, status string) {
	s.tunnels.Add(1)
	defer s.tunnels.Done()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.record("hijack failed: " + err.Error())
		return
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, status); err != nil {
		return
	}
	_, _ = io.Copy(conn, brw.Reader)
}

func dialFraming(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// A safety net against hangs, not a synchronisation device.
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return c, bufio.NewReader(c)
}

type framingExchange struct {
	send string
	want []int // statuses of the responses to read after send
}

const (
	clte        = "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	postBody    = "POST /p HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"
	chunkedHead = "POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n"
	chunked     = chunkedHead +
		"5;name=value\r\nhello\r\n6;q=\"a b\"\r\n world\r\n0\r\nX-Sum: 1\r\nX-Other: two\r\n\r\n"
)

func reqGET(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n" }

func single(send string, want ...int) []framingExchange {
	return []framingExchange{{send: send, want: want}}
}

type framingCase struct {
	name   string
	ex     []framingExchange
	calls  []string // handler calls, in order
	reject string   // message fragment of the final 400/431; "" = no rejection
}

func framingServerCases() []framingCase {
	bigHead := "GET /big HTTP/1.1\r\nHost: t\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\n\r\n"
	return []framingCase{
		{name: "valid GET", ex: single(reqGET("/a"), 200), calls: []string{"GET /a "}},
		{name: "POST with Content-Length", ex: single(postBody, 200), calls: []string{"POST /p hello"}},
		{name: "chunked with extensions and trailers", ex: single(chunked, 200), calls: []string{"POST /c hello world"}},
		{name: "pipelined two requests", ex: single(reqGET("/1")+reqGET("/2"), 200, 200), calls: []string{"GET /1 ", "GET /2 "}},
		{name: "keep-alive sequence", ex: []framingExchange{{postBody, []int{200}}, {chunked, []int{200}}, {reqGET("/g"), []int{200}}},
			calls: []string{"POST /p hello", "POST /c hello world", "GET /g "}},
		{name: "leading empty line tolerated", ex: single("\r\n"+reqGET("/a"), 200), calls: []string{"GET /a "}},
		{name: "HTTP/1.0 request", ex: single("GET /old HTTP/1.0\r\n\r\n", 200), calls: []string{"GET /old "}},
		{name: "request after Content-Length body is its own request",
			ex: single(postBody+reqGET("/admin"), 200, 200), calls: []string{"POST /p hello", "GET /admin "}},
		{name: "malformed request after body is rejected after the earlier response",
			ex: single(postBody+clte, 200, 400), calls: []string{"POST /p hello"}, reject: "both Content-Length and Transfer-Encoding"},
		{name: "keep-alive then malformed", ex: []framingExchange{{reqGET("/a"), []int{200}}, {clte, []int{400}}},
			calls: []string{"GET /a "}, reject: "both Content-Length and Transfer-Encoding; send one of them"},
		{name: "CL and TE", ex: single(clte, 400), reject: "request has both Content-Length and Transfer-Encoding; send one of them"},
		{name: "TE and CL", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400),
			reject: "both Content-Length and Transfer-Encoding"},
		{name: "duplicate equal Content-Length", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello", 400),
			reject: "more than one Content-Length"},
		{name: "Content-Length list", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 5\r\n\r\nhello", 400),
			reject: "Content-Length is not a decimal number"},
		{name: "Content-Length sign", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello", 400),
			reject: "Content-Length is not a decimal number"},
		{name: "TE chunked, identity", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400),
			reject: `Transfer-Encoding must be exactly "chunked"`},
		{name: "TE xchunked", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400),
			reject: `Transfer-Encoding must be exactly "chunked"`},
		{name: "duplicate TE", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
			reject: "more than one Transfer-Encoding"},
		{name: "TE on HTTP/1.0", ex: single("POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
			reject: "not allowed in an HTTP/1.0 request"},
		{name: "obs-fold", ex: single("GET /x HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n", 400),
			reject: "obsolete line folding"},
		{name: "space before colon", ex: single("POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400),
			reject: `whitespace between header field name "Transfer-Encoding" and the colon`},
		{name: "bare LF", ex: single("GET /x HTTP/1.1\nHost: t\n\n", 400), reject: "bare LF"},
		{name: "NUL in header", ex: single("GET /x HTTP/1.1\r\nHost: t\r\nX-A: a\x00b\r\n\r\n", 400), reject: "control character 0x00"},
		{name: "bad request line", ex: single("GET /x  HTTP/1.1\r\nHost: t\r\n\r\n", 400), reject: "request line is not"},
		{name: "HTTP/2 request line", ex: single("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400), reject: "request line is not"},
		{name: "oversized head", ex: single(bigHead, 431), reject: "request head exceeds 65536 bytes"},
		// Sent in one write, the bad chunk arrives with the head, so the
		// request is refused before the handler sees it.
		{name: "bad chunk size", ex: single(chunkedHead+"5\r\nhello\r\nzz\r\n", 400), reject: "chunk size is not a hexadecimal number"},
		{name: "chunk longer than its size", ex: single(chunkedHead+"3\r\nhello\r\n0\r\n\r\n", 400), reject: "chunk data is not followed by CRLF"},
		// With Expect: 100-continue the client sends the body only once the
		// handler reads it, so the violation is found mid-body.
		{name: "bad chunk size while the handler reads",
			ex: []framingExchange{{"POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n", []int{100}},
				{"5\r\nhello\r\n-1\r\n", []int{400}}},
			calls: []string{"POST /e !malformed"}, reject: "chunk size is not a hexadecimal number"},
		{name: "bad trailer while the handler reads",
			ex: []framingExchange{{"POST /e HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n", []int{100}},
				{"5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n", []int{400}}},
			calls: []string{"POST /e !malformed"}, reject: "in chunked trailer: whitespace between header field name"},
		{name: "CONNECT refused then smuggled request",
			ex:    single("CONNECT deny.example:443 HTTP/1.1\r\nHost: deny.example:443\r\n\r\n"+clte, 403, 400),
			calls: []string{"CONNECT deny.example:443 "}, reject: "both Content-Length and Transfer-Encoding"},
		{name: "Upgrade refused then smuggled request",
			ex:    single("GET /noup HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"+clte, 200, 400),
			calls: []string{"GET /noup "}, reject: "both Content-Length and Transfer-Encoding"},
	}
}

func TestFramingGuardServer(t *testing.T) {
	for _, tc := range framingServerCases() {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFramingServer(t, FramingOptions{})
			c, br := dialFraming(t, srv.addr)
			for _, ex := range tc.ex {
				if _, err := io.WriteString(c, ex.send); err != nil {
					t.Fatalf("write: %v", err)
				}
				for _, want := range ex.want {
					checkFramingResponse(t, br, want, tc.reject)
				}
			}
			if tc.reject != "" {
				if b, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("after the rejection got byte %q, err %v; want EOF", b, err)
				}
			}
			c.Close()
			calls, rejects := srv.snapshot()
			if strings.Join(calls, "|") != strings.Join(tc.calls, "|") {
				t.Errorf("handler calls = %q, want %q", calls, tc.calls)
			}
			switch {
			case tc.reject == "" && len(rejects) != 0:
				t.Errorf("unexpected rejections: %v", rejects)
			case tc.reject != "" && (len(rejects) != 1 || !errors.Is(rejects[0], ErrMalformedRequest) ||
				!strings.Contains(rejects[0].Error(), tc.reject)):
				t.Errorf("Reject got %v, want one error wrapping ErrMalformedRequest containing %q", rejects, tc.reject)
			}
		})
	}
}

func checkFramingResponse(t *testing.T, br *bufio.Reader, want int, reject string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response (want %d): %v", want, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	if resp.StatusCode != want {
		t.Fatalf("status = %d (%s), want %d", resp.StatusCode, body, want)
	}
	if want != 400 && want != 431 {
		return
	}
	var env struct {
		Error struct{ Class, Reason, Message string }
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("rejection body %q is not the JSON envelope: %v", body, err)
	}
	reason := map[int]string{400: "malformed_request", 431: "request_header_too_large"}[want]
	if env.Error.Class != "bad_request" || env.Error.Reason != reason || !strings.Contains(env.Error.Message, reject) {
		t.Errorf("envelope = %+v, want class bad_request, reason %s, message containing %q", env.Error, reason, reject)
	}
	if !resp.Close || resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != int64(len(body)) {
		t.Errorf("rejection headers = %v (close=%v, length %d for %d body bytes)", resp.Header, resp.Close, resp.ContentLength, len(body))
	}
}

func TestFramingGuardTunnels(t *testing.T) {
	junk := "POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n\x00\xff\n\n\r\r" + strings.Repeat("\x16\x03\x01", 3000)
	tests := []struct {
		name, head, status, junk string
		early                    bool // send the junk together with the head
	}{
		{name: "CONNECT then HTTP-looking junk", head: "CONNECT up.example:443 HTTP/1.1\r\nHost: up.example:443\r\n\r\n",
			status: "HTTP/1.1 200 ", junk: junk},
		{name: "CONNECT with binary junk at once", head: "CONNECT up.example:443 HTTP/1.1\r\nHost: up.example:443\r\n\r\n",
			status: "HTTP/1.1 200 ", junk: "\x16\x03\x01" + junk, early: true},
		{name: "Upgrade then HTTP-looking junk", head: "GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n",
			status: "HTTP/1.1 101 ", junk: junk},
		{name: "Upgrade with body then binary junk at once",
			head:   "POST /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: echo\r\nContent-Length: 2\r\n\r\nhi",
			status: "HTTP/1.1 101 ", junk: "\x82\x85" + junk, early: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := startFramingServer(t, FramingOptions{})
			c, br := dialFraming(t, srv.addr)
			send := tc.head
			if tc.early {
				send += tc.junk
			}
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
			var head strings.Builder
			for !strings.HasSuffix(head.String(), "\r\n\r\n") {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading tunnel response after %q: %v", head.String(), err)
				}
				head.WriteString(line)
			}
			if !strings.HasPrefix(head.String(), tc.status) {
				t.Fatalf("tunnel response = %q, want %q...", head.String(), tc.status)
			}
			if !tc.early {
				if _, err := io.WriteString(c, tc.junk); err != nil {
					t.Fatal(err)
				}
			}
			echo := make([]byte, len(tc.junk))
			if _, err := io.ReadFull(br, echo); err != nil {
				t.Fatalf("reading echo: %v", err)
			}
			if string(echo) != tc.junk {
				t.Errorf("echo differs from what was sent")
			}
			c.Close()
			srv.tunnels.Wait()
			if calls, rejects := srv.snapshot(); len(calls) != 1 || len(rejects) != 0 {
				t.Errorf("calls %q, rejects %v; want one call, no rejection", calls, rejects)
			}
		})
	}
}

// replayConn serves a fixed byte stream, at most chunk bytes per Read
// (0 = unlimited), and discards writes.
type replayConn struct {
	r     *bytes.Reader
	chunk int
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.chunk > 0 && len(p) > c.chunk {
		p = p[:c.chunk]
	}
	return c.r.Read(p)
}
func (c *replayConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *replayConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }

func TestFramingGuardReadError(t *testing.T) {
	tests := []struct {
		in      string
		wantOut string // all that passes; with wantErr, what passes is a prefix of it
		wantErr string // "" = clean EOF
	}{
		{in: "\r\n\r\n" + reqGET("/a"), wantOut: reqGET("/a")},
		{in: postBody + "\r\n" + reqGET("/b") + "G", wantOut: postBody + reqGET("/b")},
		{in: reqGET("/a") + clte, wantOut: reqGET("/a"), wantErr: "both Content-Length"},
		{in: "GET /a HTTP/1.1\r\nHost: " + strings.Repeat("h", 600) + "\r\n\r\n", wantErr: "exceeds 512 bytes"},
		{in: chunkedHead + "1\r\nx\r\n0\r\n" + strings.Repeat("X-T: 1\r\n", 70) + "\r\n",
			wantOut: chunkedHead + "1\r\nx\r\n0\r\n" + strings.Repeat("X-T: 1\r\n", 64), wantErr: "trailer section exceeds 512 bytes"},
		{in: chunkedHead + "1" + strings.Repeat(" ", 5000) + ";x\r\n", wantOut: chunkedHead, wantErr: "longer than 4096"},
		{in: chunkedHead + "1\r\nx\r\n0\r\n" + strings.Repeat("X-T: 1\r\n", 63) + "\r\n" + reqGET("/n"),
			wantOut: chunkedHead + "1\r\nx\r\n0\r\n" + strings.Repeat("X-T: 1\r\n", 63) + "\r\n" + reqGET("/n")},
	}
	for _, tc := range tests {
		g := NewFramingGuard(&replayConn{r: bytes.NewReader([]byte(tc.in)), chunk: 7}, FramingOptions{MaxHeaderBytes: 512})
		out, err := io.ReadAll(g)
		if string(out) != tc.wantOut && (tc.wantErr == "" || !strings.HasPrefix(tc.wantOut, string(out))) {
			t.Errorf("%.40q: passed %q, want %q", tc.in, out, tc.wantOut)
		}
		var oe *net.OpError
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%.40q: err = %v, want clean EOF", tc.in, err)
		case tc.wantErr != "" && (!errors.Is(err, ErrMalformedRequest) || !errors.As(err, &oe) || oe.Op != "read" ||
			!strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%.40q: err = %v, want a read *net.OpError wrapping ErrMalformedRequest with %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestRespSniffer(t *testing.T) {
	tests := []struct {
		written string
		connect bool
		want    sniffResult
	}{
		{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", false, sniffSwitched},
		{"HTTP/1.1 200 OK\r\n\r\n", false, sniffRefused},
		{"HTTP/1.1 200 Connection established\r\n\r\n", true, sniffSwitched},
		{"HTTP/1.0 204 No Content\r\n\r\n", true, sniffSwitched},
		{"HTTP/1.1 407 Proxy Authentication Required\r\n", true, sniffRefused},
		{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\n\r\n", false, sniffSwitched},
		{"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 403 Forbidden\r\n\r\n", true, sniffRefused},
		{"HTTP/1.1 100 Continue\r\n", false, sniffPending},
		{"HTTP/1.1 10", false, sniffPending},
		{"<html>HTTP/1.1 101 </html>", false, sniffRefused},
	}
	for _, tc := range tests {
		for _, step := range []int{1, 5, len(tc.written)} {
			s := respSniffer{active: true, connect: tc.connect}
			for w := []byte(tc.written); len(w) > 0; w = w[min(step, len(w)):] {
				s.feed(w[:min(step, len(w))])
			}
			if s.result != tc.want {
				t.Errorf("%q in writes of %d (connect=%v): result %d, want %d", tc.written, step, tc.connect, s.result, tc.want)
			}
		}
	}
}

func TestFramingGuardCloseWrite(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g := NewFramingGuard(a, FramingOptions{}).(*framingGuard)
	if err := g.CloseWrite(); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CloseWrite over net.Pipe = %v, want errors.ErrUnsupported", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := NewFramingGuard(s, FramingOptions{}).(*framingGuard).CloseWrite(); err != nil {
		t.Fatalf("CloseWrite over TCP: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // safety net only
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("peer read after CloseWrite = %d, %v; want EOF", n, err)
	}
}

func TestIsTchar(t *testing.T) {
	const want = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for c := 0; c < 256; c++ {
		if got := isTchar(byte(c)); got != strings.ContainsRune(want, rune(c)) || (c >= 0x80 && got) {
			t.Errorf("isTchar(%#x) = %v", c, got)
		}
	}
}

// FuzzFramingGuard checks that arbitrary client bytes never panic or hang the
// guard, that it buffers within its bound, and that wherever the guard ends a
// request, net/http's parser ends it at the same byte.
func FuzzFramingGuard(f *testing.F) {
	seeds := []string{reqGET("/a"), postBody + reqGET("/b"), chunked + chunked, clte, "\r\n" + postBody,
		"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n\x16\x03" + reqGET("/x"),
		"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: x\r\n\r\n" + postBody,
		"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n1;a\r\nx\r\n0\r\nT: 1\r\n\r\n" + reqGET("/t"),
		"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\nX: a\tb\r\n\r\n",
		"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i*37))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			checkGuardAgainstNetHTTP(t, data, int(chunk))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("guard hung on %q", data)
		}
	})
}

func checkGuardAgainstNetHTTP(t *testing.T, data []byte, chunk int) {
	g := NewFramingGuard(&replayConn{r: bytes.NewReader(data), chunk: 1 + chunk%61}, FramingOptions{MaxHeaderBytes: 256}).(*framingGuard)
	var ends []int64
	g.onMessageEnd = func(end int64) { ends = append(ends, end) }
	var out []byte
	p := make([]byte, 1+chunk%29)
	for i := 0; ; i++ {
		if i > 4*len(data)+16 {
			t.Errorf("guard makes no progress on %q", data)
			return
		}
		n, err := g.Read(p)
		out = append(out, p[:n]...)
		if cap(g.buf) > g.bufLimit {
			t.Fatalf("buffer grew to %d bytes, limit %d", cap(g.buf), g.bufLimit)
		}
		if err != nil {
			break
		}
	}
	if len(out) > len(data) {
		t.Fatalf("guard produced %d bytes from %d", len(out), len(data))
	}
	// Where does net/http end each request in the stream the guard passed?
	cr := &countReader{r: bytes.NewReader(out)}
	br := bufio.NewReader(cr)
	var goEnds []int64
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			break
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			break
		}
		goEnds = append(goEnds, cr.n-int64(br.Buffered()))
	}
	for i := 0; i < len(ends) && i < len(goEnds); i++ {
		if ends[i] != goEnds[i] {
			t.Fatalf("request %d: guard ends it at %d, net/http at %d; stream %q", i, ends[i], goEnds[i], out)
		}
	}
	if len(goEnds) > len(ends) && g.state != stRaw {
		t.Fatalf("net/http parsed %d requests, guard only ended %d; stream %q", len(goEnds), len(ends), out)
	}
	// Each request the guard delimited, parsed on its own, must not make
	// net/http read past its end (the guard ended it early) nor leave bytes
	// over (late). Other net/http errors are fine: it is stricter about URLs,
	// hosts and header values.
	prev := int64(0)
	for i, end := range ends {
		if end < prev || end > int64(len(out)) {
			t.Fatalf("request %d ends at %d after %d, stream length %d", i, end, prev, len(out))
		}
		seg := &segReader{b: out[prev:end]}
		br := bufio.NewReader(seg)
		req, err := http.ReadRequest(br)
		if err == nil {
			_, err = io.Copy(io.Discard, req.Body)
		}
		switch {
		case seg.past:
			t.Fatalf("guard ended request %d early: net/http wants more (%v); request %q", i, err, out[prev:end])
		case err == nil && br.Buffered()+len(seg.b) > 0:
			t.Fatalf("guard ended request %d late: %d bytes left over; request %q", i, br.Buffered()+len(seg.b), out[prev:end])
		}
		prev = end
	}
}

// segReader serves b and records whether anyone asked for more.
type segReader struct {
	b    []byte
	past bool
}

func (s *segReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		s.past = true
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	return n, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkFramingGuard compares bytes/s through the guard with a plain conn,
// reading like http.Server does (4 KiB bufio reads for heads, 32 KiB copies
// for a large body).
func BenchmarkFramingGuard(b *testing.B) {
	small := strings.Repeat("GET /v1/items?id=42 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: bench/1.0\r\nAccept: */*\r\n\r\n", 1000)
	payloads := []struct {
		name    string
		data    []byte
		readBuf int
	}{
		{"CL1MiB", []byte("POST /upload HTTP/1.1\r\nHost: h\r\nContent-Length: 1048576\r\n\r\n" + strings.Repeat("x", 1<<20)), 32 << 10},
		{"SmallGETs", []byte(small), 4 << 10},
	}
	for _, pl := range payloads {
		for _, guarded := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/guard=%v", pl.name, guarded), func(b *testing.B) {
				b.SetBytes(int64(len(pl.data)))
				b.ReportAllocs()
				buf := make([]byte, pl.readBuf)
				for b.Loop() {
					var c net.Conn = &replayConn{r: bytes.NewReader(pl.data)}
					if guarded {
						c = NewFramingGuard(c, FramingOptions{})
					}
					total := 0
					for {
						n, err := c.Read(buf)
						total += n
						if err != nil {
							break
						}
					}
					if total != len(pl.data) {
						b.Fatalf("read %d of %d bytes", total, len(pl.data))
					}
				}
			})
		}
	}
}

// TestAbsoluteForm: only a target that starts with a scheme is
// absolute-form; "://" later on (a URL in the query) is not.
func TestAbsoluteForm(t *testing.T) {
	for _, tc := range []struct {
		target, scheme string
		ok             bool
	}{
		{"https://api.example.com/x", "https", true},
		{"HTTP://api.example.com", "HTTP", true},
		{"git+ssh://h/x", "git+ssh", true},
		{"/v1/x?next=https://other.example/x", "", false},
		{"/a://b", "", false},
		{"*", "", false},
		{"api.example.com:443", "", false},
		{"1http://h/", "", false},
		{"ht tp://h/", "", false},
		{"://h/", "", false},
		{"?q=https://h/", "", false},
	} {
		scheme, _, ok := absoluteForm([]byte(tc.target))
		if ok != tc.ok || string(scheme) != tc.scheme {
			t.Errorf("absoluteForm(%q) = %q, %v; want %q, %v", tc.target, scheme, ok, tc.scheme, tc.ok)
		}
	}
}
