package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/elazarl/goproxy"
)

// roleBareMITM runs the bench's peer: a bare goproxy MITM, the "easy
// version" of the product. It terminates every CONNECT with leaves of its
// own CA, sets X-Api-Key on every request, verifies the upstream against
// the bench upstream root, and does nothing else: no policy, no audit.
const roleBareMITM = "_baremitm"

// bareMITMRole: args are the CA PEM file (certificate then PKCS#8 key), the
// upstream roots PEM file and the API key. It prints the proxy address it
// listens on (127.0.0.1) and serves until its stdin closes.
func bareMITMRole(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("%s CA_PEM UPSTREAM_ROOTS_PEM API_KEY", roleBareMITM)
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	ca, err := tls.X509KeyPair(b, b)
	if err != nil {
		return fmt.Errorf("bare MITM CA: %w", err)
	}
	rootPEM, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	roots, err := loadPool(rootPEM, args[1])
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newBareMITM(ca, roots, args[2])}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// newBareMITM is the peer's proxy. A request that came over HTTP/2 goes
// upstream over HTTP/2 and one over HTTP/1.1 over HTTP/1.1, as through the
// daemon; leaves are minted once per host and kept, as the daemon does.
func newBareMITM(ca tls.Certificate, roots *x509.CertPool, apiKey string) *goproxy.ProxyHttpServer {
	h1 := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 256, // net/http keeps 2 by default: every extra client would redial
		Protocols:           new(http.Protocols),
	}
	h1.Protocols.SetHTTP1(true)
	h2 := h1.Clone()
	h2.Protocols = new(http.Protocols)
	h2.Protocols.SetHTTP2(true)
	p := goproxy.NewProxyHttpServer()
	p.Tr, p.AllowHTTP2, p.CertStore = h1, true, &leafCache{m: map[string]*tls.Certificate{}}
	p.ConnectDial = nil // no proxy from the environment
	mitm := &goproxy.ConnectAction{Action: goproxy.ConnectMitm, TLSConfig: goproxy.TLSConfigFromCA(&ca)}
	p.OnRequest().HandleConnectFunc(func(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		return mitm, host
	})
	h2rt := goproxy.RoundTripperFunc(func(r *http.Request, _ *goproxy.ProxyCtx) (*http.Response, error) {
		return h2.RoundTrip(r)
	})
	p.OnRequest().DoFunc(func(r *http.Request, ctx *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		r.Header.Set("X-Api-Key", apiKey)
		if r.ProtoMajor == 2 {
			ctx.RoundTripper = h2rt
		}
		return r, nil
	})
	return p
}

// leafCache is goproxy's CertStorage: one leaf per host, minted once.
type leafCache struct {
	mu sync.Mutex
	m  map[string]*tls.Certificate
}

func (c *leafCache) Fetch(host string, gen func() (*tls.Certificate, error)) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cert, ok := c.m[host]; ok {
		return cert, nil
	}
	cert, err := gen()
	if err == nil {
		c.m[host] = cert
	}
	return cert, err
}
