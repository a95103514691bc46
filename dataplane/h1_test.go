package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// TestClientGoneCancelsUpstream: a client that leaves while its request
// waits on a slow upstream cancels the upstream exchange, and the outcome
// says client_gone, not a 200 nobody received.
func TestClientGoneCancelsUpstream(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	if _, err := io.WriteString(tc, "GET /v1/items/wait HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * clientWatchAfter)
	start := time.Now()
	_ = tc.Close()
	waitRecords(t, rec, audit.EventProxied, 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := rec.completed[0]
	if got.Reason != string(policy.ReasonClientGone) || got.Status != 0 {
		t.Errorf("outcome %s status %d, want client_gone and no status", got.Reason, got.Status)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the upstream exchange ran %v after the client left", d)
	}
}

// TestClientGoneMidAnswer: a client that leaves while the proxy waits on
// the rest of an answer (the upstream sent part of it, then paused) ended
// the exchange: the outcome says client_gone with the status it had
// received, never upstream_cut, over HTTP/1.1 and HTTP/2.
func TestClientGoneMidAnswer(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("h2 ", h2), func(t *testing.T) {
			rec := &listRecorder{}
			e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
			var body io.ReadCloser
			var leave func()
			if h2 {
				cc := e.h2Client(t)
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/v1/items/stall", nil)
				resp, err := cc.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				body, leave = resp.Body, cancel // RST_STREAM(CANCEL): the stream is gone, the connection stays
			} else {
				tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
				if _, err := io.WriteString(tc, "GET /v1/items/stall HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
				if err != nil {
					t.Fatal(err)
				}
				body, leave = resp.Body, func() { _ = tc.Close() }
			}
			if _, err := body.Read(make([]byte, 8)); err != nil {
				t.Fatalf("the start of the answer: %v", err)
			}
			time.Sleep(2 * clientWatchAfter) // the proxy is waiting on the upstream
			leave()
			waitRecords(t, rec, audit.EventProxied, 1)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if got := rec.completed[0]; got.Reason != string(policy.ReasonClientGone) || got.Status != http.StatusOK {
				t.Errorf("outcome %q status %d, want client_gone and 200: the client ended the exchange", got.Reason, got.Status)
			}
		})
	}
}

// TestExpectContinue: a refused request whose client waits for 100
// Continue is answered at once and its connection closed (the body it did
// not send is not waited for); an allowed one gets its 100 Continue, then
// its answer, and the connection stays open.
func TestExpectContinue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   string
		status int
		keep   bool
	}{
		{"refused", "/v1/other", http.StatusForbidden, false},
		{"allowed", "/v1/items", http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			conn := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
			br := bufio.NewReader(conn)
			head := "POST " + tc.path + " HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second)) // far below the 30 s body idle timeout
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the head: %v", err)
			}
			if tc.keep {
				if resp.StatusCode != http.StatusContinue {
					t.Fatalf("status %d, want 100 first", resp.StatusCode)
				}
				if _, err := io.WriteString(conn, "{}\r\n"); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != tc.status || resp.Close == tc.keep {
				t.Fatalf("status %d close %v, want %d close %v", resp.StatusCode, resp.Close, tc.status, !tc.keep)
			}
			if !tc.keep {
				if _, err := br.ReadByte(); err != io.EOF && !strings.Contains(err.Error(), "closed") {
					t.Errorf("after the refusal the connection gave %v, want it closed", err)
				}
			}
		})
	}
}

// TestEarlyAnswerToUploadArrives: an upstream that answers an upload
// before reading it (a 413 with a body) gets its whole answer to the
// client, which is still sending: the proxy shuts its side and drops the
// rest of the upload for a moment before closing, instead of closing with
// unread bytes, which resets the connection and throws away the part of
// the answer still in the proxy's send buffer.
func TestEarlyAnswerToUploadArrives(t *testing.T) {
	e, _ := newRawEnv(t, nil, func(_ int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil { // answered unread, then drained as servers do
			_, _ = io.WriteString(c, "HTTP/1.1 413 Too Large\r\nContent-Length: 4194304\r\nConnection: close\r\n\r\n"+strings.Repeat("!", 4<<20))
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, br)
		}
	})
	for i := range 5 {
		tc := tunnelTLS(t, e, "api.example.com")
		if _, err := io.WriteString(tc, "POST /v1/items HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 67108864\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { // a client that keeps sending until it has its answer
			defer close(done)
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for range 1024 {
				if _, err := tc.Write(chunk); err != nil {
					return
				}
			}
		}()
		time.Sleep(100 * time.Millisecond) // a client busy sending reads its answer a little later
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			t.Fatalf("round %d: the answer was lost: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 413 || len(b) != 4<<20 || err != nil {
			t.Fatalf("round %d: %d, %d bytes of the answer, %v", i, resp.StatusCode, len(b), err)
		}
		_ = tc.Close()
		<-done
	}
}

// TestEarlyAnswerOverH2: an upstream that answers an HTTP/2 stream's
// upload before reading it gets its answer to the client while the body
// still comes, stream after stream on one connection. (The body goroutine
// may read after the stream's handler returned; bodyClock.stop keeps such
// a read off the finished stream's writer, which would panic.)
func TestEarlyAnswerOverH2(t *testing.T) {
	e, _ := newRawEnv(t, nil, func(_ int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err == nil { // answered unread, then drained as servers do
			_, _ = io.WriteString(c, "HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!")
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = io.Copy(io.Discard, br)
		}
	})
	cc := e.h2Client(t)
	for i := range 5 {
		pr, pw := io.Pipe()
		go func() { // a body that keeps coming for a while after the answer
			chunk := bytes.Repeat([]byte("x"), 16<<10)
			for range 64 {
				if _, err := pw.Write(chunk); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
			_ = pw.Close()
		}()
		req, _ := http.NewRequest("POST", "https://api.example.com/v1/items", pr)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || string(b) != "big!" {
			t.Fatalf("round %d: %d %q", i, resp.StatusCode, b)
		}
		_ = pr.CloseWithError(errors.New("done"))
	}
}
