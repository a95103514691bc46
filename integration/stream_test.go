package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// eventWait bounds how long one SSE event may take to appear. It is a hang
// detector, not a speed assertion.
const eventWait = 30 * time.Second

// TestSSEEventsArriveOneAtATime proves the proxy adds no buffering: the
// upstream writes event k+1 only after the test has received event k.
func TestSSEEventsArriveOneAtATime(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "sse")
	const n = 5
	gateID := "sse-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	gate := theSuite.up.Gate(gateID)

	type result struct {
		resp *http.Response
		err  error
	}
	respCh := make(chan result, 1)
	c := goClient(t, s)
	c.Timeout = 0 // the stream is long-lived; eventWait bounds each step
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://stream.example.com/sse?n=%d&gate=%s", n, gateID), nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		resp, err := c.Do(req)
		respCh <- result{resp, err}
	}()

	var br *bufio.Reader
	var body io.Closer
	defer func() {
		if body != nil {
			_ = body.Close()
		}
	}()
	for k := range n {
		select {
		case gate <- struct{}{}:
		case <-time.After(eventWait):
			if k == 0 {
				select {
				case r := <-respCh:
					t.Fatalf("the request never reached the upstream's SSE handler: %v %s", r.err, statusOf(r.resp))
				default:
				}
			}
			t.Fatalf("the upstream handler never got to event %d", k)
		}
		if k == 0 {
			var r result
			select {
			case r = <-respCh:
			case <-time.After(eventWait):
				t.Fatalf("no response headers within %s after the upstream sent them with event 0", eventWait)
			}
			if r.err != nil {
				t.Fatalf("GET /sse through the proxy: %v", r.err)
			}
			if r.resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(r.resp.Body)
				t.Fatalf("GET /sse: %d %s", r.resp.StatusCode, trunc(b))
			}
			if ct := r.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
				t.Errorf("Content-Type %q, want text/event-stream", ct)
			}
			body, br = r.resp.Body, bufio.NewReader(r.resp.Body)
		}
		if err := nextEvent(br, body, fmt.Sprintf("event %d", k)); err != nil {
			t.Fatalf("event %d: %v", k, err)
		}
	}
}

// nextEvent reads one SSE event and checks its data. If none arrives within
// eventWait it closes body and reports that the proxy buffers the stream.
func nextEvent(br *bufio.Reader, body io.Closer, want string) error {
	type ev struct {
		data string
		err  error
	}
	ch := make(chan ev, 1)
	go func() {
		d, err := readSSEEvent(br)
		ch <- ev{d, err}
	}()
	select {
	case e := <-ch:
		if e.err != nil {
			return fmt.Errorf("read: %w", e.err)
		}
		if e.data != want {
			return fmt.Errorf("got SSE data %q, want %q", e.data, want)
		}
		return nil
	case <-time.After(eventWait):
		_ = body.Close()
		<-ch
		return fmt.Errorf("sent by the upstream but not delivered while the upstream held back the next one: the proxy buffers the stream")
	}
}

func statusOf(r *http.Response) string {
	if r == nil {
		return "(no response)"
	}
	return r.Status
}

