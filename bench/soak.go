package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// soakSample is the daemon's footprint at one moment.
type soakSample struct {
	goroutines, threads, fds int
	rssKiB                   int64
	anonKiB                  int64 // RssAnon: heap, stacks; not the binary's mapped pages
}

// goroutines reads go_goroutines from the daemon's /metrics (on its admin
// socket).
func goroutines(c *http.Client) (int, error) {
	resp, err := c.Get("http://aileron/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no go_goroutines in /metrics")
}

// adminClient talks HTTP over the daemon's admin socket.
func adminClient(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
}

// readFootprint reads pid's threads, open descriptors and resident memory
// from /proc.
func readFootprint(pid int) (soakSample, error) {
	var s soakSample
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "Threads:":
			s.threads, _ = strconv.Atoi(f[1])
		case "VmRSS:":
			s.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "RssAnon:":
			s.anonKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	s.fds = len(ents)
	return s, err
}

// soakMix is one kind of traffic the soak keeps going.
type soakMix struct {
	name   string
	conc   int
	method string
	path   string
	h2     bool
	want   []int // the statuses an answer may have
}

func soakMixes() []soakMix {
	return []soakMix{
		{"h1 allowed, credential injected", 4, "GET", "/v1/secure/{id}?size=1024", false, []int{200}},
		{"h2 allowed", 16, "GET", "/v1/items/{id}?size=1024", true, []int{200}},
		{"h1 denied", 2, "GET", "/v1/nothing/{id}", false, []int{403}},
		{"h2 denied", 2, "POST", "/v1/items/{id}", true, []int{403}},
		// held for approval.hold, then approval_pending; past the session's
		// pending approvals, approval_limit
		{"h1 held, never approved", 2, "DELETE", "/v1/items/{id}", false, []int{403, 429}},
		{"h2 held, never approved", 2, "DELETE", "/v1/items/{id}", true, []int{403, 429}},
	}
}

// runSoak keeps the mixes going against one daemon for o.soak, samples its
// footprint every few seconds, and fails if goroutine-bearing threads,
// descriptors or resident memory grow from the first quarter of the run
// to the last (medians, with slack for noise), or if any answer was not
// the expected one.
func runSoak(ctx context.Context, o options, stdout, stderr io.Writer) error {
	e, stop, err := startSplit(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer stop()
	pem, err := os.ReadFile(e.sessRoots)
	if err != nil {
		return err
	}
	pool, err := loadPool(pem, e.sessRoots)
	if err != nil {
		return err
	}
	proxyURL, err := url.Parse(e.proxy)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.soak)
	defer cancel()
	var wg sync.WaitGroup
	var done, wrong atomic.Int64
	var firstWrong atomic.Value
	for _, m := range soakMixes() {
		tr := &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: m.h2, MaxIdleConnsPerHost: m.conc}
		c := &http.Client{Transport: tr}
		for range m.conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ctx.Err() == nil; n++ {
					u := "https://" + e.upAddr + strings.Replace(m.path, "{id}", strconv.Itoa(n%1000), 1)
					req, _ := http.NewRequestWithContext(ctx, m.method, u, nil)
					resp, err := c.Do(req)
					if ctx.Err() != nil {
						return
					}
					switch {
					case err != nil:
						firstWrong.CompareAndSwap(nil, m.name+": "+err.Error())
						wrong.Add(1)
					case !slices.Contains(m.want, resp.StatusCode):
						firstWrong.CompareAndSwap(nil, fmt.Sprintf("%s: status %d, want one of %v", m.name, resp.StatusCode, m.want))
						wrong.Add(1)
					}
					if resp != nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
					done.Add(1)
				}
			}()
		}
	}
	samples := sampleFootprint(ctx, e.d.cmd.Process.Pid, adminClient(filepath.Join(e.d.home, "admin.sock")), 5*time.Second)
	wg.Wait()
	return reportSoak(stdout, o, samples, done.Load(), wrong.Load(), firstWrong.Load())
}

// sampleFootprint samples pid every period until ctx ends.
func sampleFootprint(ctx context.Context, pid int, admin *http.Client, period time.Duration) []soakSample {
	var out []soakSample
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
			s, err := readFootprint(pid)
			if g, gerr := goroutines(admin); err == nil && gerr == nil {
				s.goroutines = g
				out = append(out, s)
			}
		}
	}
}

// reportSoak prints the footprint at the start and end of the run and
// fails when it grew or answers were wrong.
func reportSoak(w io.Writer, o options, s []soakSample, done, wrong int64, first any) error {
	if len(s) < 8 {
		return fmt.Errorf("soak: %d samples; run it for at least 40s", len(s))
	}
	q := len(s) / 4
	med := func(part []soakSample, f func(soakSample) int64) int64 {
		v := make([]int64, 0, len(part))
		for _, x := range part {
			v = append(v, f(x))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	var fails []string
	for _, m := range []struct {
		name  string
		f     func(soakSample) int64
		slack func(int64) int64
	}{
		{"goroutines", func(x soakSample) int64 { return int64(x.goroutines) }, func(v int64) int64 { return v/4 + 16 }},
		{"threads", func(x soakSample) int64 { return int64(x.threads) }, func(v int64) int64 { return v/4 + 4 }},
		{"descriptors", func(x soakSample) int64 { return int64(x.fds) }, func(v int64) int64 { return v/4 + 16 }},
		{"resident KiB", func(x soakSample) int64 { return x.rssKiB }, func(v int64) int64 { return v/4 + 8192 }},
	} {
		a, b := med(s[:q], m.f), med(s[len(s)-q:], m.f)
		fmt.Fprintf(w, "soak %-13s first quarter %8d, last quarter %8d (%+.0f%%)\n", m.name, a, b, 100*float64(b-a)/float64(max(a, 1)))
		if b > a+m.slack(a) {
			fails = append(fails, fmt.Sprintf("%s grew from %d to %d", m.name, a, b))
		}
	}
	fmt.Fprintf(w, "soak: %s, %d requests (%.0f/s), %d with a wrong answer\n", o.soak, done, float64(done)/o.soak.Seconds(), wrong)
	if wrong > 0 {
		fails = append(fails, fmt.Sprintf("%d wrong answers; first: %v", wrong, first))
	}
	if len(fails) > 0 {
		return fmt.Errorf("soak failed: %s", strings.Join(fails, "; "))
	}
	return nil
}
