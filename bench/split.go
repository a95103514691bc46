package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// splitRow is one load shape measured direct and through aileron.
type splitRow struct {
	name      string
	size      int    // response body bytes
	conc      int    // concurrent requests
	keepAlive bool   // false: a new connection (and CONNECT) per request
	h2        bool   // HTTP/2, all requests on one connection
	grpc      string // a gRPC row (grpcUnary, grpcStream): one connection, conc calls at a time
	sse       bool   // the streaming row (sse.go): figures per event, not per request
}

func splitRows() []splitRow {
	return []splitRow{
		{name: "keep-alive 1 KiB c=1", size: 1 << 10, conc: 1, keepAlive: true},
		{name: "keep-alive 1 KiB c=8", size: 1 << 10, conc: 8, keepAlive: true},
		{name: "keep-alive 1 KiB c=16", size: 1 << 10, conc: 16, keepAlive: true},
		{name: "keep-alive 100 KiB c=8", size: 100 << 10, conc: 8, keepAlive: true},
		{name: "new connection 1 KiB c=8", size: 1 << 10, conc: 8},
		{name: "h2 100 streams 1 KiB", size: 1 << 10, conc: 100, keepAlive: true, h2: true},
		{name: "gRPC unary 1 KiB c=16", size: 1 << 10, conc: 16, keepAlive: true, grpc: grpcUnary},
		{name: fmt.Sprintf("gRPC stream %d×1 KiB c=4", grpcStreamMsgs), size: 1 << 10, conc: 4, keepAlive: true, grpc: grpcStream},
		{name: fmt.Sprintf("SSE %d events c=4", sseEvents), conc: 4, keepAlive: true, sse: true},
	}
}

// splitSample is one round of one row through one path: requests a
// second, and CPU per request of each process.
type splitSample struct {
	rps                   float64
	client, upstream, prx time.Duration // per request
	p50                   float64       // ms, c=1 rows only
}

// splitEnv is the separate-process setup: the upstream and the daemon.
type splitEnv struct {
	self, dir, roots string
	upAddr, grpcAddr string
	apiKey           string // the credential's secret (a direct gRPC client sends it itself)
	upPID            int
	d                *daemon
	proxy            string // session proxy URL
	sessRoots        string // session CA file
}

// runSplit measures every row in rounds, direct, through aileron and
// through each running peer, the order turning each round, and prints
// medians with their spread. Its headline is the proxy's own CPU per request
// against what the client and the upstream spend per request in the direct
// run, for aileron and next to it for each peer (peers.go).
func runSplit(ctx context.Context, o options, stdout, stderr io.Writer) error {
	e, stop, err := startSplit(ctx, o, stderr)
	if err != nil {
		return err
	}
	defer stop()
	var peers []*peer
	if o.peers {
		if peers, err = e.startPeers(ctx, o, stderr); err != nil {
			return err
		}
		defer stopPeers(peers)
	}
	fmt.Fprintf(stdout, "\nSeparate processes (client, upstream, daemon%s), %s of %s each, %s:\n", peerNames(peers), plural(o.rounds, "round"), o.splitDur, roundsShown(o.rounds))
	printSplitHeader(stdout, peers)
	ran, sse := 0, false
	for _, row := range splitRows() {
		if !strings.Contains(strings.ToLower(row.name), strings.ToLower(o.rows)) {
			continue
		}
		ran, sse = ran+1, sse || row.sse
		paths := []splitPath{{name: "direct", roots: e.roots}, e.aileronPath()}
		for _, p := range peers {
			if p.cell(row) == "" {
				paths = append(paths, p.splitPath)
			}
		}
		samples, err := e.rounds(ctx, o, row, paths, peers)
		if err != nil {
			return fmt.Errorf("%s: %w", row.name, err)
		}
		printSplitRow(stdout, row, samples, peers)
	}
	if ran == 0 {
		return fmt.Errorf("--rows %q names no row", o.rows)
	}
	printSplitLegend(stdout, sse)
	printPeerNotes(stdout, peers)
	if o.streamMiB <= 0 {
		return nil
	}
	return e.streams(ctx, o, stdout)
}