// TestLargeBodies moves 512 MiB each way through the proxy (64 MiB with
// -short) and checks the hashes and the daemon's peak RSS, which stays far
// under one body's size. (`make bench` streams 1 GiB.)
func TestLargeBodies(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "large")
	size := int64(512 << 20)
	if testing.Short() {
		size = 64 << 20
	}
	t.Run("download_curl", func(t *testing.T) {
		id := "dl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		url := fmt.Sprintf("https://stream.example.com/large?n=%d&id=%s", size, id)
		out, errOut, err := runWithEnv(t, s, "bash", "-c",
			`set -o pipefail; curl -sS --fail --max-time 900 "$1" | sha256sum`, "bash", url)
		if err != nil {
			t.Fatalf("curl | sha256sum: %v\n%s\n%s", err, out, errOut)
		}
		got := strings.Fields(out)
		want := theSuite.up.SentSHA(id)
		if want == "" {
			t.Fatalf("the upstream did not finish sending %d bytes", size)
		}
		if len(got) == 0 || got[0] != want {
			t.Errorf("downloaded sha256 %q, upstream sent %s", out, want)
		}
	})
	t.Run("upload_go", func(t *testing.T) {
		c := goClient(t, s)
		c.Timeout = 15 * time.Minute
		hr := &hashingReader{r: newPatternReader(size), h: sha256.New()}
		req, err := http.NewRequest(http.MethodPut, "https://stream.example.com/upload", hr)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = size
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("PUT %d bytes through the proxy: %v", size, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("upload: %d %s", resp.StatusCode, trunc(raw))
		}
		var got struct {
			BodyLen    int64  `json:"body_len"`
			BodySHA256 string `json:"body_sha256"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatalf("upload answer %s: %v", trunc(raw), err)
		}
		if sent := hex.EncodeToString(hr.h.Sum(nil)); got.BodyLen != size || got.BodySHA256 != sent {
			t.Errorf("upstream received %d bytes sha256 %s; sent %d bytes sha256 %s", got.BodyLen, got.BodySHA256, hr.n, sent)
		}
	})
	t.Run("daemon_peak_rss", func(t *testing.T) {
		const limit = 200 << 20
		hwm := vmHWM(t, d.PID)
		t.Logf("daemon VmHWM after moving %d MiB each way: %d MiB", size>>20, hwm>>20)
		if hwm > limit {
			t.Errorf("daemon peak RSS %d MiB exceeds %d MiB: bodies are not streamed in constant memory", hwm>>20, limit>>20)
		}
	})
}

// vmHWM returns a process's peak resident set size in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read daemon status: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatalf("parse VmHWM %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// TestWebSocketEcho opens a WebSocket through the proxy with gorilla's
// client and echoes text and binary messages.
func TestWebSocketEcho(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "ws")
	dialer := websocket.Dialer{
		Proxy:            http.ProxyURL(s.proxyURL(t)),
		TLSClientConfig:  &tls.Config{RootCAs: s.caPool(t)},
		HandshakeTimeout: 30 * time.Second,
	}
	conn, resp, err := dialer.Dial("wss://ws.example.com/ws", nil)
	if err != nil {
		var b []byte
		if resp != nil {
			b, _ = io.ReadAll(resp.Body)
		}
		t.Fatalf("WebSocket dial through the proxy: %v (status %s) %s", err, statusOf(resp), trunc(b))
	}
	defer conn.Close()
	if resp.Header.Get("X-Aileron-Audit-Id") == "" {
		t.Errorf("101 response lacks X-Aileron-Audit-Id")
	}
	t.Run("upgrade_on_unlisted_path_denied", func(t *testing.T) {
		before := theSuite.up.HostHits("ws.example.com")
		c, resp, err := dialer.Dial("wss://ws.example.com/ws-not-in-spec", nil)
		if err == nil {
			_ = c.Close()
			t.Fatalf("WebSocket upgrade on a path no operation lists was let through")
		}
		if resp == nil {
			t.Fatalf("no HTTP answer to the denied upgrade: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		assertDenial(t, "denied upgrade", resp.StatusCode, b, http.StatusForbidden, "capability_denied", "no_matching_operation")
		if theSuite.up.HostHits("ws.example.com") != before {
			t.Errorf("the denied upgrade reached the upstream")
		}
	})
	t.Run("websocket_without_opt_in_refused", func(t *testing.T) {
		before := theSuite.up.HostHits("ws.example.com")
		c, resp, err := dialer.Dial("wss://ws.example.com/ws/closed", nil)
		if err == nil {
			_ = c.Close()
			t.Fatalf("WebSocket upgrade on an operation without \"websocket\": true was let through")
		}
		if resp == nil {
			t.Fatalf("no HTTP answer to the refused upgrade: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		assertDenial(t, "upgrade without opt-in", resp.StatusCode, b, http.StatusForbidden, "capability_denied", "upgrade_refused")
		if theSuite.up.HostHits("ws.example.com") != before {
			t.Errorf("the refused upgrade reached the upstream")
		}
	})
	t.Run("other_upgrades_refused", func(t *testing.T) { otherUpgradesRefused(t, d, s) })
	big := bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff}, 200_000)
	msgs := []struct {
		typ  int
		data []byte
	}{
		{websocket.TextMessage, []byte("hello through aileron")},
		{websocket.BinaryMessage, []byte{0, 1, 2, 3, 0xff}},
		{websocket.BinaryMessage, big},
		{websocket.TextMessage, []byte("bye")},
	}
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i, m := range msgs {
		if err := conn.WriteMessage(m.typ, m.data); err != nil {
			t.Fatalf("write message %d: %v", i, err)
		}
		typ, got, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read echo %d: %v", i, err)
		}
		if typ != m.typ || !bytes.Equal(got, m.data) {
			t.Errorf("echo %d: type %d len %d, want type %d len %d", i, typ, len(got), m.typ, len(m.data))
		}
	}
}

// otherUpgradesRefused: h2c (by Upgrade token or HTTP2-Settings alone) is
// refused even on the operation that allows WebSocket, as is any other
// protocol and any upgrade to the sandbox API host; none reaches an
// upstream.
func otherUpgradesRefused(t *testing.T, d *daemon, s *session) {
	const settings = "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
	for _, tc := range []struct{ name, host, head string }{
		{"h2c", "ws.example.com", "GET /ws/closed HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" + settings},
		{"h2c_on_websocket_operation", "ws.example.com", "GET /ws HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" + settings},
		{"h2c_settings_alone", "ws.example.com", "GET /ws/closed HTTP/1.1\r\nConnection: HTTP2-Settings\r\n" + settings},
		{"h2c_without_connection", "ws.example.com", "GET /ws/closed HTTP/1.1\r\nUpgrade: H2C\r\n"},
		{"websocket_and_h2c", "ws.example.com", "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n"},
		{"two_upgrade_lines", "ws.example.com", "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nUpgrade: tls/1.3\r\n"},
		{"other_protocol", "ws.example.com", "GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: echo/1\r\n"},
		{"sandbox_api", "aileron.internal", "GET /v1/mcp HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := theSuite.up.HostHits("ws.example.com")
			req := tc.head + "Host: " + tc.host + "\r\nContent-Length: 0\r\n\r\n"
			o := rawExchange(t, d.ProxyAddr, s.auth(t), tc.host+":443", tlsOpts{SNI: tc.host, Roots: s.caPool(t)}, req)
			if o.Stage != "request" {
				t.Fatalf("exchange: %s", o)
			}
			assertDenial(t, tc.name, o.Status, o.Body, http.StatusForbidden, "capability_denied", "upgrade_refused")
			if theSuite.up.HostHits("ws.example.com") != before {
				t.Errorf("the refused upgrade reached the upstream")
			}
		})
	}
}

// TestPassthroughTunnel checks that a passthrough host gets a raw tunnel: the
// client sees the upstream's own certificate, not a session-CA leaf.
func TestPassthroughTunnel(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t, "--name", "passthrough")
	before := theSuite.up.Hits("passthrough.example.org", "/echo/passthrough")
	o := rawExchange(t, d.ProxyAddr, s.auth(t), "passthrough.example.org:443",
		tlsOpts{SNI: "passthrough.example.org", Roots: certPoolFrom(t, theSuite.pkiDir+"/root.pem")},
		getReq("/echo/passthrough", "passthrough.example.org"))
	if o.Err != nil || o.Status != http.StatusOK {
		t.Fatalf("passthrough exchange: %s", o)
	}
	if len(o.Peer) == 0 || o.Peer[0].Issuer.CommonName != "Aileron Test Upstream Root" {
		t.Fatalf("client saw a certificate not issued by the upstream's root: %+v", peerIssuers(o))
	}
	if ca := s.caCert(t); o.Peer[0].Issuer.CommonName == ca.Subject.CommonName {
		t.Errorf("passthrough tunnel was intercepted with the session CA")
	}
	if n := theSuite.up.Hits("passthrough.example.org", "/echo/passthrough") - before; n != 1 {
		t.Errorf("upstream saw %d requests through the tunnel, want 1", n)
	}
	t.Run("needs_session_auth", func(t *testing.T) {
		tun, o := rawConnect(t, d.ProxyAddr, "passthrough.example.org:443", "")
		if tun != nil {
			_ = tun.Close()
			t.Fatalf("passthrough CONNECT without credentials was tunnelled")
		}
		assertDenial(t, "passthrough without credentials", o.Status, o.Body, http.StatusProxyAuthRequired, "proxy_auth", "proxy_auth_required")
	})
	t.Run("other_port_not_allowed", func(t *testing.T) {
		tun, o := rawConnect(t, d.ProxyAddr, "passthrough.example.org:8443", s.auth(t))
		if tun != nil {
			_ = tun.Close()
			t.Fatalf("CONNECT passthrough.example.org:8443 was tunnelled; the rule is for port 443 only")
		}
		assertDenial(t, "passthrough host on another port", o.Status, o.Body, http.StatusForbidden, "capability_denied", "host_not_allowed")
	})
}

func peerIssuers(o outcome) []string {
	var out []string
	for _, c := range o.Peer {
		out = append(out, c.Subject.CommonName+" <- "+c.Issuer.CommonName)
	}
	return out
}
