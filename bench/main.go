package main

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aileronhq/aileron/dataplane"
)

// upstreamIP is the loopback address the upstream listens on. It is an IP
// literal everywhere, so no DNS is involved in any run.
const upstreamIP = "127.0.0.2"

// errPhaseFailed reports that requests failed in a direct or aileron phase,
// which makes the printed figures meaningless.
var errPhaseFailed = errors.New("requests failed during the run (see notes above)")

// options are the command-line flags.
type options struct {
	aileron  string
	duration time.Duration
	warmup   time.Duration
	conc     int
	mitmdump string
	jsonOut  bool
	blobMiB  int64
	keepTemp bool
	logLevel string
	auditOff bool
	fleet    bool // the two-node row (fleet.go)
	// The separate-process phases (split.go).
	split     bool
	splitOnly bool
	rounds    int
	splitDur  time.Duration
	profile   string        // CPU profile of the split phases' daemon
	rows      string        // only the separate-process rows whose name contains this
	soak      time.Duration // run the soak instead of the bench (soak.go)
	streamMiB int64         // body moved each way in the separate-process phases
	peers     bool          // the separate-process table's peer columns (peers.go)
}

func main() {
	if ok, err := runRole(os.Args[1:]); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage: %s [flags]\n\n"+
			"Measures aileron against direct calls to a local upstream (loopback only). First table: client,\n"+
			"upstream and daemon as separate processes (\"split\"), beside peer proxies (--peers), then bodies\n"+
			"streamed each way. Second table: one bench process against direct, aileron, aileron+inject,\n"+
			"audit off and mitmdump.\n"+
			"--soak runs neither. See bench/README.md.\n\nFlags:\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.StringVar(&o.aileron, "aileron", "bin/aileron", "path to the aileron binary")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "second table: measured time per phase and target")
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "second table: unmeasured warm-up before each phase")
	flag.IntVar(&o.conc, "concurrency", 8, "second table: concurrent clients in the throughput phases")
	flag.StringVar(&o.mitmdump, "mitmdump", "", "path to mitmdump: the second table's mitmdump column (empty: none) and the first table's mitmdump peer (empty: mitmdump on PATH, if any)")
	flag.BoolVar(&o.jsonOut, "json", false, "second table: also print the results as JSON")
	flag.Int64Var(&o.blobMiB, "blob-mib", 256, "second table: size of the streamed body in MiB")
	flag.StringVar(&o.logLevel, "log-level", "warn", "both tables: the daemons' log.level (the daemon's own default is info, which also writes a line per allowed request)")
	flag.BoolVar(&o.keepTemp, "keep-temp", false, "keep the temp dir (daemon log, home) for debugging")
	flag.BoolVar(&o.auditOff, "audit-off", true, "second table: also measure keep-alive through a second daemon with audit.enabled false (audit's cost); -audit-off=false skips it")
	flag.BoolVar(&o.fleet, "fleet", true, "second table: also measure two daemons on a private Postgres server (the two-node rows; skipped with a note without the postgresql package)")
	flag.BoolVar(&o.split, "split", true, "first measure with client, upstream and daemon as separate processes (the first table; CPU of each from /proc)")
	flag.BoolVar(&o.splitOnly, "split-only", false, "only the first table (separate processes) and its streams")
	flag.IntVar(&o.rounds, "rounds", 5, "first table: rounds of each row, direct, aileron and each peer interleaved (the path that goes first turns each round)")
	flag.DurationVar(&o.splitDur, "split-duration", 2*time.Second, "first table: measured time of each round")
	flag.DurationVar(&o.soak, "soak", 0, "instead of the bench, keep mixed h1/h2 allowed, denied and held traffic going this long and fail if the daemon's goroutines, threads, descriptors or memory grow")
	flag.Int64Var(&o.streamMiB, "stream-mib", 1024, "first table: MiB moved each way, direct and through aileron, after the rows; 0 skips the streams")
	flag.StringVar(&o.rows, "rows", "", "first table: only the rows whose name contains this, any case (keep-alive, \"c=8\", \"new connection\", h2, grpc)")
	flag.BoolVar(&o.peers, "peers", true, "first table: also measure the peers, each a separate process (a bare goproxy MITM built by the bench; squid with ssl-bump and mitmdump when installed); -peers=false skips them")
	flag.StringVar(&o.profile, "profile", "", "write a CPU profile of the separate-process phases' daemon to this file (go tool pprof)")
	flag.Parse()
	if err := o.check(flag.NArg()); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	switch {
	case o.soak > 0:
		err = runSoak(ctx, o, os.Stdout, os.Stderr)
	case o.splitOnly:
		err = runSplit(ctx, o, os.Stdout, os.Stderr)
	default:
		if o.split {
			err = runSplit(ctx, o, os.Stdout, os.Stderr)
		}
		if err == nil {
			err = run(ctx, o, os.Stdout, os.Stderr)
		}
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// check refuses settings no table can be measured with, naming each
// flag that is out of range; nargs is the count of arguments after the
// flags.
func (o options) check(nargs int) error {
	var errs []error
	for _, c := range []struct {
		bad  bool
		want string
	}{
		{o.conc < 1, "--concurrency must be at least 1"},
		{o.duration <= 0, "--duration must be above 0"},
		{o.warmup < 0, "--warmup must not be negative"},
		{o.blobMiB < 1, "--blob-mib must be at least 1"},
		{o.rounds < 1, "--rounds must be at least 1"},
		{o.splitDur <= 0, "--split-duration must be above 0"},
		{o.streamMiB < 0, "--stream-mib must not be negative (0 skips the streams)"},
		{nargs > 0, "no arguments are taken, only flags (see --help)"},
	} {
		if c.bad {
			errs = append(errs, errors.New(c.want))
		}
	}
	return errors.Join(errs...)
}

// env is what run sets up before measuring: the upstream, the daemon, the
// optional mitmdump and the targets to drive.
type env struct {
	dir     string
	up      *upstream
	d       *daemon
	off     *daemon   // the audit.enabled false daemon, nil when not running
	fleet   *fleetEnv // the two-node fleet on Postgres, nil when not running
	m       *mitm
	targets []target
	notes   []string
	failed  bool // a target was dropped because its first request failed
	// injecting is set once the bench credential is stored in the daemon.
	injecting bool
}

// run sets everything up, measures, tears down and prints the report.
func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	loadStart := loadAverage()
	dir, err := os.MkdirTemp("", "aileron-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	if o.keepTemp {
		fmt.Fprintln(stderr, "bench: keeping temp dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	e, err := setup(ctx, o, dir, stderr)
	if e != nil {
		defer e.up.close()
		if e.m != nil {
			defer e.m.stop(5 * time.Second)
		}
		defer e.stopOff()
		defer func() {
			if e.fleet != nil {
				e.fleet.stop()
			}
		}()
	}
	if err != nil {
		return err
	}
	auditBefore, auditErr := readAuditUsage(filepath.Join(e.d.home, "audit"))
	res := measure(ctx, o, e, stderr)
	if err := ctx.Err(); err != nil {
		_ = e.d.stop(5 * time.Second)
		return fmt.Errorf("interrupted: %w", err)
	}
	res.Notes = append(res.Notes, e.notes...)
	res.failed = res.failed || e.failed
	if n := e.up.keyMismatches.Load(); n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: the upstream answered 401 to %d request(s) to /v1/secure "+
			"that lacked the injected X-Api-Key", injectTargetName, n))
		res.failed = true
	}
	if err := e.d.stop(20 * time.Second); err != nil {
		res.Notes = append(res.Notes, "daemon shutdown: "+err.Error())
	}
	res.Notes = append(res.Notes, e.d.checkNotes(aileronTargetName)...)
	if e.off != nil {
		res.Notes = append(res.Notes, e.stopOff()...)
		res.Notes = append(res.Notes, e.off.secretNotes(e.up.apiKey)...)
	}
	if auditErr != nil {
		res.Notes = append(res.Notes, auditErr.Error())
	} else {
		var notes []string
		res.AuditWritten, notes = e.auditNotes(auditBefore)
		res.Notes = append(res.Notes, notes...)
	}
	if e.injecting {
		res.Notes = append(res.Notes, e.d.secretNotes(e.up.apiKey)...)
	}
	if busy := float64(max(1, runtime.NumCPU()/2)); loadStart > busy {
		res.Notes = append(res.Notes, fmt.Sprintf("load average was %.1f on %d CPUs before the bench started: "+
			"other processes competed for the CPU, so the figures are noisy", loadStart, runtime.NumCPU()))
	}
	printReport(stdout, o, res)
	if o.jsonOut {
		if err := printJSON(stdout, res); err != nil {
			return err
		}
	}
	if res.failed {
		return errPhaseFailed
	}
	return nil
}

