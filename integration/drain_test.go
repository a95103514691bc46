package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// exitWait bounds how long a daemon may take to exit after SIGTERM once its
// drain is over (or its shutdown_timeout has run out). A hang guard only.
const exitWait = 60 * time.Second

// TestSIGTERMDrainsInFlightRequests: on SIGTERM the daemon stops accepting
// proxy connections at once, lets an in-flight stream run to its end, and
// then exits 0 by itself; with a short proxy.shutdown_timeout a stream that
// never ends does not keep the daemon alive, and its client sees the
// connection cut (not a clean end of body).
func TestSIGTERMDrainsInFlightRequests(t *testing.T) {
	t.Run("stream_completes_then_exit_0", func(t *testing.T) {
		d := drainDaemon(t, "20s")
		d.logOnFailure(t)
		t.Cleanup(func() {
			if err := d.stop(); err != nil {
				t.Errorf("daemon did not exit cleanly: %v", err)
			}
		})
		const n = 5
		st := openGatedStream(t, d, n)
		sigterm(t, d)

		how := waitProxyRefuses(t, d.ProxyAddr, 30*time.Second)
		t.Logf("after SIGTERM a new proxy connection was %s", how)

		for k := 1; k < n; k++ {
			st.release(t, k)
			if err := nextEvent(st.br, st.body, fmt.Sprintf("event %d", k)); err != nil {
				t.Fatalf("in-flight stream after SIGTERM, event %d: %v (daemon exited: %v)", k, err, d.exited())
			}
		}
		rest, err := readRest(st)
		if err != nil {
			t.Fatalf("in-flight stream after SIGTERM did not end cleanly after the last event: %v (trailing bytes %q)", err, rest)
		}
		if len(rest) != 0 {
			t.Errorf("bytes after the last event: %q", rest)
		}

		select {
		case <-d.done:
		case <-time.After(exitWait):
			t.Fatalf("daemon still running %s after its only in-flight stream ended (shutdown_timeout 20s)", exitWait)
		}
		if d.waitErr != nil {
			t.Errorf("daemon exit after a complete drain: %v, want status 0", d.waitErr)
		}
	})

	t.Run("bounded_drain_cuts_stuck_stream", func(t *testing.T) {
		d := drainDaemon(t, "1s")
		d.logOnFailure(t)
		// The exit status of a drain cut short is checked below, not by
		// startTestDaemon's clean-exit rule; stop() only reaps the process.
		t.Cleanup(func() { _ = d.stop() })
		st := openGatedStream(t, d, 3) // events 1 and 2 are never released
		sigterm(t, d)

		select {
		case <-d.done:
		case <-time.After(exitWait):
			t.Fatalf("daemon still running %s after SIGTERM with proxy.shutdown_timeout 1s and a stuck stream", exitWait)
		}
		var ee *exec.ExitError
		switch {
		case d.waitErr == nil:
			t.Logf("daemon exited 0 after cutting the stuck stream")
		case errors.As(d.waitErr, &ee) && ee.Exited():
			t.Logf("daemon exited with status %d after cutting the stuck stream", ee.ExitCode())
		default:
			t.Errorf("daemon did not exit by itself after the drain timeout: %v", d.waitErr)
		}

		rest, err := readRest(st)
		if err == nil {
			t.Errorf("the stuck stream ended with a clean end of body (%q): a cut stream must look truncated to its client", rest)
		} else {
			t.Logf("client saw its stream cut: %v", err)
		}
	})
}

