package dataplane

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// A refused request whose unread body is itself a request: the body is
// discarded, and only the next real request is decided.
func TestResistsRefusedBodySmuggle(t *testing.T) {
	e := newEnv(t, nil)
	inner := "DELETE /v1/items/9 HTTP/1.1\r\nHost: api.example.com\r\n\r\n"
	for _, first := range []string{
		"POST /v1/nomatch HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: " + itoa(len(inner)) + "\r\n\r\n" + inner,
		"POST /v1/nomatch HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\n\r\n" + hexlen(inner) + "\r\n" + inner + "\r\n0\r\n\r\n",
		"POST /v1/nomatch HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nContent-Length: " + itoa(len(inner)) + "\r\n\r\n" + inner,
	} {
		tc := tunnelTLS(t, e, "api.example.com")
		br := bufio.NewReader(tc)
		before := e.hits.Load()
		io.WriteString(tc, first+"GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
		var codes []int
		for len(codes) < 2 { // the refusal, then the GET's answer unless the refusal closed the connection
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				break
			}
			io.Copy(io.Discard, resp.Body)
			codes = append(codes, resp.StatusCode)
			if resp.Close {
				break
			}
		}
		if len(codes) == 0 || codes[0] != http.StatusForbidden {
			t.Fatalf("answers %v, want a 403 first", codes)
		}
		t.Logf("%q...: answers %v, upstream hits %d", first[:40], codes, e.hits.Load()-before)
		if e.hits.Load()-before > 1 {
			t.Fatal("smuggled body reached the upstream")
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
func hexlen(s string) string {
	const d = "0123456789abcdef"
	n, out := len(s), ""
	for ; n > 0; n /= 16 {
		out = string(d[n%16]) + out
	}
	return out
}

// A credential with CR/LF is refused, not sent.
func TestResistsCRLFCredential(t *testing.T) {
	e := newEnv(t, func(p *Proxy) { p.Injector = &fixedInjector{token: "abc\r\nX-Evil: 1"} })
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Get("https://api.example.com/v1/items/1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("status %d %s hits %d", resp.StatusCode, b, e.hits.Load())
	if e.hits.Load() != 0 || strings.Contains(string(b), "abc") {
		t.Fatal("sent or leaked")
	}
}

// HEAD, 204, 304 and an early answer while the body streams keep the
// pool in step.
func TestResistsPoolFraming(t *testing.T) {
	var conns atomic.Int64
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		conns.Add(1)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			switch {
			case req.Method == "HEAD":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n")
			case req.URL.Path == "/v1/items/204":
				io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
			case req.URL.Path == "/v1/items/304":
				io.WriteString(c, "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n")
			case req.Method == "POST": // answers before reading the body
				io.WriteString(c, "HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\n\r\nbig!")
				time.Sleep(50 * time.Millisecond)
				io.Copy(io.Discard, req.Body)
			default:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n"+req.URL.Path[len(req.URL.Path)-6:])
			}
		}
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	do := func(m, p string, body io.Reader) string {
		req, _ := http.NewRequest(m, "https://api.example.com"+p, body)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.Status + ":" + string(b)
	}
	t.Log(do("HEAD", "/v1/items/aaaaaa", nil))
	t.Log(do("GET", "/v1/items/bbbbbb", nil))
	t.Log(do("GET", "/v1/items/204", nil))
	t.Log(do("GET", "/v1/items/cccccc", nil))
	t.Log(do("GET", "/v1/items/304", nil))
	t.Log(do("GET", "/v1/items/dddddd", nil))
	t.Log(do("POST", "/v1/items", io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<20)))))
	if got := do("GET", "/v1/items/eeeeee", nil); !strings.HasSuffix(got, "eeeeee") {
		t.Fatalf("desync: %s", got)
	}
	t.Logf("upstream connections: %d", conns.Load())
}