// setup starts the upstream, the daemon (with the bench connector and one
// session) and, when asked, mitmdump, and checks one request per target.
// The returned env is non-nil whenever the upstream was started, so the
// caller can tear it down.
func setup(ctx context.Context, o options, dir string, stderr io.Writer) (*env, error) {
	pki, err := newUpstreamPKI(net.ParseIP(upstreamIP))
	if err != nil {
		return nil, err
	}
	rootPath := filepath.Join(dir, "upstream-root.pem")
	if err := os.WriteFile(rootPath, pki.rootPEM, 0o600); err != nil {
		return nil, fmt.Errorf("write upstream root: %w", err)
	}
	up, err := startUpstream(upstreamIP, pki, o.blobMiB<<20, rand.Text())
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, up: up}
	fmt.Fprintf(stderr, "bench: upstream https://%s, starting %s daemon\n", up.addr, o.aileron)
	if e.d, err = startDaemon(ctx, o.aileron, dir, rootPath, upstreamIP, o.logLevel, true); err != nil {
		return e, err
	}
	ail, err := e.aileronTarget(ctx, e.d)
	if err != nil {
		_ = e.d.stop(5 * time.Second)
		return e, fmt.Errorf("%w\n%s", err, e.d.logTail(20))
	}
	e.targets = []target{{name: "direct", roots: pki.rootPool}, ail}
	if inj, ok := e.injectTarget(ctx, ail); ok {
		e.targets = append(e.targets, inj)
	}
	if o.auditOff {
		e.addAuditOff(ctx, o, rootPath, stderr)
	}
	if o.fleet {
		if e.fleet, err = e.startFleet(ctx, o, rootPath, stderr); err != nil {
			e.notes = append(e.notes, "two nodes skipped: "+err.Error())
		}
	}
	if o.mitmdump != "" {
		e.addMitm(ctx, o.mitmdump, rootPath, stderr)
	}
	if err := e.check(ctx); err != nil {
		_ = e.d.stop(5 * time.Second)
		return e, fmt.Errorf("%w\n%s", err, e.d.logTail(20))
	}
	return e, nil
}

