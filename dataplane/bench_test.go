package dataplane

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// BenchmarkProxyKeepAlive measures one allowed request through the whole
// pipeline on a kept-alive tunnel (client, proxy and upstream in one
// process); BenchmarkDirectKeepAlive is the same request straight to the
// upstream, for the ratio. `make bench` measures the daemon from outside.
func BenchmarkProxyKeepAlive(b *testing.B) {
	e := newEnv(b, nil)
	benchGet(b, e.client(b, url.UserPassword("s1", e.token)))
}

func BenchmarkDirectKeepAlive(b *testing.B) {
	e := newEnv(b, nil)
	tr := e.client(b, nil).Transport.(*http.Transport)
	tr.Proxy = nil
	tr.TLSClientConfig.RootCAs = e.upRoots
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, e.upAddr)
	}
	benchGet(b, &http.Client{Transport: tr})
}

func benchGet(b *testing.B, c *http.Client) {
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get("https://api.example.com/v1/items/42")
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// BenchmarkExecute is a synthetic call (the sandbox API's run endpoint and
// actions) through the same pipeline; compare with BenchmarkProxyKeepAlive
// and BenchmarkDirectKeepAlive in the same run.
func BenchmarkExecute(b *testing.B) {
	e := newEnv(b, nil)
	sess := &Session{ID: "s1", CA: e.sessCA}
	u, _ := url.Parse("https://api.example.com/v1/items/42")
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := e.proxy.Execute(context.Background(), Call{Session: sess, Method: "GET", URL: u})
			if err != nil || res.Status != http.StatusOK {
				b.Errorf("Execute: %v %d", err, res.Status)
				return
			}
		}
	})
}
