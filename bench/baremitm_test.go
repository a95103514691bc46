package main

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
)

// TestBareMITM checks the bench's peer does the job it is compared on: it
// sets the bench key on the way out, over HTTP/1.1 and HTTP/2, and never
// sends a request to an upstream whose certificate the bench root did not
// sign.
func TestBareMITM(t *testing.T) {
	trusted, err := newUpstreamPKI(net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := newUpstreamPKI(net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, rootPEM, err := newPeerCA()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := tls.X509KeyPair(caPEM, caPEM)
	if err != nil {
		t.Fatal(err)
	}
	clientRoots, err := loadPool(rootPEM, "peer CA")
	if err != nil {
		t.Fatal(err)
	}
	const key = "bench-key-1"
	proxy := newBareMITM(ca, trusted.rootPool, key)
	proxy.Logger = log.New(io.Discard, "", 0) // the refusals below are expected
	mitm := httptest.NewServer(proxy)
	defer mitm.Close()
	for _, tc := range []struct {
		name     string
		upstream *upstreamPKI
		h2       bool
	}{
		{"HTTP/1.1, trusted upstream", trusted, false},
		{"HTTP/2, trusted upstream", trusted, true},
		{"HTTP/1.1, upstream certificate from another root", stranger, false},
		{"HTTP/2, upstream certificate from another root", stranger, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int64
			var gotKey atomic.Value
			var gotProto atomic.Int64
			up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				gotKey.Store(r.Header.Get("X-Api-Key"))
				gotProto.Store(int64(r.ProtoMajor))
				_, _ = w.Write([]byte("ok"))
			}))
			up.EnableHTTP2 = true
			up.Config.ErrorLog = log.New(io.Discard, "", 0)
			up.TLS = &tls.Config{Certificates: []tls.Certificate{tc.upstream.leaf}}
			up.StartTLS()
			defer up.Close()
			proxyURL, _ := url.Parse(mitm.URL)
			tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: clientRoots}, ForceAttemptHTTP2: tc.h2}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(up.URL + "/v1/secure/1")
			status := 0
			if err == nil {
				status = resp.StatusCode
				_ = resp.Body.Close()
				if got, want := resp.ProtoMajor, map[bool]int{false: 1, true: 2}[tc.h2]; got != want {
					t.Errorf("client leg spoke HTTP/%d, want HTTP/%d", got, want)
				}
			}
			if tc.upstream == stranger {
				if status == http.StatusOK || hits.Load() != 0 {
					t.Fatalf("status %d, %d request(s) reached an upstream the bench root did not sign; want it refused", status, hits.Load())
				}
				return
			}
			if err != nil || status != http.StatusOK {
				t.Fatalf("GET through the bare MITM: status %d, %v", status, err)
			}
			if got := gotKey.Load(); got != key {
				t.Errorf("upstream saw X-Api-Key %q, want %q", got, key)
			}
			if got, want := gotProto.Load(), map[bool]int64{false: 1, true: 2}[tc.h2]; got != want {
				t.Errorf("upstream leg spoke HTTP/%d, want HTTP/%d (the client's)", got, want)
			}
		})
	}
}
