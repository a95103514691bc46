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
		{"steady", []string{"aaaa", "bbbb", "cccc"}, 100 * time.Millisecond, "ok 12 ctx=<nil> stalled=false"},
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
	start := time.Unix(1000, 0)
	b := &bodyClock{idle: time.Second, rate: 100}
	b.start.Store(start.UnixNano())
	if got, byRate := b.deadline(start); !got.Equal(start.Add(time.Second)) || byRate {
		t.Errorf("first deadline %v (by rate %v), want start+1s", got, byRate)
	}
	b.n.Store(1000) // 10 s worth at 100 B/s
	if got, byRate := b.deadline(start.Add(5 * time.Second)); !got.Equal(start.Add(6*time.Second)) || byRate {
		t.Errorf("ahead of the rate: deadline %v (by rate %v), want now+idle", got.Sub(start), byRate)
	}
	b.n.Store(100) // 1 s worth
	if got, byRate := b.deadline(start.Add(1500 * time.Millisecond)); !got.Equal(start.Add(2*time.Second)) || !byRate {
		t.Errorf("behind the rate: deadline %v (by rate %v), want start+idle+n/rate = 2s", got.Sub(start), byRate)
	}
	b.rate = 0
	if got, _ := b.deadline(start.Add(time.Hour)); !got.Equal(start.Add(time.Hour + time.Second)) {
		t.Errorf("no rate: deadline %v, want now+idle", got.Sub(start))
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
	e := newEnv(t, func(p *Proxy) { p.Timeouts.BodyIdle = 300 * time.Millisecond })
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
}
