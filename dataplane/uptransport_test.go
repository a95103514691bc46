package dataplane

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPooledConnectionClosedByUpstream: a request on a pooled connection
// the upstream closed meanwhile still goes through: a GET is retried on a
// new connection, a POST finds the connection closed before it is sent.
func TestPooledConnectionClosedByUpstream(t *testing.T) {
	// The upstream answers one request per connection, keep-alive as far
	// as its headers say, then closes the connection a moment later
	// without a word: the pooled connection is stale by its next use.
	e, up := newRawEnv(t, nil, func(_ int64, c net.Conn, br *bufio.Reader) {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		time.Sleep(20 * time.Millisecond)
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	for i, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/items/1", ""},
		{"GET", "/v1/items/2", ""},  // stale, idle < 1 s: sent, fails, retried
		{"POST", "/v1/items", "{}"}, // stale: found by the peek, not sent on it
		{"GET", "/v1/items/3", ""},
	} {
		time.Sleep(100 * time.Millisecond) // the upstream has closed the last connection
		req, _ := http.NewRequest(tc.method, "https://api.example.com"+tc.path, strings.NewReader(tc.body))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("request %d (%s %s): %d %q, want 200 ok", i, tc.method, tc.path, resp.StatusCode, b)
		}
	}
	if n := up.conn.Load(); n != 4 {
		t.Errorf("upstream accepted %d connections, want 4 (one per request)", n)
	}
}

// TestPoolReusesConnections: sequential requests share one upstream
// connection (the pool is per authority, not per tunnel).
func TestPoolReusesConnections(t *testing.T) {
	var dials atomic.Int64
	e := newEnv(t, func(p *Proxy) {
		p.Guard.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
	})
	for client := 0; client < 3; client++ {
		c := e.client(t, url.UserPassword("s1", e.token))
		for i := 0; i < 5; i++ {
			resp, err := c.Get("https://api.example.com/v1/items/1")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		c.Transport.(*http.Transport).CloseIdleConnections() // a new tunnel each round
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d upstream dials for 15 requests over 3 tunnels, want 1", n)
	}
}