// aileronTarget installs the bench connector in d and creates a session.
func (e *env) aileronTarget(ctx context.Context, d *daemon) (target, error) {
	note, err := d.installSpec(ctx, e.up.addr, e.up.addr) // no gRPC server here: its operations go unused
	if err != nil {
		return target{}, err
	}
	if note != "" {
		e.notes = append(e.notes, note)
	}
	s, err := d.createSession(ctx)
	if err != nil {
		return target{}, err
	}
	proxyURL, err := url.Parse(s.ProxyURL)
	if err != nil || proxyURL.Host == "" {
		return target{}, fmt.Errorf("session proxy_url is not a URL (%v)", err)
	}
	caPEM, err := os.ReadFile(s.CACertPath)
	if err != nil {
		return target{}, fmt.Errorf("session ca_cert_path: %w", err)
	}
	pool, err := loadPool(caPEM, s.CACertPath)
	if err != nil {
		return target{}, err
	}
	return target{name: aileronTargetName, proxy: proxyURL, roots: pool, pid: d.cmd.Process.Pid}, nil
}

// stopOff stops the audit-off daemon, if any, and returns its notes; a
// second call only repeats the notes.
func (e *env) stopOff() []string {
	if e.off == nil {
		return nil
	}
	var notes []string
	if err := e.off.stop(20 * time.Second); err != nil {
		notes = append(notes, auditOffTargetName+" daemon shutdown: "+err.Error())
	}
	return append(notes, e.off.checkNotes(auditOffTargetName)...)
}

