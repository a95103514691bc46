package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// target is one way of reaching the upstream: directly (proxy nil) or
// through a proxy whose CA is in roots.
type target struct {
	name  string
	proxy *url.URL
	roots *x509.CertPool
	pid   int // the proxy process, 0 for direct
	// secure sends the requests to /v1/secure/{id}, where the daemon injects
	// the bench credential; only the keep-alive and latency phases run.
	secure bool
}

// cpu returns the CPU time used so far by the bench process (clients and
// upstream) plus the proxy process, if any. Errors read as zero.
func (t target) cpu() time.Duration {
	d := selfCPU()
	if t.pid != 0 {
		p, _ := procCPU(t.pid)
		d += p
	}
	return d
}

// client builds a fresh HTTP/1.1 client for t. keepAlive false makes every
// request a new TCP+TLS connection (through a proxy: a new CONNECT too).
// No proxy environment variable is consulted, and TLS sessions are never
// resumed (no client session cache), so every handshake is a full one.
func (t target) client(conc int, keepAlive bool) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:       &tls.Config{RootCAs: t.roots, MinVersion: tls.VersionTLS12},
		DisableKeepAlives:     !keepAlive,
		DisableCompression:    true,
		MaxIdleConns:          4 * conc,
		MaxIdleConnsPerHost:   2 * conc,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		IdleConnTimeout:       30 * time.Second,
	}
	if t.proxy != nil {
		tr.Proxy = http.ProxyURL(t.proxy)
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errRecorder counts failed requests and keeps the first failure's text.
type errRecorder struct {
	n     atomic.Int64
	mu    sync.Mutex
	first string
}

func (e *errRecorder) record(err error) {
	if e.n.Add(1) == 1 {
		e.mu.Lock()
		e.first = err.Error()
		e.mu.Unlock()
	}
}

func (e *errRecorder) snapshot() (int64, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n.Load(), e.first
}

// get fetches url, drains the body and returns the body length. A status
// other than 200 is an error carrying the start of the body (the proxy's
// JSON envelope, if it denied the request).
func get(ctx context.Context, c *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
		return 0, fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return io.Copy(io.Discard, resp.Body)
}

// throughputResult is one throughput phase: successful requests per second
// over the measured window.
type throughputResult struct {
	Requests  int64   `json:"requests"`
	Seconds   float64 `json:"seconds"`
	ReqPerSec float64 `json:"req_per_sec"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	// CPUPerReqUs is the CPU time (user+system) of the bench process plus
	// the proxy process per successful request in the measured window, µs.
	CPUPerReqUs float64 `json:"cpu_per_req_us"`
	// UpstreamConns is how many connections the upstream accepted during
	// the phase, warm-up included (direct: one per client connection).
	UpstreamConns int64 `json:"upstream_conns"`
}

// paddedCounter keeps each worker's counter on its own cache line.
type paddedCounter struct {
	n atomic.Int64
	_ [56]byte
}

// runThroughput runs conc workers issuing GETs over urls back to back; it
// counts completions and the CPU time cpu reports during [warmup, warmup+dur).
func runThroughput(ctx context.Context, c *http.Client, cpu func() time.Duration, urls []string, conc int, warmup, dur time.Duration) throughputResult {
	var s sliceSum
	s.run(ctx, c, cpu, urls, conc, warmup, dur)
	c.CloseIdleConnections()
	return s.result()
}

// latencyResult is the one-client keep-alive latency distribution.
type latencyResult struct {
	Samples  int     `json:"samples"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
}

// runLatency issues sequential GETs on one keep-alive connection, records
// each request's duration (headers sent to body drained) after warmup, and
// computes exact nearest-rank percentiles.
func runLatency(ctx context.Context, c *http.Client, urls []string, warmup, dur time.Duration) latencyResult {
	var errs errRecorder
	samples := make([]time.Duration, 0, int(dur.Seconds()*40000)+1024)
	start := time.Now()
	measureFrom, end := start.Add(warmup), start.Add(warmup+dur)
	for i := 0; ctx.Err() == nil; i++ {
		t0 := time.Now()
		if !t0.Before(end) {
			break
		}
		_, err := get(ctx, c, urls[i%len(urls)])
		d := time.Since(t0)
		if err != nil {
			if ctx.Err() == nil {
				errs.record(err)
			}
			continue
		}
		if !t0.Before(measureFrom) {
			samples = append(samples, d)
		}
	}
	c.CloseIdleConnections()
	r := latencyResult{Samples: len(samples)}
	r.Errors, r.FirstErr = errs.snapshot()
	if len(samples) > 0 {
		slices.Sort(samples)
		r.P50ms = ms(percentile(samples, 0.50))
		r.P99ms = ms(percentile(samples, 0.99))
	}
	return r
}

// percentile is the exact nearest-rank q-quantile of sorted (non-empty).
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// streamResult is one large download.
type streamResult struct {
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	MBps     float64 `json:"mb_per_sec"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
}

// runStream warms a keep-alive connection with one small GET, then times
// one download of the blob into a 256 KiB buffer, from request to last byte.
func runStream(ctx context.Context, c *http.Client, warmURL, blobURL string, want int64) streamResult {
	defer c.CloseIdleConnections()
	if _, err := get(ctx, c, warmURL); err != nil {
		return streamResult{Errors: 1, FirstErr: err.Error()}
	}
	t0 := time.Now()
	n, err := download(ctx, c, blobURL)
	r := streamResult{Bytes: n, Seconds: time.Since(t0).Seconds()}
	if err == nil && n != want {
		err = fmt.Errorf("GET %s: got %d bytes, want %d", blobURL, n, want)
	}
	if err != nil {
		r.Errors, r.FirstErr = 1, err.Error()
		return r
	}
	r.MBps = float64(n) / 1e6 / r.Seconds
	return r
}

// download reads url's body through a fixed buffer, as a streaming consumer
// would, and returns the byte count.
func download(ctx context.Context, c *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
		return 0, fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	buf := make([]byte, 256<<10)
	var total int64
	for {
		n, err := resp.Body.Read(buf)
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
