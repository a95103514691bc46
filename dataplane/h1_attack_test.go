package dataplane

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// rawUp is a scripted TLS upstream for api.example.com: handle gets each
// accepted connection (n counts from 1).
type rawUp struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	cs   []net.Conn
	conn atomic.Int64
}

func newRawEnv(t *testing.T, tune func(*Proxy), handle func(n int64, c net.Conn, br *bufio.Reader)) (*env, *rawUp) {
	t.Helper()
	upCA, err := ca.New(ca.Options{CommonName: "raw upstream root"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	ru := &rawUp{ln: tls.NewListener(tl, &tls.Config{NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf("api.example.com") }})}
	ru.wg.Add(1)
	go func() {
		defer ru.wg.Done()
		for {
			c, err := ru.ln.Accept()
			if err != nil {
				return
			}
			ru.mu.Lock()
			ru.cs = append(ru.cs, c)
			ru.mu.Unlock()
			n := ru.conn.Add(1)
			ru.wg.Add(1)
			go func() {
				defer ru.wg.Done()
				defer c.Close()
				handle(n, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ru.ln.Close()
		ru.mu.Lock()
		for _, c := range ru.cs {
			_ = c.Close()
		}
		ru.mu.Unlock()
		ru.wg.Wait()
	})
	e := newEnv(t, func(p *Proxy) {
		p.RootCAs.AddCert(upCA.Certificate())
		p.Guard.Resolve["api.example.com:443"] = netip.MustParseAddrPort(tl.Addr().String())
		if tune != nil {
			tune(p)
		}
	})
	return e, ru
}

// TestBodilessPOSTNotResent: a POST without a body, fully sent on a reused
// upstream connection that then closes without an answer, is not sent a
// second time: only GET, HEAD, OPTIONS and TRACE are retried.
func TestBodilessPOSTNotResent(t *testing.T) {
	var posts atomic.Int64
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		for i := 0; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if req.Method == "POST" {
				posts.Add(1)
			}
			if n == 1 && i == 1 {
				return // processed the request (side effect done), then crashed: no answer
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	for i := range 2 {
		req, _ := http.NewRequest("POST", "https://api.example.com/v1/items", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Logf("request %d: status %d", i, resp.StatusCode)
	}
	if got := posts.Load(); got != 2 {
		t.Fatalf("the client sent 2 POSTs, each decided and audited once; the upstream received %d", got)
	}
}

// TestUnaskedSwitchRefused: an upstream answering 101 to a request that
// asked for no upgrade does not turn the tunnel into a raw pipe: the
// client's next requests are still decided, and refused ones never reach
// the upstream.
func TestUnaskedSwitchRefused(t *testing.T) {
	seen := make(chan string, 4)
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		seen <- req.Method + " " + req.URL.Path
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\n\r\n")
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			seen <- req.Method + " " + req.URL.Path
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	tc := tunnelTLS(t, e, "api.example.com")
	br := bufio.NewReader(tc)
	io.WriteString(tc, "GET /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first answer: %d", resp.StatusCode)
	if resp.StatusCode != 101 {
		return // refused: the unasked switch did not happen
	}
	// Policy denies these: no operation matches GET /admin; DELETE needs approval.
	io.WriteString(tc, "GET /admin/secrets HTTP/1.1\r\nHost: api.example.com\r\n\r\nDELETE /v1/items/1 HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		resp.Body.Close()
	}
	close(seen)
	var got []string
	for s := range seen {
		got = append(got, s)
	}
	if len(got) > 1 {
		t.Fatalf("upstream received requests policy never decided: %q", got)
	}
}

// TestResponseHeadBounded: an upstream answer's head is read up to
// maxResponseHead, so one allowed upstream cannot make the daemon buffer
// whatever it sends.
func TestResponseHeadBounded(t *testing.T) {
	const junk = 256 << 20
	e, _ := newRawEnv(t, nil, func(n int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: ")
		buf := []byte(strings.Repeat("a", 64<<10))
		for sent := 0; sent < junk; sent += len(buf) {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "\r\nContent-Length: 0\r\n\r\n")
	})
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
		}
	}()
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Get("https://api.example.com/v1/items/1")
	if err == nil {
		t.Logf("status %d", resp.StatusCode)
		resp.Body.Close()
	}
	close(stop)
	wg.Wait()
	t.Logf("peak heap %d MiB", peak.Load()>>20)
	if peak.Load() > 64<<20 {
		t.Fatalf("the proxy buffered an upstream response head of %d MiB (peak heap %d MiB)", junk>>20, peak.Load()>>20)
	}
}

var _ = fmt.Sprint

const wsSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/ws", "version": "1.0.0"},
  "tools": [{"name": "ws", "operations": [
    {"name": "ws.open", "method": "GET", "path": "/v1/ws", "hosts": ["api.example.com"], "websocket": true}
  ]}]
}`

func wsPolicy(t *testing.T) *policy.Policy {
	spec, err := policy.ParseSpec("ws.json", []byte(wsSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "w", Origin: "ws.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return pol
}

// TestUpgradeWithBodyRefused: a WebSocket opening that carries a body is
// refused (upgrade_refused) before anything is sent: its body and the
// frames after a switch would share the tunnel's reader and the upstream
// connection.
func TestUpgradeWithBodyRefused(t *testing.T) {
	e, ru := newRawEnv(t, func(p *Proxy) { p.Policy.Store(wsPolicy(t)) }, func(n int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_, _ = io.Copy(io.Discard, br)
	})
	tc := tunnelTLS(t, e, "api.example.com")
	br := bufio.NewReader(tc)
	const size = 4 << 20
	io.WriteString(tc, fmt.Sprintf("GET /v1/ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: %d\r\n\r\n", size))
	go func() {
		buf := make([]byte, 1000)
		for sent := 0; sent < size; sent += len(buf) {
			if _, err := tc.Write(buf); err != nil {
				return
			}
		}
	}()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readEnvelope(t, resp.Body); resp.StatusCode != http.StatusForbidden || got.Reason != policy.ReasonUpgradeRefused {
		t.Fatalf("%d %+v, want 403 upgrade_refused", resp.StatusCode, got)
	}
	if n := ru.conn.Load(); n != 0 {
		t.Errorf("the upstream was dialled %d times for a refused opening", n)
	}
}

// TestSilentWebSocketReaped: a WebSocket silent for TunnelIdle is closed
// on the upstream side too, so it holds no goroutine or descriptor.
func TestSilentWebSocketReaped(t *testing.T) {
	upClosed := make(chan time.Time, 1)
	e, _ := newRawEnv(t, func(p *Proxy) {
		p.Timeouts.TunnelIdle = 300 * time.Millisecond
		p.Policy.Store(wsPolicy(t))
	}, func(n int64, c net.Conn, br *bufio.Reader) {
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_, _ = br.ReadByte() // silent; returns when the proxy closes
		upClosed <- time.Now()
	})
	tc := tunnelTLS(t, e, "api.example.com")
	br := bufio.NewReader(tc)
	io.WriteString(tc, "GET /v1/ws HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	start := time.Now()
	select {
	case at := <-upClosed:
		t.Logf("upstream side closed after %v", at.Sub(start))
	case <-time.After(3 * time.Second):
		t.Fatalf("a WebSocket silent for 10x TunnelIdle (%v) is still open on both sides", 300*time.Millisecond)
	}
}
