package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// The split phases run the upstream and each client as processes of their
// own (this program again, in the roles below), so the CPU of each is read
// from /proc apart from the proxy's.
const (
	roleUpstream = "_upstream"
	roleClient   = "_client"
)

// runRole runs this process as one of the roles, if args name one, and
// reports whether it did.
func runRole(args []string) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case roleUpstream:
		return true, serveUpstreamRole(args[1:])
	case roleClient:
		return true, clientRole(args[1:])
	case roleBareMITM:
		return true, bareMITMRole(args[1:])
	}
	return false, nil
}

// serveUpstreamRole: args are IP, leaf PEM file (certificate then PKCS#8
// key) and the API key. It prints the HTTPS address it listens on, then
// the gRPC one, and serves until its stdin closes.
func serveUpstreamRole(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("%s IP LEAF_PEM API_KEY", roleUpstream)
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(b, b)
	if err != nil {
		return fmt.Errorf("leaf: %w", err)
	}
	up, err := startUpstream(args[0], &upstreamPKI{leaf: cert}, 1<<20, args[2])
	if err != nil {
		return err
	}
	grpcAddr, stopGRPC, err := startGRPC(args[0], cert, args[2])
	if err != nil {
		up.close()
		return err
	}
	fmt.Println(up.addr)
	fmt.Println(grpcAddr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	stopGRPC()
	up.close()
	return nil
}

// writeLeafPEM writes pki's leaf certificate and key to path, for the
// upstream role.
func writeLeafPEM(pki *upstreamPKI, path string) error {
	key, err := x509.MarshalPKCS8PrivateKey(pki.leaf.PrivateKey)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: pki.leaf.Certificate[0]})
	b = append(b, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})...)
	return os.WriteFile(path, b, 0o600)
}

// clientRun is what a client process reports.
type clientRun struct {
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
	P50MS    float64 `json:"p50_ms"`
}

// clientRole drives one target: after the warm-up it prints "start", runs
// for the duration, prints "stop", then its clientRun as JSON. The parent
// reads every process's CPU at "start" and "stop".
func clientRole(args []string) error {
	fs := flag.NewFlagSet(roleClient, flag.ContinueOnError)
	rawURL := fs.String("url", "", "URL to GET (an {id} in it becomes a running number)")
	proxy := fs.String("proxy", "", "proxy URL; empty: direct")
	roots := fs.String("roots", "", "PEM file of the roots to trust")
	conc := fs.Int("conc", 1, "concurrent requests")
	keepAlive := fs.Bool("keepalive", true, "reuse connections")
	h2 := fs.Bool("h2", false, "HTTP/2, every request on one connection")
	dur := fs.Duration("duration", 2*time.Second, "measured time")
	upload := fs.Int64("upload", 0, "instead of GETs for the duration, POST one body of this many bytes to -url")
	download := fs.Bool("download", false, "instead of GETs for the duration, GET -url once and read it to the end")
	warm := fs.Duration("warmup", 300*time.Millisecond, "unmeasured warm-up")
	grpcKind := fs.String("grpc", "", "instead of GETs, gRPC calls to -url's host: "+grpcUnary+" or "+grpcStream)
	key := fs.String("key", "", "gRPC and -sse: the x-api-key to send (a direct run; the proxy injects it otherwise)")
	size := fs.Int("size", 1<<10, "gRPC: bytes in each answer message")
	sse := fs.Bool("sse", false, "instead of GETs, streaming model calls to -url (POST, server-sent events; -key as for gRPC); figures per event")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pemBytes, err := os.ReadFile(*roots)
	if err != nil {
		return err
	}
	pool, err := loadPool(pemBytes, *roots)
	if err != nil {
		return err
	}
	t := target{roots: pool}
	if *proxy != "" {
		if t.proxy, err = url.Parse(*proxy); err != nil {
			return err
		}
	}
	if *grpcKind != "" {
		return grpcRole(t, *rawURL, grpcLoad{kind: *grpcKind, key: *key, size: *size, conc: *conc}, *warm, *dur)
	}
	c := t.client(*conc, *keepAlive)
	if *sse {
		return sseRole(c, *rawURL, *key, *conc, *warm, *dur)
	}
	if *h2 {
		tr := c.Transport.(*http.Transport)
		tr.ForceAttemptHTTP2, tr.MaxConnsPerHost = true, 1
	}
	ctx := context.Background()
	if *upload > 0 || *download {
		return transfer(ctx, c, *rawURL, *upload)
	}
	var seq atomic.Int64
	return measured(*conc, *warm, *dur, func(ctx context.Context) error {
		_, err := get(ctx, c, strings.Replace(*rawURL, "{id}", fmt.Sprint(seq.Add(1)%1000), 1))
		return err
	})
}

// measured runs call from conc loops for warm, unmeasured, then prints
// "start", runs them for dur, prints "stop" and the clientRun as JSON (the
// parent reads every process's CPU at "start" and "stop").
func measured(conc int, warm, dur time.Duration, call func(context.Context) error) error {
	loop(conc, warm, nil, call)
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "start")
	_ = out.Flush()
	var lat []time.Duration
	res := loop(conc, dur, &lat, call)
	fmt.Fprintln(out, "stop")
	slices.Sort(lat)
	if len(lat) > 0 {
		res.P50MS = ms(percentile(lat, 0.5))
	}
	_ = json.NewEncoder(out).Encode(res)
	return out.Flush()
}

// grpcRole is clientRole for the gRPC rows: one connection to rawURL's
// host, conc calls at a time.
func grpcRole(t target, rawURL string, load grpcLoad, warm, dur time.Duration) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	cc, err := grpcClient(u.Host, t.proxy, t.roots)
	if err != nil {
		return err
	}
	defer cc.Close()
	tc := testgrpc.NewTestServiceClient(cc)
	ctx := context.Background()
	if load.key != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-api-key", load.key)
	}
	return measured(load.conc, warm, dur, func(context.Context) error { return grpcCall(ctx, tc, load) })
}

// transfer sends (upload > 0) or fetches one large body between "start"
// and "stop", and reports it as one request.
func transfer(ctx context.Context, c *http.Client, rawURL string, upload int64) error {
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "start")
	_ = out.Flush()
	var resp *http.Response
	var err error
	if upload > 0 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, io.LimitReader(zeros{}, upload))
		req.ContentLength = upload
		resp, err = c.Do(req)
	} else {
		resp, err = c.Get(rawURL)
	}
	run := clientRun{Requests: 1}
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	if err != nil {
		run = clientRun{Errors: 1, FirstErr: err.Error()}
	}
	fmt.Fprintln(out, "stop")
	_ = json.NewEncoder(out).Encode(run)
	return out.Flush()
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// loop runs call from conc goroutines back to back for d; calls in flight
// at the end finish (a deadline would fail them). lat, when given,
// collects every successful call's latency.
func loop(conc int, d time.Duration, lat *[]time.Duration, call func(context.Context) error) clientRun {
	ctx := context.Background()
	end := time.Now().Add(d)
	var n atomic.Int64
	var errs errRecorder
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			for t0 := time.Now(); t0.Before(end); t0 = time.Now() {
				if err := call(ctx); err != nil {
					errs.record(err)
					continue
				}
				n.Add(1)
				if lat != nil {
					mine = append(mine, time.Since(t0))
				}
			}
			if lat != nil {
				mu.Lock()
				*lat = append(*lat, mine...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	ne, first := errs.snapshot()
	return clientRun{Requests: n.Load(), Errors: ne, FirstErr: first}
}
