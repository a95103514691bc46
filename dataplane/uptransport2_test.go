package dataplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/aileronhq/aileron/audit"
)

// TestUpstreamProtocolFollowsTheClient: an HTTP/2 client's requests reach
// an upstream that offers h2 over HTTP/2, many streams sharing one
// upstream connection; an upstream that offers only http/1.1 gets
// HTTP/1.1; an HTTP/1.1 client's requests go over HTTP/1.1 either way.
// The credential goes on, and the echo of it is masked, on every leg.
func TestUpstreamProtocolFollowsTheClient(t *testing.T) {
	const token = "sekrit-token-proto-42"
	for _, c := range []struct {
		name        string
		upH2, cliH2 bool
		proto       string
	}{
		{"h2 client, h2 upstream", true, true, "HTTP/2.0"},
		{"h2 client, http/1.1 upstream", false, true, "HTTP/1.1"},
		{"http/1.1 client, h2 upstream", true, false, "HTTP/1.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &listRecorder{}
			e := newEnvUp(t, func(p *Proxy) { p.Injector = &fixedInjector{token: token}; p.Recorder = rec }, c.upH2)
			var rt http.RoundTripper
			if c.cliH2 {
				rt = e.h2Client(t)
			} else {
				rt = e.client(t, url.UserPassword("s1", e.token)).Transport
			}
			const n = 20
			var wg sync.WaitGroup
			var mu sync.Mutex
			remotes := map[string]bool{}
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com/v1/items/%d", i), nil)
					resp, err := rt.RoundTrip(req)
					if err != nil {
						t.Error(err)
						return
					}
					body, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					if got := resp.Header.Get("X-Echo-Proto"); got != c.proto || resp.StatusCode != 200 {
						t.Errorf("status %d, upstream saw %q, want %q", resp.StatusCode, got, c.proto)
					}
					if a := resp.Header.Get("X-Echo-Authorization"); a == "" || strings.Contains(string(body)+a, token) {
						t.Errorf("the credential was not added, or its echo reached the client: %q %s", a, body)
					}
					mu.Lock()
					remotes[resp.Header.Get("X-Echo-Remote")] = true
					mu.Unlock()
				}()
			}
			wg.Wait()
			if c.proto == "HTTP/2.0" && len(remotes) != 1 {
				t.Errorf("%d streams used %d upstream connections, want 1 (multiplexed)", n, len(remotes))
			}
			waitRecords(t, rec, audit.EventProxied, n)
		})
	}
}

// TestH2UpstreamHeaderTimeout: an HTTP/2 upstream that takes longer than
// proxy's upstream header timeout to answer is given up on (504
// upstream_timeout), as an HTTP/1.1 one is, for either client protocol.
func TestH2UpstreamHeaderTimeout(t *testing.T) {
	for _, upH2 := range []bool{false, true} {
		t.Run(fmt.Sprint("upstream h2 ", upH2), func(t *testing.T) {
			e := newEnvUp(t, func(p *Proxy) { p.Timeouts.UpstreamHdr = 300 * time.Millisecond }, upH2)
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/wait", nil) // answers after 10 s
			resp, err := e.h2Client(t).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if got := readEnvelope(t, resp.Body); resp.StatusCode != http.StatusGatewayTimeout || got.Reason != "upstream_timeout" {
				t.Fatalf("status %d, %+v; want 504 upstream_timeout", resp.StatusCode, got)
			}
		})
	}
}

// TestH2UpstreamTakingNoStreamIsRefused: an upstream whose HTTP/2
// connections take no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0) gets a few
// dials from a request, not an endless run of them, and the request is
// refused instead of waiting for its client to give up: 502 when each new
// connection's settings came before the request looked for a stream, 504
// after the upstream header timeout when they came after it had reserved
// one (it then waits for a stream that never frees).
func TestH2UpstreamTakingNoStreamIsRefused(t *testing.T) {
	none := func(int64) []http2.Setting { return []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}} }
	up := newRawH2Up(t, none, ackSettingsOnly)
	e := newEnvUp(t, func(p *Proxy) { up.tune(p); p.Timeouts.UpstreamHdr = time.Second }, false)
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/1", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := e.h2Client(t).RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("the client got no answer: %v", err)
	}
	defer resp.Body.Close()
	if got := readEnvelope(t, resp.Body); resp.StatusCode != http.StatusBadGateway && resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("status %d %+v, want 502 or 504", resp.StatusCode, got)
	}
	if n := up.accepts.Load(); n > upMaxDials {
		t.Errorf("%d connections dialled for one request, want at most %d", n, upMaxDials)
	}
}