// injectTarget stores and binds the bench credential and returns the
// aileron target aimed at /v1/secure/{id}. When the daemon cannot store or
// bind it (a build without credential support), ok is false and a note says
// the injection phase was skipped; the rest of the bench runs as usual.
func (e *env) injectTarget(ctx context.Context, ail target) (t target, ok bool) {
	if err := e.d.setCredential(ctx, e.up.apiKey); err != nil {
		e.notes = append(e.notes, injectTargetName+" skipped: could not store and bind the bench credential "+
			"(does this aileron build support `aileron credential set/bind`?): "+err.Error())
		return target{}, false
	}
	e.injecting = true
	ail.name, ail.secure = injectTargetName, true
	return ail, true
}

// addMitm starts mitmdump and adds it as a target; a failure becomes a
// note and the bench carries on without the mitmdump column.
func (e *env) addMitm(ctx context.Context, path, rootPath string, stderr io.Writer) {
	fmt.Fprintln(stderr, "bench: starting", path)
	m, err := startMitm(ctx, path, e.dir, rootPath)
	if err != nil {
		e.notes = append(e.notes, "mitmdump skipped: "+err.Error())
		return
	}
	caPEM, err := os.ReadFile(m.caPath)
	if err == nil {
		var pool *x509.CertPool
		if pool, err = loadPool(caPEM, m.caPath); err == nil {
			e.m = m
			e.targets = append(e.targets, target{name: "mitmdump", proxy: &url.URL{Scheme: "http", Host: m.addr}, roots: pool, pid: m.cmd.Process.Pid})
			return
		}
	}
	m.stop(5 * time.Second)
	e.notes = append(e.notes, "mitmdump skipped: "+err.Error())
}

// check makes one request per target. A failing direct or aileron target is
// an error; a failing mitmdump is dropped with a note; a failing
// aileron+inject is dropped with a note and fails the run (its credential
// was stored and bound, so injection itself is broken). It also notes an
// aileron response without the contract's X-Aileron-Audit-Id header.
func (e *env) check(ctx context.Context) error {
	kept := e.targets[:0]
	for _, t := range e.targets {
		hdr, err := checkOne(ctx, t, e.up.urlFor(t, 1))
		if err == nil {
			if t.name == "aileron" && hdr.Get(dataplane.HeaderAuditID) == "" {
				e.notes = append(e.notes, "contract: an allowed response through aileron lacks the X-Aileron-Audit-Id header")
			}
			kept = append(kept, t)
			continue
		}
		if t.name == injectTargetName {
			e.notes = append(e.notes, injectTargetName+" dropped: first request failed although the credential is bound: "+err.Error())
			e.failed = true
			continue
		}
		if t.name != "mitmdump" {
			return fmt.Errorf("%s: first request failed: %w", t.name, err)
		}
		e.notes = append(e.notes, "mitmdump skipped: first request failed: "+err.Error())
		e.m.stop(5 * time.Second)
		e.m = nil
	}
	e.targets = kept
	return nil
}

// checkOne GETs url through t and returns the response header; a status
// other than 200 is an error carrying the start of the body.
func checkOne(ctx context.Context, t target, url string) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c := t.client(1, true)
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 400))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d: %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return resp.Header, nil
}