// drainDaemon starts a daemon with the given proxy.shutdown_timeout and the
// stream connector installed. It is registered with the suite (so it is
// reaped at the end) but its exit status is left to the caller.
func drainDaemon(t *testing.T, shutdownTimeout string) *daemon {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["proxy"].(map[string]any)["shutdown_timeout"] = shutdownTimeout
	d, err := theSuite.startDaemon(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.install(t, mustSpec(t, "stream"))
	return d
}

// sigterm sends SIGTERM to the PID the daemon published in daemon.json.
func sigterm(t *testing.T, d *daemon) {
	t.Helper()
	if d.PID != d.cmd.Process.Pid {
		t.Fatalf("daemon.json pid %d is not the started process %d", d.PID, d.cmd.Process.Pid)
	}
	if err := syscall.Kill(d.PID, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM pid %d: %v", d.PID, err)
	}
}

// gatedStream is an SSE response through the proxy whose events the test
// releases one by one.
type gatedStream struct {
	gate chan struct{}
	body io.ReadCloser
	br   *bufio.Reader
}

// release lets the upstream write event k.
func (st *gatedStream) release(t *testing.T, k int) {
	t.Helper()
	select {
	case st.gate <- struct{}{}:
	case <-time.After(eventWait):
		t.Fatalf("the upstream SSE handler never got to event %d (its request was dropped?)", k)
	}
}

// openGatedStream starts GET /sse?n=n through a fresh session of d,
// releases event 0 and reads it: the request is then in flight in the
// daemon.
func openGatedStream(t *testing.T, d *daemon, n int) *gatedStream {
	t.Helper()
	s := d.newSession(t, "--name", "drain")
	gateID := "drain-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := &gatedStream{gate: theSuite.up.Gate(gateID)}
	c := goClient(t, s)
	c.Timeout = 0 // long-lived; eventWait and exitWait bound each step
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://stream.example.com/sse?n=%d&gate=%s", n, gateID), nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		resp *http.Response
		err  error
	}
	respCh := make(chan result, 1)
	go func() {
		resp, err := c.Do(req)
		respCh <- result{resp, err}
	}()
	// The upstream flushes the headers before waiting for event 0, so the
	// response may arrive before or after the release.
	var r result
	got := false
	timeout := time.After(eventWait)
	for released := false; !released; {
		select {
		case st.gate <- struct{}{}:
			released = true
		case r = <-respCh:
			got = true
			if r.err != nil {
				t.Fatalf("GET /sse through the proxy: %v", r.err)
			}
			respCh = nil
		case <-timeout:
			t.Fatalf("GET /sse never reached the upstream's SSE handler (response: %v)", got)
		}
	}
	if !got {
		select {
		case r = <-respCh:
		case <-time.After(eventWait):
			t.Fatalf("no response headers within %s after the upstream sent event 0", eventWait)
		}
	}
	if r.err != nil {
		t.Fatalf("GET /sse through the proxy: %v", r.err)
	}
	t.Cleanup(func() { _ = r.resp.Body.Close() })
	if r.resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(r.resp.Body)
		t.Fatalf("GET /sse: %d %s", r.resp.StatusCode, trunc(b))
	}
	st.body, st.br = r.resp.Body, bufio.NewReader(r.resp.Body)
	if err := nextEvent(st.br, st.body, "event 0"); err != nil {
		t.Fatalf("event 0: %v", err)
	}
	return st
}

// readRest reads the stream to its end (bounded by eventWait, after which
// the body is closed) and returns what was left and the read error.
func readRest(st *gatedStream) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := io.ReadAll(st.br)
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(eventWait):
		_ = st.body.Close()
		r := <-ch
		return r.b, fmt.Errorf("no end of body within %s (then closed by the test): %v", eventWait, r.err)
	}
}

// waitProxyRefuses dials addr until a new connection is refused, or is
// accepted but closed without an answer to a CONNECT, and says which. A
// connection that still gets an HTTP answer means the listener is still
// serving; after limit that fails t.
func waitProxyRefuses(t *testing.T, addr string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "never dialled"
	for {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "refused at dial (" + err.Error() + ")"
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		const authority = "stream.example.com:443"
		_, werr := io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n")
		var resp *http.Response
		if werr == nil {
			resp, werr = http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		}
		_ = c.Close()
		var ne net.Error
		switch {
		case werr != nil && !(errors.As(werr, &ne) && ne.Timeout()):
			return "accepted then closed (" + werr.Error() + ")"
		case werr != nil:
			last = "accepted but unanswered for 2s"
		default:
			last = "answered " + resp.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after SIGTERM the proxy still takes new connections: last one %s", limit, last)
		}
		<-tick.C
	}
}
