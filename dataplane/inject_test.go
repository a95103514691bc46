package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// fixedInjector stands in for the control plane's vault-backed injector:
// it sets one bearer token for items.get and items.create and counts calls.
type fixedInjector struct {
	token string
	fail  bool
	calls atomic.Int64
}

func (f *fixedInjector) Inject(_ context.Context, _ *Session, op *policy.Operation, out *http.Request) ([]string, error) {
	f.calls.Add(1)
	if f.fail {
		return nil, fmt.Errorf("%w: no binding for %s", ErrCredentialUnavailable, op.FQN)
	}
	out.Header.Set("Authorization", "Bearer "+f.token)
	return []string{f.token, "Bearer " + f.token}, nil
}

func TestInjectionOnOutboundCopyWithEchoRedacted(t *testing.T) {
	inj := &fixedInjector{token: "sekrit-token-123456"}
	e := newEnv(t, func(p *Proxy) { p.Injector = inj })
	c := e.client(t, url.UserPassword("s1", e.token))
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/1", nil)
	req.Header.Set("Authorization", "Bearer client-junk")
	req.Header.Set("Accept-Encoding", "gzip")
	// A client naming Authorization as hop-by-hop must not strip the
	// injected header: injection runs after hop-by-hop removal.
	req.Header.Set("Connection", "keep-alive, Authorization")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || inj.calls.Load() != 1 {
		t.Fatalf("status %d, injector calls %d", resp.StatusCode, inj.calls.Load())
	}
	var echo map[string]string
	if err := json.Unmarshal(body, &echo); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	if mask := inject.Mask(len("Bearer " + inj.token)); echo["authorization"] != mask || resp.Header.Get("X-Echo-Authorization") != mask {
		t.Errorf("upstream echo reached the client unmasked or the header was not injected: body %v, header %q",
			echo, resp.Header.Get("X-Echo-Authorization"))
	}
	if echo["accept_encoding"] != "" {
		t.Errorf("Accept-Encoding %q reached the upstream on a request carrying a credential: a compressed echo would escape masking", echo["accept_encoding"])
	}
	if strings.Contains(string(body), inj.token) || strings.Contains(fmt.Sprint(resp.Header), inj.token) {
		t.Error("the injected secret reached the client")
	}
}