// rounds samples row o.rounds times through every path, the first path of
// each round being the next one along, and returns the samples by path
// name. A failing sample through an optional peer is kept as that peer's
// error (its cells then say ERR); any other failure is the run's.
func (e *splitEnv) rounds(ctx context.Context, o options, row splitRow, paths []splitPath, peers []*peer) (map[string][]splitSample, error) {
	samples := map[string][]splitSample{}
	for r := range o.rounds {
		for i := range paths {
			p := paths[(i+r)%len(paths)]
			pe := peerNamed(peers, p.name)
			if pe != nil && pe.failed[row.name] != "" {
				continue
			}
			s, err := e.sample(ctx, o, row, p)
			if err != nil {
				if pe != nil && pe.optional {
					pe.failed[row.name] = err.Error()
					continue
				}
				return nil, fmt.Errorf("%s: %w", p.name, err)
			}
			samples[p.name] = append(samples[p.name], s)
		}
	}
	return samples, nil
}

// aileronPath is the daemon's session as a split path.
func (e *splitEnv) aileronPath() splitPath {
	return splitPath{name: aileronTargetName, proxy: e.proxy, roots: e.sessRoots, pid: e.d.cmd.Process.Pid}
}

// streams moves o.streamMiB each way, direct and through aileron, and
// reports the speed against direct and the daemon's largest resident
// memory while the body went through.
func (e *splitEnv) streams(ctx context.Context, o options, w io.Writer) error {
	size := o.streamMiB << 20
	for _, dir := range []struct{ name, path, flag string }{
		{"down", "/v1/blob?size=" + strconv.FormatInt(size, 10), "-download"},
		{"up", "/v1/upload", "-upload=" + strconv.FormatInt(size, 10)},
	} {
		var secs [2]float64
		var peak, base soakSample
		if s, err := readFootprint(e.d.cmd.Process.Pid); err == nil {
			base = s
		}
		for i, viaProxy := range []bool{false, true} {
			args := []string{"-roots", e.roots}
			if viaProxy {
				args = []string{"-roots", e.sessRoots, "-proxy", e.proxy}
			}
			args = append(args, "-url", "https://"+e.upAddr+dir.path, dir.flag)
			elapsed, most, err := e.transfer(ctx, args, viaProxy)
			if err != nil {
				return fmt.Errorf("stream %s: %w", dir.name, err)
			}
			secs[i] = elapsed.Seconds()
			peak.rssKiB, peak.anonKiB = max(peak.rssKiB, most.rssKiB), max(peak.anonKiB, most.anonKiB)
		}
		mbps := func(s float64) float64 { return float64(size) / 1e6 / s }
		fmt.Fprintf(w, "stream %d MiB %-4s aileron %.0f MB/s = %.2f of direct (%.0f MB/s); daemon resident memory %d MiB before, at most %d MiB while it streamed "+
			"(budget < 32 MiB), of which anonymous (heap, stacks) %d MiB before, at most %d MiB\n",
			o.streamMiB, dir.name, mbps(secs[1]), secs[0]/secs[1], mbps(secs[0]), base.rssKiB>>10, peak.rssKiB>>10, base.anonKiB>>10, peak.anonKiB>>10)
	}
	return nil
}