// measure runs every phase, each phase for every target in turn, so the
// targets of one row are measured close together in time.
func measure(ctx context.Context, o options, e *env, stderr io.Writer) results {
	res := results{
		Duration: o.duration.String(), Warmup: o.warmup.String(), Concurrency: o.conc,
		BlobBytes: o.blobMiB << 20, GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		Upstream: "https://" + e.up.addr,
	}
	items, secure := make([]string, 64), make([]string, 64)
	for i := range items {
		items[i], secure[i] = e.up.itemURL(i+1), e.up.secureURL(i+1)
	}
	urlsFor := func(t target) []string {
		if t.secure {
			return secure
		}
		return items
	}
	res.Targets = make([]targetResult, len(e.targets))
	for i, t := range e.targets {
		res.Targets[i].Name = t.name
	}
	// phase runs f for every target; allTargets false leaves out the
	// injection target, which only measures keep-alive and latency. The
	// audit-off target is measured with aileron, in its keep-alive phase.
	off := slices.IndexFunc(e.targets, func(t target) bool { return t.name == auditOffTargetName })
	phase := func(name string, allTargets bool, f func(t target, r *targetResult)) {
		for i, t := range e.targets {
			if ctx.Err() != nil {
				return
			}
			if i == off {
				continue
			}
			if t.secure && !allTargets {
				continue
			}
			fmt.Fprintf(stderr, "bench: %-14s %s\n", name, t.name)
			f(t, &res.Targets[i])
		}
	}
	phase("keep-alive", true, func(t target, r *targetResult) {
		c0 := e.up.conns.Load()
		if t.name == aileronTargetName && off >= 0 {
			fmt.Fprintf(stderr, "bench: %-14s %s, interleaved with %s\n", "keep-alive", auditOffTargetName, t.name)
			r.KeepAlive, res.Targets[off].KeepAlive = runInterleaved(ctx, t, e.targets[off], items, o.conc, o.warmup, o.duration, e.up.conns)
			return
		}
		r.KeepAlive = runThroughput(ctx, t.client(o.conc, true), t.cpu, urlsFor(t), o.conc, o.warmup, o.duration)
		r.KeepAlive.UpstreamConns = e.up.conns.Load() - c0
	})
	phase("new-connection", false, func(t target, r *targetResult) {
		c0 := e.up.conns.Load()
		r.NewConn = runThroughput(ctx, t.client(o.conc, false), t.cpu, items, o.conc, o.warmup, o.duration)
		r.NewConn.UpstreamConns = e.up.conns.Load() - c0
	})
	phase("latency", true, func(t target, r *targetResult) {
		r.Latency = runLatency(ctx, t.client(1, true), urlsFor(t), o.warmup, o.duration)
	})
	phase("stream", false, func(t target, r *targetResult) {
		r.Stream = runStream(ctx, t.client(1, true), items[0], e.up.blobURL(), e.up.blobSize)
	})
	if i := slices.IndexFunc(e.targets, func(t target) bool { return t.name == aileronTargetName }); e.fleet != nil && i >= 0 && ctx.Err() == nil {
		fr, err := e.measureFleet(ctx, o, e.fleet, e.targets[i], stderr)
		if err != nil {
			res.Notes = append(res.Notes, "two nodes: "+err.Error())
		} else {
			res.Fleet = &fr
			res.Notes = append(res.Notes, fleetNote(&fr))
		}
	}
	e.recordRSS(&res)
	res.finish()
	return res
}

// recordRSS reads the proxies' peak RSS after the run.
func (e *env) recordRSS(res *results) {
	for i := range res.Targets {
		pid := 0
		switch res.Targets[i].Name {
		case "aileron":
			pid = e.d.cmd.Process.Pid
		case "mitmdump":
			pid = e.m.cmd.Process.Pid
		}
		if pid == 0 {
			continue
		}
		kib, err := peakRSSKiB(pid)
		if err != nil {
			res.Notes = append(res.Notes, res.Targets[i].Name+": "+err.Error())
			continue
		}
		res.Targets[i].PeakRSSKiB = kib
	}
}

// loadAverage is the 1-minute load average, or 0 when unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