// TestH2LastDialIsTried: a request that found no stream on its first two
// new connections (SETTINGS_MAX_CONCURRENT_STREAMS 0) is sent on the third,
// which takes streams, rather than refused after dialling it.
func TestH2LastDialIsTried(t *testing.T) {
	noneFirst := func(n int64) []http2.Setting {
		if n < upMaxDials {
			return []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 0}}
		}
		return nil
	}
	up := newRawH2Up(t, noneFirst, ackSettingsOnly)
	e := newEnvUp(t, up.tune, false)
	u := e.upstream2(t)
	u.connect = func(ctx context.Context, key string) (*http.ClientConn, error) {
		cc, err := u.tr.NewClientConn(ctx, "https", key)
		for deadline := time.Now().Add(5 * time.Second); err == nil && up.accepts.Load() < upMaxDials && cc.Available() != 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) { // the connection's settings are in: it takes no stream
				t.Error("a connection's SETTINGS_MAX_CONCURRENT_STREAMS 0 never took effect")
				break
			}
		}
		return cc, err
	}
	c, fresh, err := u.get(context.Background(), "api.example.com:443")
	if err != nil || c == nil || !fresh {
		t.Fatalf("get = %v, fresh %v, %v; want the third connection", c, fresh, err)
	}
	c.cc.Release()
	if n := up.accepts.Load(); n != upMaxDials {
		t.Errorf("%d connections dialled, want %d", n, upMaxDials)
	}
}

// ackSettingsOnly serves a raw HTTP/2 upstream connection that
// acknowledges settings and answers nothing else.
func ackSettingsOnly(_ int64, fr *http2.Framer, _ net.Conn) {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			_ = fr.WriteSettingsAck()
		}
	}
}

// TestH2UpstreamWritesInBatches: a connection whose upstream chose h2
// sends its TLS records in batches (a request's HEADERS, DATA and
// END_STREAM in one write); one whose upstream chose http/1.1 writes
// each record as it comes, as upstream1's exchange expects.
func TestH2UpstreamWritesInBatches(t *testing.T) {
	for _, c := range []struct {
		name  string
		upH2  bool
		batch bool
	}{
		{"h2 upstream", true, true},
		{"http/1.1 upstream", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newEnvUp(t, nil, c.upH2).upstream2(t)
			conn, err := u.dialTLS(context.Background(), "tcp", "api.example.com:443")
			var tc *tls.Conn
			switch {
			case c.upH2 && err == nil:
				defer conn.Close()
				tc = conn.(*tls.Conn)
			case !c.upH2 && errors.Is(err, errUpstreamH1):
				uc := u.h1.pool.take("api.example.com:443", true)
				if uc == nil {
					t.Fatal("the http/1.1 connection was not pooled")
				}
				defer uc.close()
				tc = uc.conn.(*tls.Conn)
			default:
				t.Fatalf("dialTLS: %v", err)
			}
			bc, ok := tc.NetConn().(*batchConn)
			if !ok {
				t.Fatalf("the TLS connection writes to a %T, want a *batchConn", tc.NetConn())
			}
			bc.mu.Lock()
			on := bc.on
			bc.mu.Unlock()
			if on != c.batch {
				t.Errorf("batching %v, want %v", on, c.batch)
			}
		})
	}
}

// upstream2 is an HTTP/2 upstream transport of e's proxy, on its own
// (not the proxy's), swept when the test ends.
func (e *env) upstream2(t *testing.T) *upstream2 {
	t.Helper()
	if err := e.proxy.init(); err != nil {
		t.Fatal(err)
	}
	base, err := e.proxy.upstreamTLS()
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstream2(e.proxy, e.proxy.up, base)
	t.Cleanup(func() { u.sweep(true) })
	return u
}
