package dataplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// Finding 6: an Expect: 100-continue request refused before its body is
// asked for waits for a body that never comes: commit sets continued
// before settle checks it, so settle reads for BodyIdle instead of closing.
func TestAttackExpectRefusalWaitsForBody(t *testing.T) {
	e := newEnv(t, func(p *Proxy) { p.Timeouts.BodyIdle = 3 * time.Second })
	tc := tunnelTLS(t, e, "api.example.com")
	start := time.Now()
	io.WriteString(tc, "POST /v1/nomatch HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("status %d after %v, Connection: %q", resp.StatusCode, took, resp.Header.Get("Connection"))
	if took > time.Second {
		t.Fatalf("the refusal waited %v for a body the proxy never asked for", took)
	}
}

// Finding 7: the stale-connection retry never fires for an answer that
// never came (http.ReadResponse turns io.EOF into io.ErrUnexpectedEOF), so
// an idempotent GET on a pooled connection the upstream dropped is a 502.
func TestAttackStaleGETNotRetried(t *testing.T) {
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if n == 1 && i == 1 {
				return // the upstream's idle timeout fired as the request arrived
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	for i := range 2 {
		resp, err := c.Get("https://api.example.com/v1/items/1")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %d on a pooled connection the upstream had dropped: %d", i, resp.StatusCode)
		}
	}
}

// Observation: a client that leaves while its request waits for the
// upstream's head no longer cancels the exchange (the request context is
// the tunnel's, ended only at shutdown).
func TestAttackClientGoneKeepsExchange(t *testing.T) {
	closedAfter := make(chan time.Duration, 1)
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		start := time.Now()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, _ = br.ReadByte() // returns when the proxy closes the connection
		closedAfter <- time.Since(start)
	})
	tc := tunnelTLS(t, e, "api.example.com")
	io.WriteString(tc, "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	tc.Close()
	if d := <-closedAfter; d > time.Second {
		t.Fatalf("the upstream exchange outlived its client by %v", d)
	}
}
