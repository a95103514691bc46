package dataplane

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// echoPaths are upstream answers that try to hand the injected credential
// back to the client in the places masking must cover; it reports whether
// it answered r.
func echoPaths(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	switch r.URL.Path {
	case "/v1/items/wait": // answers after 10 s, unless the request is cancelled first
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			_, _ = io.WriteString(w, "waited")
		}
		return true
	case "/v1/items/undeclared": // in a trailer never announced (as gRPC and Go's h2 servers send them)
		_, _ = io.WriteString(w, "body without the secret")
		http.NewResponseController(w).Flush()
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", auth)
	case "/v1/items/nocontent": // trailers on a 204 (HTTP/2 carries them)
		w.Header().Set("Trailer", "X-Declared")
		w.WriteHeader(http.StatusNoContent)
		w.Header().Set("X-Declared", auth)
		w.Header().Set(http.TrailerPrefix+"X-Undeclared", auth)
	case "/v1/items/grpcgz": // inside a gzip-compressed gRPC message
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Grpc-Encoding", "gzip")
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = io.WriteString(zw, auth+" accept="+r.Header.Get("Grpc-Accept-Encoding"))
		_ = zw.Close()
		_, _ = w.Write(zb.Bytes())
	case "/v1/items/stall": // part of an answer, then nothing until the request is cancelled (or 10 s)
		_, _ = io.WriteString(w, "partial answer\n")
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	case "/v1/items/slow": // a line every 50 ms for 6 s
		for i := range 120 {
			if _, err := fmt.Fprintf(w, "tick %d\n", i); err != nil {
				return true
			}
			http.NewResponseController(w).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	case "/v1/items/bigecho": // bigEchoBody, with its length announced unless ?chunked, sent in odd pieces
		body := bigEchoBody(auth)
		if r.URL.Query().Get("chunked") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		for len(body) > 0 {
			n := min(len(body), 7919)
			_, _ = w.Write(body[:n])
			http.NewResponseController(w).Flush()
			body = body[n:]
		}
	default:
		return false
	}
	return true
}

// bigEchoBody is about 300 KiB of text with auth, and the part of it after
// "Bearer ", echoed every 3001 bytes: over every read and write boundary.
func bigEchoBody(auth string) []byte {
	token := strings.TrimPrefix(auth, "Bearer ")
	var b bytes.Buffer
	for i := 0; b.Len() < 300<<10; i++ {
		b.WriteString(strings.Repeat("x", 3001-len(auth)))
		if i%2 == 0 {
			b.WriteString(auth)
		} else {
			b.WriteString(strings.Repeat("y", len(auth)-len(token)) + token)
		}
	}
	return b.Bytes()
}

// TestH2EchoesMaskedEverywhere: the injected credential echoed in a
// trailer never announced, in trailers of a 204, or inside a compressed
// gRPC message never reaches an HTTP/2 client, whichever protocol the
// upstream speaks.
func TestH2EchoesMaskedEverywhere(t *testing.T) {
	const token = "sekrit-token-123456"
	for _, upH2 := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream h2 ", upH2), func(t *testing.T) {
			e := newEnvUp(t, func(p *Proxy) { p.Injector = &fixedInjector{token: token} }, upH2)
			cc := e.h2Client(t)
			for _, path := range []string{"/v1/items/undeclared", "/v1/items/nocontent", "/v1/items/grpcgz"} {
				req, _ := http.NewRequest("GET", "https://api.example.com"+path, nil)
				req.Header.Set("Grpc-Accept-Encoding", "gzip")
				if upH2 {
					req.Header.Set("Te", "trailers")
				}
				resp, err := cc.RoundTrip(req)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
					body, _ = io.ReadAll(zr)
				}
				seen := fmt.Sprint(resp.Header, resp.Trailer) + string(body)
				if strings.Contains(seen, token) {
					t.Errorf("%s: the credential reached the client: %d %s", path, resp.StatusCode, seen)
				}
				if path == "/v1/items/grpcgz" && (resp.StatusCode != 403 || !strings.Contains(seen, "encoded_response")) {
					t.Errorf("%s: %d %s; want the encoded-response refusal", path, resp.StatusCode, seen)
				}
			}
		})
	}
}