// transfer runs one streaming client process and returns how long the
// body took and, through the daemon, its largest VmRSS and RssAnon (KiB)
// meanwhile.
func (e *splitEnv) transfer(ctx context.Context, args []string, viaProxy bool) (time.Duration, soakSample, error) {
	cmd := exec.CommandContext(ctx, e.self, append([]string{roleClient}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, soakSample{}, err
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return 0, soakSample{}, err
	}
	defer func() { _ = cmd.Wait() }()
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || strings.TrimSpace(line) != "start" {
		return 0, soakSample{}, fmt.Errorf("client process said %q (%v)\n%s", line, err, errb.String())
	}
	t0 := time.Now()
	stop := make(chan struct{})
	peak := make(chan soakSample, 1)
	go func() {
		var m soakSample
		for {
			if s, err := readFootprint(e.d.cmd.Process.Pid); err == nil && viaProxy {
				m.rssKiB, m.anonKiB = max(m.rssKiB, s.rssKiB), max(m.anonKiB, s.anonKiB)
			}
			select {
			case <-stop:
				peak <- m
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	line, err := br.ReadString('\n')
	elapsed := time.Since(t0)
	close(stop)
	m := <-peak
	if err != nil || strings.TrimSpace(line) != "stop" {
		return 0, soakSample{}, fmt.Errorf("client process said %q (%v)\n%s", line, err, errb.String())
	}
	var run clientRun
	if err := json.NewDecoder(br).Decode(&run); err != nil || run.Errors > 0 {
		return 0, soakSample{}, fmt.Errorf("client: %v %s", err, run.FirstErr)
	}
	return elapsed, m, nil
}

// splitColumn is the width of a figure's column in the split table.
const splitColumn = 22

// width is the width of p's columns: a figure's, or just its name and
// why it is not measured when it is absent.
func (p *peer) width() int {
	if p.absent == "" {
		return splitColumn
	}
	return max(utf8.RuneCountInString(p.name), utf8.RuneCountInString(p.absent))
}

// printSplitHeader prints the table's heading: without peers the three
// columns of aileron; with peers each figure's column for aileron and then
// one per peer.
func printSplitHeader(w io.Writer, peers []*peer) {
	const lat = "added p50 (c=1; SSE)"
	if len(peers) == 0 {
		fmt.Fprintf(w, "%-26s %22s %22s %22s\n", "row", "proxy CPU/req ÷ direct", "throughput ÷ direct", lat)
		return
	}
	group := splitColumn
	names := fmt.Sprintf(" %*s", splitColumn, aileronTargetName)
	for _, p := range peers {
		group += 1 + p.width()
		names += fmt.Sprintf(" %*s", p.width(), p.name)
	}
	fmt.Fprintf(w, "%-26s %*s %*s %22s\n", "", group, "proxy CPU/req ÷ direct", group, "throughput ÷ direct", "")
	fmt.Fprintf(w, "%-26s%s%s %22s\n", "row", names, names, lat)
}

// printSplitRow prints one row: aileron's ratios to direct and, after
// each, every peer's.
func printSplitRow(w io.Writer, row splitRow, samples map[string][]splitSample, peers []*peer) {
	direct := samples["direct"]
	cpu, tput, lat := splitRatios(direct, samples[aileronTargetName])
	cpuCells, tputCells := []string{spread(cpu, "%.2f×")}, []string{spread(tput, "%.2f")}
	widths := []int{splitColumn}
	for _, p := range peers {
		widths = append(widths, p.width())
		if c := p.cell(row); c != "" {
			cpuCells, tputCells = append(cpuCells, c), append(tputCells, c)
			continue
		}
		pc, pt, _ := splitRatios(direct, samples[p.name])
		cpuCells, tputCells = append(cpuCells, spread(pc, "%.2f×")), append(tputCells, spread(pt, "%.2f"))
	}
	latText := "-"
	if row.conc == 1 || row.sse {
		latText = spread(lat, "%.2f ms")
	}
	fmt.Fprintf(w, "%-26s", row.name)
	for i, c := range append(cpuCells, tputCells...) {
		fmt.Fprintf(w, " %*s", widths[i%len(widths)], c)
	}
	fmt.Fprintf(w, " %*s\n", splitColumn, latText)
}

// splitRatios pairs each round through a proxy with the same round direct:
// the proxy's CPU per request over direct's client + upstream, throughput
// over direct, and p50 through the proxy minus direct.
func splitRatios(direct, through []splitSample) (cpu, tput, lat []float64) {
	for i := range min(len(direct), len(through)) {
		d, t := direct[i], through[i]
		if base := d.client + d.upstream; base > 0 {
			cpu = append(cpu, float64(t.prx)/float64(base))
		}
		if d.rps > 0 {
			tput = append(tput, t.rps/d.rps)
		}
		lat = append(lat, t.p50-d.p50)
	}
	return cpu, tput, lat
}

// printSplitLegend says what each column of the split table is; the SSE
// line only when the SSE row ran.
func printSplitLegend(w io.Writer, sse bool) {
	fmt.Fprintln(w, "proxy CPU/req ÷ direct: each proxy's CPU per request over the same round's direct client + upstream CPU per request. "+
		"About 1.0× is the TLS and HTTP work of both ends done again; under it the proxy is spared part of that work "+
		"(on the new-connection row aileron keeps its upstream connections: one server-side handshake per request where direct does both sides).")
	fmt.Fprintln(w, "throughput ÷ direct: requests a second through each proxy over direct's, same round (1.00: as fast as no proxy). "+
		"The proxy is a third busy process on the same cores, so a ratio well under 1 is expected; compare proxies, not one against 1.00.")
	fmt.Fprintln(w, "added p50: aileron's median latency minus direct's, on the one-client row and, per event, the SSE row (\"-\" on the others).")
	if sse {
		fmt.Fprintln(w, "The SSE row counts events, not requests: CPU per event, events a second, and the added median time an event takes from the upstream to the client (usage read from the stream as it passes).")
	}
}

// plural is "n word" or "n words".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// roundsShown says what a cell holds: the one round's figure, or the
// median and spread of several.
func roundsShown(rounds int) string {
	if rounds == 1 {
		return "one round's figures (no spread)"
	}
	return "medians [min–max]"
}

// spread is "median [min–max]" in format f, or just the figure when there
// is one.
func spread(v []float64, f string) string {
	if len(v) == 0 {
		return "n/a"
	}
	if len(v) == 1 {
		return fmt.Sprintf(f, v[0])
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s[len(s)/2], s[0], s[len(s)-1])
}

// startSplit starts the upstream process and a daemon in front of it,
// with the bench connector, the credential and a session.
func startSplit(ctx context.Context, o options, stderr io.Writer) (*splitEnv, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "aileron-bench-split-")
	if err != nil {
		return nil, nil, err
	}
	e := &splitEnv{self: self, dir: dir, roots: filepath.Join(dir, "upstream-root.pem")}
	var cleanup []func()
	stop := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		_ = os.RemoveAll(dir)
	}
	fail := func(err error) (*splitEnv, func(), error) { stop(); return nil, nil, err }
	pki, err := newUpstreamPKI(net.ParseIP(upstreamIP))
	if err != nil {
		return fail(err)
	}
	leaf := filepath.Join(dir, "leaf.pem")
	if err := errors.Join(os.WriteFile(e.roots, pki.rootPEM, 0o600), writeLeafPEM(pki, leaf)); err != nil {
		return fail(err)
	}
	apiKey := rand.Text()
	up := exec.Command(self, roleUpstream, upstreamIP, leaf, apiKey)
	upIn, _ := up.StdinPipe()
	upOut, _ := up.StdoutPipe()
	up.Stderr = stderr
	if err := up.Start(); err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = upIn.Close(); _ = up.Wait() })
	upLines := bufio.NewReader(upOut)
	line, err := upLines.ReadString('\n')
	grpcLine, gerr := upLines.ReadString('\n')
	if err = errors.Join(err, gerr); err != nil {
		return fail(fmt.Errorf("upstream process: %w", err))
	}
	e.upAddr, e.grpcAddr, e.apiKey, e.upPID = strings.TrimSpace(line), strings.TrimSpace(grpcLine), apiKey, up.Process.Pid
	var extra []string
	if o.profile != "" {
		extra = []string{"--cpu-profile", o.profile}
	}
	if e.d, err = startDaemon(ctx, o.aileron, dir, e.roots, upstreamIP, o.logLevel, true, extra...); err != nil {
		return fail(err)
	}
	cleanup = append(cleanup, func() { _ = e.d.stop(10 * time.Second) })
	if _, err := e.d.installSpec(ctx, e.upAddr, e.grpcAddr); err != nil {
		return fail(err)
	}
	if err := e.d.setCredential(ctx, apiKey); err != nil {
		return fail(err)
	}
	s, err := e.d.createSession(ctx)
	if err != nil {
		return fail(err)
	}
	e.proxy, e.sessRoots = s.ProxyURL, s.CACertPath
	fmt.Fprintf(stderr, "bench: split phases: upstream process %d at %s, daemon %d\n", e.upPID, e.upAddr, e.d.cmd.Process.Pid)
	return e, stop, nil
}