// TestEchoInInterimHeadersAndTrailersIsMasked: an upstream echoing the
// credential in a 1xx response or a trailer does not get it to the client,
// and a body it labels as encoded (which masking cannot read) is refused.
func TestEchoInInterimHeadersAndTrailersIsMasked(t *testing.T) {
	inj := &fixedInjector{token: "sekrit-token-123456"}
	e := newEnv(t, func(p *Proxy) { p.Injector = inj })
	var interim []string
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		interim = append(interim, fmt.Sprint(code, h))
		return nil
	}}
	c := e.client(t, url.UserPassword("s1", e.token))
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "https://api.example.com/v1/items/sneaky", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "body without the secret" || len(interim) != 1 {
		t.Fatalf("status %d body %q interim %v", resp.StatusCode, body, interim)
	}
	if got := resp.Trailer.Get("X-Echo-Trailer"); got == "" || strings.Contains(got, inj.token) {
		t.Errorf("trailer %q: want it masked", got)
	}
	if strings.Contains(interim[0], inj.token) || !strings.Contains(interim[0], "[REDACTED]") {
		t.Errorf("103 headers %s: want the secret masked", interim[0])
	}
	// Every value of every Content-Encoding line counts: a client decodes
	// them all, so "identity" (or nothing) on one line hides no gzip on
	// the next.
	for _, q := range []string{"enc=br", "enc=identity&enc=gzip", "enc=&enc=gzip", "enc=identity,%20gzip", "enc=IDENTITY&enc=x-gzip"} {
		resp, err = c.Get("https://api.example.com/v1/items/sneaky?" + q)
		if err != nil {
			t.Fatal(err)
		}
		env := readEnvelope(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || env.Reason != "encoded_response" {
			t.Errorf("%s: %d %+v", q, resp.StatusCode, env)
		}
	}
	for _, q := range []string{"enc=identity", "enc=identity&enc=identity"} {
		resp, err = c.Get("https://api.example.com/v1/items/sneaky?" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "body without the secret" {
			t.Errorf("%s: %d %q, want the plain body", q, resp.StatusCode, body)
		}
	}
}

// TestMalformedEchoStaysOutOfTheLog: an upstream whose malformed answer
// quotes the credential gets a 502, and the raw transport error in the log
// line is masked.
func TestMalformedEchoStaysOutOfTheLog(t *testing.T) {
	inj := &fixedInjector{token: "sekrit-token-123456"}
	var logs syncBuffer
	e := newEnv(t, func(p *Proxy) {
		p.Injector = inj
		l := zerolog.New(&logs)
		p.Log = &l
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Get("https://api.example.com/v1/items/garbage")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if got := logs.String(); strings.Contains(got, inj.token) || !strings.Contains(got, "malformed") {
		t.Fatalf("log: %s", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCredentialFailureFailsClosed(t *testing.T) {
	inj := &fixedInjector{fail: true}
	e := newEnv(t, func(p *Proxy) { p.Injector = inj })
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Get("https://api.example.com/v1/items/1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readEnvelope(t, resp.Body); resp.StatusCode != 403 || got.Reason != "credential_unavailable" {
		t.Fatalf("status %d envelope %+v", resp.StatusCode, got)
	}
	if e.hits.Load() != 0 {
		t.Fatal("a request whose credential was unavailable reached the upstream")
	}
}

func TestPlaceholderOutsideAnInjectedPlaceIsRefused(t *testing.T) {
	e := newEnv(t, nil) // no credential stage: nothing replaces a placeholder
	ph := inject.PlaceholderPrefix + "0123456789abcdef0123456789abcdef"
	c := e.client(t, url.UserPassword("s1", e.token))
	for name, mutate := range map[string]func(*http.Request){
		"header": func(r *http.Request) { r.Header.Set("X-Api-Key", ph) },
		"query":  func(r *http.Request) { r.URL.RawQuery = "key=" + ph },
	} {
		req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/1", nil)
		mutate(req)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := readEnvelope(t, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || got.Reason != "placeholder_misuse" {
			t.Errorf("%s: status %d envelope %+v", name, resp.StatusCode, got)
		}
	}
	if e.hits.Load() != 0 {
		t.Fatal("a placeholder reached the upstream")
	}
}

// TestLargeEchoKeepsItsFraming: a credentialed answer far over any buffer,
// echoing the secret across every piece boundary, reaches the client with
// each echo replaced by a mask of its own length: with its length announced
// it keeps that Content-Length (not re-sent chunked); without one it is
// chunked as the upstream sent it. Either way, over HTTP/1.1 and HTTP/2,
// the body is the whole body masked at once.
func TestLargeEchoKeepsItsFraming(t *testing.T) {
	inj := &fixedInjector{token: "sekrit-token-123456"}
	e := newEnv(t, func(p *Proxy) { p.Injector = inj })
	sent := bigEchoBody("Bearer " + inj.token)
	want := inject.NewRedactor(inj.token, "Bearer "+inj.token).String(string(sent))
	if len(want) != len(sent) || !strings.Contains(want, inject.Redacted) {
		t.Fatalf("the reference masking is %d bytes for %d", len(want), len(sent))
	}
	h1 := e.client(t, url.UserPassword("s1", e.token))
	h2 := e.h2Client(t)
	for _, tc := range []struct {
		name    string
		rt      http.RoundTripper
		query   string
		wantLen int64
	}{
		{"h1 announced", h1.Transport, "", int64(len(sent))},
		{"h1 chunked", h1.Transport, "?chunked=1", -1},
		{"h2 announced", h2, "", int64(len(sent))},
		{"h2 unannounced", h2, "?chunked=1", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/items/bigecho"+tc.query, nil)
			resp, err := tc.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			if resp.ContentLength != tc.wantLen {
				t.Errorf("Content-Length %d, transfer encoding %q; want %d", resp.ContentLength, resp.TransferEncoding, tc.wantLen)
			}
			if string(got) != want {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("the body (%d bytes) differs from the whole body masked at once (%d bytes) at byte %d", len(got), len(want), i)
			}
		})
	}
}
