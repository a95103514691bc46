package dataplane

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// TestBodyClock runs a real server whose handler reads the body through a
// bodyClock (idle 300 ms, 100 B/s) and reports what the read ended with
// and whether the request context survived a pause after the body.
func TestBodyClock(t *testing.T) {
	p := &Proxy{t: Timeouts{BodyIdle: 300 * time.Millisecond, BodyMinRate: 100}.withDefaults()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clock := p.clockBody(w, r)
		n, err := io.Copy(io.Discard, r.Body)
		var se *stalledError
		switch {
		case errors.As(err, &se) && clock.stalled() == se:
			fmt.Fprintf(w, "stalled %d", n)
		case err != nil:
			fmt.Fprintf(w, "error %v", err)
		default:
			time.Sleep(500 * time.Millisecond) // longer than idle: the deadline must be gone
			fmt.Fprintf(w, "ok %d ctx=%v stalled=%v", n, r.Context().Err(), clock.stalled() != nil)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		parts []string
		pause time.Duration
		want  string
	}{
		{"whole body", []string{"hello"}, 0, "ok 5 ctx=<nil> stalled=false"},
		// 4 bytes every 50 ms: each part comes about 230 ms before the
		// clock's deadline, so a loaded machine's late wake-up is not a
		// stall (at 100 ms pauses the margin was 80 ms).
		{"steady", []string{"aaaa", "bbbb", "cccc"}, 50 * time.Millisecond, "ok 12 ctx=<nil> stalled=false"},
		{"stops mid-way", []string{"abc"}, 0, "stalled 3"},
		{"trickles below the rate", []string{"a", "b", "c", "d", "e", "f", "g", "h"}, 200 * time.Millisecond, "stalled "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			total := 0
			for _, p := range tc.parts {
				total += len(p)
			}
			if strings.HasPrefix(tc.want, "stalled") {
				total += 100 // announce more than is sent
			}
			fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n", total)
			go func() {
				for _, p := range tc.parts {
					time.Sleep(tc.pause)
					if _, err := io.WriteString(c, p); err != nil {
						return
					}
				}
			}()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if !strings.HasPrefix(string(b), tc.want) {
				t.Fatalf("handler saw %q, want %q", b, tc.want)
			}
		})
	}
}

func TestBodyClockDeadline(t *testing.T) {
	now := time.Unix(1000, 0)
	b := &bodyClock{idle: time.Second, rate: 100}
	if got, byRate := b.deadline(now); !got.Equal(now.Add(time.Second)) || byRate {
		t.Errorf("first deadline %v (by rate %v), want now+1s", got.Sub(now), byRate)
	}
	b.n.Store(1000) // 10 s worth at 100 B/s, after waiting 5 s on the client
	b.waited.Store(int64(5 * time.Second))
	if got, byRate := b.deadline(now); !got.Equal(now.Add(time.Second)) || byRate {
		t.Errorf("ahead of the rate: deadline now+%v (by rate %v), want now+idle", got.Sub(now), byRate)
	}
	b.n.Store(100) // 1 s worth, after waiting 1.5 s
	b.waited.Store(int64(1500 * time.Millisecond))
	if got, byRate := b.deadline(now); !got.Equal(now.Add(500*time.Millisecond)) || !byRate {
		t.Errorf("behind the rate: deadline now+%v (by rate %v), want idle+n/rate-waited = 0.5s", got.Sub(now), byRate)
	}
	b.rate = 0
	if got, _ := b.deadline(now); !got.Equal(now.Add(time.Second)) {
		t.Errorf("no rate: deadline now+%v, want now+idle", got.Sub(now))
	}
	slow := (&stalledError{got: 400, idle: time.Second, rate: 1000, byRate: true, took: 4 * time.Second}).Error()
	paused := (&stalledError{got: 3, idle: time.Second}).Error()
	if !strings.Contains(slow, "400 bytes in 4s (100 bytes a second)") || !strings.Contains(slow, "proxy.body_min_rate") ||
		!strings.Contains(paused, "no byte came for 1s (proxy.body_idle_timeout) after 3 bytes") {
		t.Errorf("messages do not say what happened and what to change:\n%s\n%s", slow, paused)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestClientThatStopsReadingIsCut: a client that reads the head of a large
// answer and then nothing is cut after BodyIdle, not held for as long as
// it likes.
func TestClientThatStopsReadingIsCut(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Timeouts.BodyIdle = 300 * time.Millisecond; p.Recorder = rec })
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(tc, "GET /v1/items/large HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReaderSize(tc, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	time.Sleep(2 * time.Second) // stop reading
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= 64<<20 {
		t.Fatalf("read %d bytes (%v) after pausing: the proxy kept the answer waiting for a client that stopped reading", n, err)
	}
	waitRecords(t, rec, audit.EventProxied, 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got := rec.completed[0].Reason; got != string(policy.ReasonClientGone) {
		t.Errorf("outcome reason %q, want client_gone: the client, not the upstream, stopped the answer", got)
	}
}

// TestProxyPortBoundsUnreadBodies: a plain-HTTP request to the proxy port,
// refused without its body being read (here before it is even
// authenticated), whose body then stalls, is answered and closed within
// ReadHeader + BodyIdle rather than held while net/http waits for the rest.
func TestProxyPortBoundsUnreadBodies(t *testing.T) {
	e := newEnv(t, func(p *Proxy) {
		p.Timeouts.ReadHeader, p.Timeouts.BodyIdle = 500*time.Millisecond, 300*time.Millisecond
	})
	c, err := net.Dial("tcp", e.proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "POST http://x.example/ HTTP/1.1\r\nHost: x.example\r\nContent-Length: 100000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer while the body stalls: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if n, err := br.Read(make([]byte, 1)); n > 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("after the answer the connection stayed open (%d, %v)", n, err)
	}
}

// TestBodyClockCountsOnlyTheClient: a body the client sent at once, read
// slowly by the proxy's side (an upstream applying backpressure), is not
// taken for a slow client.
func TestBodyClockCountsOnlyTheClient(t *testing.T) {
	p := &Proxy{t: Timeouts{BodyIdle: 300 * time.Millisecond, BodyMinRate: 100}.withDefaults()}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.clockBody(w, r)
		buf := make([]byte, 1)
		n := 0
		for {
			time.Sleep(100 * time.Millisecond) // 10 B/s, far under the minimum
			m, err := r.Body.Read(buf)
			n += m
			if err != nil {
				fmt.Fprintf(w, "%d %v", n, err)
				return
			}
		}
	}))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "16 EOF" {
		t.Errorf("handler read %q, want the whole body: the proxy's slowness was blamed on the client", b)
	}
}