// sample runs one client process for row, direct or through the daemon
// (with the credential injected on /v1/secure), and reads every process's
// CPU over the measured window.
func (e *splitEnv) sample(ctx context.Context, o options, row splitRow, p splitPath) (splitSample, error) {
	viaProxy := p.proxy != ""
	path, args := "/v1/items/{id}", []string{"-roots", p.roots}
	if viaProxy {
		path, args = "/v1/secure/{id}", []string{"-roots", p.roots, "-proxy", p.proxy}
	}
	args = append(args, "-conc", strconv.Itoa(row.conc), "-duration", o.splitDur.String())
	switch {
	case row.sse:
		args = append(args, "-url", "https://"+e.upAddr+"/v1/messages", "-sse")
		if !viaProxy {
			args = append(args, "-key", e.apiKey) // through the daemon it is injected
		}
	case row.grpc != "":
		args = append(args, "-url", "https://"+e.grpcAddr, "-grpc", row.grpc, "-size", strconv.Itoa(row.size))
		if !viaProxy {
			args = append(args, "-key", e.apiKey) // through the daemon it is injected
		}
	default:
		args = append(args, "-url", "https://"+e.upAddr+path+"?size="+strconv.Itoa(row.size),
			"-keepalive="+strconv.FormatBool(row.keepAlive), "-h2="+strconv.FormatBool(row.h2))
	}
	cmd := exec.CommandContext(ctx, e.self, append([]string{roleClient}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return splitSample{}, err
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		return splitSample{}, err
	}
	defer func() { _ = cmd.Wait() }()
	br := bufio.NewReader(out)
	cpus := func() [3]time.Duration {
		c, _ := procCPU(cmd.Process.Pid)
		u, _ := procCPU(e.upPID)
		var d time.Duration
		if viaProxy {
			d, _ = procCPU(p.pid)
		}
		return [3]time.Duration{c, u, d}
	}
	var before, after [3]time.Duration
	var t0 time.Time
	var elapsed time.Duration
	for _, want := range []string{"start", "stop"} {
		line, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			return splitSample{}, fmt.Errorf("client process said %q (%v), want %s\n%s", line, err, want, errb.String())
		}
		if want == "start" {
			before, t0 = cpus(), time.Now()
		} else {
			after, elapsed = cpus(), time.Since(t0)
		}
	}
	var run clientRun
	if err := json.NewDecoder(br).Decode(&run); err != nil {
		return splitSample{}, fmt.Errorf("client result: %w", err)
	}
	if run.Errors > 0 || run.Requests == 0 {
		return splitSample{}, fmt.Errorf("%d requests failed, %d succeeded; first: %s", run.Errors, run.Requests, run.FirstErr)
	}
	per := func(i int) time.Duration { return (after[i] - before[i]) / time.Duration(run.Requests) }
	s := splitSample{rps: float64(run.Requests) / elapsed.Seconds(), client: per(0), upstream: per(1), p50: run.P50MS}
	if viaProxy {
		s.prx = per(2)
	}
	return s, nil
}