// TestH2ZeroWindowClientIsCut: a client that stops granting flow-control
// window (while still reading the socket) has its stream reset within
// proxy.body_idle, and the exchange is audited as ended.
func TestH2ZeroWindowClientIsCut(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec; p.Timeouts.BodyIdle = 300 * time.Millisecond })
	tc := e.h2Tunnel(t)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Head("https", "/v1/items/large"), EndStream: true, EndHeaders: true})
	reset := make(chan http2.ErrCode, 1)
	go func() { // reads every frame, acknowledges settings and pings, never a WINDOW_UPDATE
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
				}
			case *http2.RSTStreamFrame:
				reset <- f.ErrCode
				return
			}
		}
	}()
	select {
	case code := <-reset:
		t.Logf("stream reset: %v", code)
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a client granting no window was still open after 5 s (body_idle 300 ms)")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		rec.mu.Lock()
		done := len(rec.completed)
		rec.mu.Unlock()
		if done == 1 || time.Now().After(deadline) {
			if done != 1 {
				t.Errorf("%d completion lines, want 1", done)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestH2RevokedSessionCannotKeepStreaming: once a stream of a revoked
// session is refused, the whole HTTP/2 connection ends, its long-running
// streams with it.
func TestH2RevokedSessionCannotKeepStreaming(t *testing.T) {
	var sess *revocable
	e := newEnv(t, func(p *Proxy) {
		sess = &revocable{staticSessions: p.Sessions.(staticSessions), gone: map[string]bool{}}
		p.Sessions, p.RevokeCheck = sess, time.Hour // only a new stream notices
	})
	cc := e.h2Client(t)
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/slow", nil)
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	sess.revoke("s1")
	req2, _ := http.NewRequest("GET", "https://api.example.com/v1/items/1", nil)
	if resp2, err := cc.RoundTrip(req2); err == nil {
		b, rerr := io.ReadAll(resp2.Body)
		_ = resp2.Body.Close()
		if resp2.StatusCode != 403 || (rerr == nil && !strings.Contains(string(b), "session_revoked")) {
			t.Errorf("a stream after revocation: %d %s (%v)", resp2.StatusCode, b, rerr)
		}
	}
	start := time.Now()
	for time.Since(start) < 3*time.Second {
		if _, err := resp.Body.Read(buf); err != nil {
			return // cut
		}
	}
	t.Fatal("the revoked session's long stream kept flowing for 3 s after another stream was refused")
}

// TestH2TargetBytesAndConnect: raw bytes a request line cannot carry, and
// CONNECT inside the tunnel, are refused before the upstream.
func TestH2TargetBytesAndConnect(t *testing.T) {
	e := newEnv(t, nil)
	cc := e.h2Client(t)
	for _, path := range []string{"/v1/items/42?a=b HTTP/1.0 x", "/v1/items/42?q=\u00e9"} {
		req, _ := http.NewRequest("GET", "https://api.example.com/x", nil)
		req.URL.Opaque = path
		resp, err := cc.RoundTrip(req)
		if err != nil {
			continue // refused by the HTTP/2 layer itself: fine
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "must be percent-encoded") {
			t.Errorf("%q: %d %s", path, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequest("CONNECT", "https://api.example.com", nil)
	req.Host = "api.example.com:443"
	if resp, err := cc.RoundTrip(req); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("CONNECT inside the tunnel: %d", resp.StatusCode)
		}
	}
	if e.hits.Load() != 0 {
		t.Errorf("the upstream saw %d of these", e.hits.Load())
	}
}

// TestH2SettingsFloodIsEnded: a client that floods SETTINGS and never
// reads the acknowledgements, while a stream keeps the connection from
// idling, has its connection ended at once with GOAWAY ENHANCE_YOUR_CALM,
// not held until the write stalls for proxy.body_idle_timeout (30 s). A
// client that changes its settings a few times keeps its connection.
func TestH2SettingsFloodIsEnded(t *testing.T) {
	for _, c := range []struct {
		name     string
		settings int
		ended    bool
	}{{"flood", 200000, true}, {"a few changes", h2SettingsBurst - 4, false}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil) // default timeouts: body_idle 30 s, idle 90 s
			tc := e.h2Tunnel(t)
			if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(tc, tc)
			_ = fr.WriteSettings()
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Head("https", "/v1/items/stall"), EndStream: true, EndHeaders: true})
			_ = tc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			sent := 0
			for ; sent < c.settings; sent++ { // never reads
				if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535 + uint32(sent%2)}); err != nil {
					break // the proxy stopped reading: it hung up
				}
			}
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			var goAway http2.ErrCode = 1 << 31
			var rerr error
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					rerr = err
					break
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					goAway = ga.ErrCode
				}
				if !c.ended {
					if _, ok := f.(*http2.DataFrame); ok {
						break // the stream's answer flows: the connection is served
					}
				}
			}
			if !c.ended {
				if rerr != nil || goAway != 1<<31 {
					t.Fatalf("after %d settings changes: read %v, GOAWAY %v; the connection should be served", sent, rerr, goAway)
				}
				return
			}
			if isTimeout(rerr) {
				t.Fatalf("the flooding connection (%d SETTINGS sent) was still open 5 s later", sent)
			}
			if goAway != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v before the connection ended (%v), want ENHANCE_YOUR_CALM", goAway, rerr)
			}
			for deadline := time.Now().Add(5 * time.Second); e.proxy.Stats().TunnelsOpen != 0; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the proxy still serves the flooding tunnel")
				}
			}
		})
	}
}

// TestH2PlainSchemeRefused: a stream that says ":scheme http" is refused
// insecure_scheme, as a plain-HTTP request is over HTTP/1.1; it is never
// answered over https as if it had said so.
func TestH2PlainSchemeRefused(t *testing.T) {
	e := newEnv(t, nil)
	tc := e.h2Tunnel(t)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	_ = fr.WriteSettings()
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	dec := hpack.NewDecoder(4096, nil)
	for i, scheme := range []string{"http", "https"} {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Head(scheme, "/v1/items/1"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		status := ""
		var body bytes.Buffer
		for done := false; !done; {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatalf(":scheme %s: %v", scheme, err)
			}
			switch f := f.(type) {
			case *http2.HeadersFrame:
				if f.StreamID == id && status == "" {
					fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
					for _, hf := range fields {
						if hf.Name == ":status" {
							status = hf.Value
						}
					}
				}
				done = f.StreamEnded()
			case *http2.DataFrame:
				body.Write(f.Data())
				done = f.StreamEnded()
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			}
		}
		want := map[string]string{"http": "403", "https": "200"}[scheme]
		if status != want || (scheme == "http" && !strings.Contains(body.String(), `"insecure_scheme"`)) {
			t.Errorf(":scheme %s: status %s, body %s; want %s", scheme, status, body.String(), want)
		}
	}
	if e.hits.Load() != 1 {
		t.Errorf("the upstream saw %d requests, want 1 (the https one)", e.hits.Load())
	}
}
