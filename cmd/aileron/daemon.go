package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/budgets"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/fence"
	"github.com/aileronhq/aileron/metrics"
	"github.com/aileronhq/aileron/notify"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/sandboxapi"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

func cmdDaemon(args []string, _ io.Reader, _ io.Writer, stderr io.Writer) error {
	fs := newFlags("daemon", "daemon [--config FILE] [--listen ADDR] [--home DIR] [--log-level L] [--cpu-profile FILE]", stderr)
	cfgFile := fs.String("config", "", "YAML config file (default: embedded defaults only)")
	fs.String("listen", "", "proxy listen address host:port (config proxy.listen)")
	fs.String("home", "", "state directory (config home; env AILERON_HOME)")
	fs.String("log-level", "", "debug, info, warn or error (config log.level)")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile (pprof) of the whole run to this file, for go tool pprof")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	load := func() (*config.Config, error) {
		return config.Load(config.Options{File: *cfgFile, Flags: fs, FlagKeys: map[string]string{
			"listen": "proxy.listen", "home": "home", "log-level": "log.level",
		}})
	}
	cfg, err := load()
	if err != nil {
		return err
	}
	logs := newLogBuffer(stderr, logFlushInterval) // one write for many request lines
	defer logs.Close()
	logger := newLogger(logs, cfg.Log.Level)
	d, err := openDaemon(cfg, &logger)
	if err != nil {
		return err
	}
	d.loadConfig, d.configFile = load, *cfgFile
	d.flushLogs = func() { _ = logs.Flush() }
	if isTerminal(stderr) {
		d.hints = afterLogs{logs: logs, w: stderr}
	}
	return d.run()
}

// nextSteps tells a person who just started the daemon in a terminal what
// to do next, and where the approvals page is.
// bin is how the person ran aileron (./bin/aileron under make run).
func nextSteps(w io.Writer, bin, home, proxy, web string) {
	fmt.Fprintf(w, `
Aileron is running: proxy on %[2]s, state in %[3]s.
Next, in another terminal (with the same AILERON_HOME):
  1. %[1]s connector install SPEC.json        a connector spec (try examples/demo/connector.json)
  2. %[1]s session create --name demo         prints the session id
  3. eval "$(%[1]s session env SESSION_ID)"   then curl, Python, Node, Go and git go through Aileron
`, bin, proxy, home)
	if web != "" {
		fmt.Fprintf(w, "Approvals page: %s/ (`%s approvals web-token` prints a login link)\n", web, bin)
	}
	fmt.Fprintln(w, "Stop with Ctrl-C. The lines below are the daemon's log, one JSON object per line.")
}

// startCPUProfile profiles the process into path until stop.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// newLogger logs JSON lines to w at level, each made safe to show
// (safeLines): a line may quote what a sandbox sent.
func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(safeLines{w}).Level(lvl).With().Timestamp().Logger()
}

// safeLines writes each JSON line it is given (zerolog writes one per
// call) with every character a terminal would act on (U+202E, C1
// controls, …) as its \u escape: the same JSON value.
type safeLines struct{ w io.Writer }

func (s safeLines) Write(p []byte) (int, error) {
	if _, err := s.w.Write(printable.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteLevel passes the line's level on to a writer that takes it (a
// logBuffer writes a warn line at once).
func (s safeLines) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	lw, ok := s.w.(zerolog.LevelWriter)
	if !ok {
		return s.Write(p)
	}
	if _, err := lw.WriteLevel(l, printable.JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// daemon is the wired process: control plane, policy and data plane.
type daemon struct {
	cfg *config.Config
	log *zerolog.Logger
	// flushLogs writes out the log lines buffered so far; nil when the
	// log is not buffered.
	flushLogs func()
	store     *store.Store
	sessions  *sessions.Manager
	budgets   *budgets.Budgets // sessions' usage counters and limit checks
	vault     *credentials.Vault
	bindings  *credentials.Bindings
	creds     *credentials.Injector
	metrics   *metrics.Metrics
	audit     *audit.Log
	// witnesses pushes the trail's checkpoints; nil: none configured.
	witnesses *witnessPusher
	rec       *recorder
	db        *state.DB
	nodeID    string          // a fleet node's instance id (keys/node.id)
	fleetKey  *state.FleetKey // a fleet node's fleet key; nil on a single node
	// readyMu guards the last ping of the state /readyz reported.
	readyMu    sync.Mutex
	readyAt    time.Time
	readyState string
	approval   *approvals.Store
	proposal   *proposals.Store
	policy     policy.Holder
	proxy      *dataplane.Proxy
	catalog    atomic.Pointer[action.Catalog]
	runner     *actions.Runner
	mcp        *sandboxapi.MCPHTTPHandler
	sandboxAPI *sandboxapi.API
	fence      *fence.Manager
	reloadMu   sync.Mutex
	// configFile is the --config file ("" for none): a fenced command must
	// not read it (it may hold state.dsn's password or webhook URLs).
	configFile string
	// loadConfig re-reads the configuration on SIGHUP; nil means the
	// running configuration is kept.
	loadConfig func() (*config.Config, error)
	// notifier posts approval events to approval.webhooks; nil: none.
	notifier *notify.Notifier
	// webURL is the approvals page's base URL ("" when it is off).
	webURL string
	// hints receives, once the daemon is ready, a person's next steps in
	// plain text; nil means none (stderr is not a terminal: logs only).
	hints io.Writer
}

// openDaemon builds the daemon, closing what it opened when it fails: a
// start that fails after the audit trail was opened must end it as a stop
// does, or the next start would take it for a crash.
func openDaemon(cfg *config.Config, log *zerolog.Logger) (*daemon, error) {
	d := &daemon{}
	err := d.open(cfg, log)
	if err != nil {
		return nil, d.abort(err)
	}
	return d, nil
}

// abort closes the audit trail (and its witnesses) and the state database
// of a daemon that stops before it served, joining their errors to err.
func (d *daemon) abort(err error) error {
	if d.audit != nil {
		d.rec.Event(audit.EventDaemonStopped, map[string]string{"pid": strconv.Itoa(os.Getpid()), "reason": "start failed", "error": err.Error()})
		err = errors.Join(err, d.audit.Close())
	}
	if d.witnesses != nil {
		d.witnesses.close()
	}
	if d.db != nil {
		d.leaveFleet()
		err = errors.Join(err, d.db.Close())
	}
	return err
}

// open builds the daemon: state, audit trail, approvals, store, sessions,
// credentials, proxy and tools.
func (d *daemon) open(cfg *config.Config, log *zerolog.Logger) error {
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return fmt.Errorf("home %s: %w", cfg.Home, err)
	}
	d.cfg, d.log, d.metrics = cfg, log, metrics.New()
	d.metrics.Log = log
	db, err := openState(context.Background(), cfg)
	if err != nil {
		return err
	}
	d.db = db
	fleetKey, err := d.openFleet(context.Background())
	if err != nil {
		return err
	}
	d.fleetKey = fleetKey
	if err := d.openVault(); err != nil { // before the trail: a node without the fleet's vault key stops here
		return err
	}
	if err := d.openAudit(); err != nil {
		return err
	}
	if err := d.openApprovals(); err != nil {
		return err
	}
	if err := d.openNotify(); err != nil {
		return err
	}
	d.store = &store.Store{Dir: filepath.Join(cfg.Home, "store"), DB: d.db, Log: log, RequireSignature: cfg.Store.RequireSignature}
	d.sessions = &sessions.Manager{
		DB:         d.db,
		Dir:        filepath.Join(cfg.Home, "sessions"),
		KeyFile:    filepath.Join(cfg.Home, "keys", "session.key"),
		Fleet:      fleetKey,
		DefaultTTL: cfg.Sessions.DefaultTTL,
		Log:        log,
	}
	d.budgets = &budgets.Budgets{DB: d.db}
	if err := d.reload(); err != nil {
		return err
	}
	roots, err := upstreamRoots(cfg.Upstream.CAFiles)
	if err != nil {
		return err
	}
	guard := newGuard(cfg)
	if err := d.openCredentials(guard, roots); err != nil {
		return err
	}
	d.proxy = &dataplane.Proxy{
		Sessions:  d.sessions,
		Policy:    &d.policy,
		Guard:     guard,
		RootCAs:   roots,
		Injector:  d.creds,
		Recorder:  d.rec,
		Budgets:   d.budgets,
		Usage:     usageReader{},
		Proposals: d.proposal,
		Approvals: d.approval, ApprovalHold: cfg.Approval.Hold, ApprovalMaxBody: cfg.Approval.MaxBody,
		ApprovalMaxHeld: cfg.Approval.MaxHeldBytes, ApprovalMaxHeldPerSession: cfg.Approval.MaxHeldBytesSession,
		MaxCheckedBody: cfg.Proxy.MaxCheckedBody,
		Log:            log,
		Timeouts: dataplane.Timeouts{
			Handshake: cfg.Proxy.HandshakeTimeout, ReadHeader: cfg.Proxy.ReadHeaderTimeout,
			Idle: cfg.Proxy.IdleTimeout, TunnelIdle: cfg.Proxy.TunnelIdleTimeout,
			BodyIdle: cfg.Proxy.BodyIdleTimeout, BodyMinRate: cfg.Proxy.BodyMinRate,
			MaxHeader: cfg.Proxy.MaxHeaderBytes, UpstreamTLS: cfg.Upstream.TLSHandshakeTimeout,
			UpstreamHdr: cfg.Upstream.ResponseHeaderTimeout,
		},
	}
	if err := d.openTools(); err != nil {
		return err
	}
	return nil
}

// openApprovals opens the approval store and the proposal store.
func (d *daemon) openApprovals() error {
	d.approval = &approvals.Store{DB: d.db, TTL: d.cfg.Approval.TTL, OnEvent: d.rec.Event, MaxPendingPerSession: d.cfg.Approval.MaxPendingPerSession}
	d.proposal = &proposals.Store{DB: d.db, OnEvent: d.rec.Record}
	return nil
}

// openVault opens the credential vault: its file, or on a fleet node the
// fleet's vault in the shared state.
func (d *daemon) openVault() error {
	d.vault = &credentials.Vault{Dir: filepath.Join(d.cfg.Home, "vault"), KeyFile: d.cfg.State.VaultKeyFile, DB: d.db}
	return d.vault.Open()
}

// placeholderKey is the key placeholders are derived with: the home's
// keys/placeholder.key, or on a fleet node one derived from the fleet key,
// so that a placeholder a session got from one node works through any.
func (d *daemon) placeholderKey() ([]byte, error) {
	if d.fleetKey != nil {
		return d.fleetKey.Derive("aileron placeholder", "", state.KeySize), nil
	}
	return state.LoadOrCreateKey(filepath.Join(d.cfg.Home, "keys", "placeholder.key"), "placeholder key")
}

// openCredentials opens the bindings and builds the injector over the
// vault.
// Token refreshes leave through the same SSRF guard and verified TLS as
// proxied requests, and never follow redirects.
func (d *daemon) openCredentials(guard *dataplane.Guard, roots *x509.CertPool) error {
	d.bindings = &credentials.Bindings{DB: d.db}
	if err := d.bindings.Open(context.Background()); err != nil {
		return err
	}
	key, err := d.placeholderKey()
	if err != nil {
		return err
	}
	tokenClient := &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy: nil, DialContext: guard.DialContext,
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	d.creds = &credentials.Injector{
		Vault: d.vault, Bindings: d.bindings, PlaceholderKey: key, HTTPClient: tokenClient,
		Log: d.log, OnEvent: d.rec.Event,
	}
	return nil
}

// hangup handles SIGHUP: re-read the configuration and take what can
// change at runtime (reloadable), then reload the store. An invalid file
// keeps the running configuration and logs why; a changed setting that
// needs a restart is named in the log.
func (d *daemon) hangup() {
	if d.loadConfig != nil {
		cfg, err := d.loadConfig()
		if err != nil {
			d.log.Error().Str("event", "config.reload_failed").Err(err).Msg("keeping the running configuration")
		} else {
			d.reloadMu.Lock()
			var later, applied []string
			for _, key := range config.Changed(d.cfg, cfg) {
				if key == "store.sources" {
					continue // read by the CLI at each install, never by the daemon
				}
				if !reloadable(key) {
					later = append(later, key)
				} else {
					applied = append(applied, key)
				}
			}
			d.cfg.Proxy.Passthrough = cfg.Proxy.Passthrough
			d.cfg.Approval.Hold, d.cfg.Approval.MaxBody = cfg.Approval.Hold, cfg.Approval.MaxBody
			d.cfg.Approval.MaxHeldBytes, d.cfg.Approval.MaxHeldBytesSession = cfg.Approval.MaxHeldBytes, cfg.Approval.MaxHeldBytesSession
			d.reloadMu.Unlock()
			d.proxy.SetLimits(dataplane.Limits{ApprovalHold: cfg.Approval.Hold, ApprovalMaxBody: cfg.Approval.MaxBody,
				ApprovalMaxHeld: cfg.Approval.MaxHeldBytes, ApprovalMaxHeldPerSession: cfg.Approval.MaxHeldBytesSession})
			if len(applied) > 0 && d.rec != nil { // what the proxy enforces changed: on the record
				d.rec.Event(audit.EventConfigReloaded, map[string]string{"changed": strings.Join(applied, ","),
					"passthrough": passthroughList(cfg.Proxy.Passthrough), "restart_needed": strings.Join(later, ",")})
			}
			if len(later) > 0 {
				d.log.Warn().Str("event", "config.reload_partial").Strs("restart_needed", later).
					Msg("these settings changed in the file but take effect only at the next start; the passthrough rules, approval.hold, " +
						"approval.max_body, approval.max_held_bytes(_per_session) and the installed specs were reloaded")
			}
		}
	}
	_ = d.reload()
}

// passthroughList renders the passthrough rules as "host:port,…".
func passthroughList(rules []config.Passthrough) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
	}
	return strings.Join(out, ",")
}

// reloadable reports whether SIGHUP applies setting key to the running
// daemon.
func reloadable(key string) bool {
	switch key {
	case "proxy.passthrough", "approval.hold", "approval.max_body", "approval.max_held_bytes", "approval.max_held_bytes_per_session":
		return true
	}
	return false
}

// reload recompiles the policy from the store and swaps it in. A bad or
// tampered package is logged and left out; the others stay in force.
func (d *daemon) reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	srcs, errs := d.store.Load(context.Background())
	rules := make([]policy.PassthroughRule, 0, len(d.cfg.Proxy.Passthrough))
	for _, r := range d.cfg.Proxy.Passthrough {
		rules = append(rules, policy.PassthroughRule{Host: r.Host, Port: r.Port})
	}
	pol, cerrs := policy.Compile(srcs, rules)
	for _, err := range append(errs, cerrs...) {
		d.log.Error().Str("event", "store.load_failed").Err(err).Msg("a connector was left out of the policy")
		if errors.Is(err, store.ErrTampered) && d.rec != nil {
			d.rec.Event(audit.EventStoreTamperDetected, map[string]string{"error": err.Error()})
		}
	}
	d.policy.Store(pol)
	cat, aerrs := loadCatalog(srcs)
	for _, err := range aerrs {
		d.log.Error().Str("event", "store.actions_failed").Err(err).Msg("a package's actions were left out")
	}
	d.catalog.Store(cat)
	d.log.Info().Str("event", "policy.loaded").Int("connectors", len(srcs)-len(cerrs)).Msg("policy compiled")
	d.auditOfflineConsents()
	return nil
}

// auditOfflineConsents writes the store.consented lines of the consents
// given with the daemon stopped (connector install or approve against the
// store itself), claimed so that each is written once, on one node.
func (d *daemon) auditOfflineConsents() {
	if d.rec == nil || !d.cfg.Audit.Enabled {
		return
	}
	claimed, err := d.store.ClaimUnaudited(context.Background())
	if err != nil {
		d.log.Error().Str("event", "store.consents_unaudited").Err(err).Msg("consents given with the daemon stopped could not be read; retried at the next reload")
	}
	for _, c := range claimed {
		inst := store.Installed{FQN: c.FQN, Version: c.Version, Hash: c.Hash, Grants: c.Grants, Signature: c.Signature, Quarantined: c.Quarantined}
		details := admin.ConsentDetails(inst, store.Consent{By: c.By, Via: c.Via})
		details["offline"], details["granted_at"] = "true", c.At.UTC().Format(time.RFC3339Nano)
		d.rec.Event(audit.EventStoreConsented, details)
	}
}

func newGuard(cfg *config.Config) *dataplane.Guard {
	g := &dataplane.Guard{DialTimeout: cfg.Upstream.DialTimeout, Resolve: map[string]netip.AddrPort{}}
	for k, v := range cfg.Upstream.Resolve {
		if ap, err := netip.ParseAddrPort(v); err == nil { // validated at load
			g.Resolve[k] = ap
		}
	}
	for _, s := range cfg.Egress.AllowCIDRs {
		if p, err := netip.ParsePrefix(s); err == nil { // validated at load
			g.Allow = append(g.Allow, p)
		}
	}
	return g
}

// upstreamRoots is the system roots plus the configured extra roots.
func upstreamRoots(files []string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("upstream.ca_files: %w", err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("upstream.ca_files: %s holds no PEM certificate", f)
		}
	}
	return pool, nil
}

// run listens, serves until SIGTERM or SIGINT, then drains.
func (d *daemon) run() error {
	// Signals are taken before the daemon says it is ready: a SIGHUP or
	// SIGTERM sent the moment the ready line or daemon.json appears is
	// handled, not lost (ignored, as under nohup) or fatal (the default).
	sigs := takeSignals()
	defer sigs.release()
	pl, err := net.Listen("tcp", d.cfg.Proxy.Listen)
	if err != nil {
		return d.abort(fmt.Errorf("proxy.listen %s: %w (is another daemon running? change proxy.listen or --listen)", d.cfg.Proxy.Listen, err))
	}
	d.sessions.ProxyURLHost = d.advertise(pl.Addr().String())
	errc := make(chan error, 4)
	servers, webAddr, err := d.serveAdmin(errc)
	if err != nil {
		_ = pl.Close()
		return d.abort(err)
	}
	metricsSrv, err := d.serveMetrics(errc)
	if err != nil {
		_ = pl.Close()
		for _, srv := range servers {
			_ = srv.Close()
		}
		return d.abort(err)
	}
	if metricsSrv != nil {
		servers = append(servers, metricsSrv)
	}
	go func() { errc <- d.proxy.Serve(pl) }()
	if err := d.writeState(pl.Addr().String(), webAddr); err != nil {
		_ = pl.Close()
		for _, srv := range servers {
			_ = srv.Close()
		}
		return d.abort(err)
	}
	d.log.Info().Str("event", "daemon.started").Str("proxy", pl.Addr().String()).Str("approvals_web", webAddr).
		Str("admin_socket", d.cfg.Admin.Socket).Str("home", d.cfg.Home).Msg("aileron daemon ready")
	if d.flushLogs != nil {
		d.flushLogs() // the start-up lines are there as soon as it is ready
	}
	if d.hints != nil {
		bin := "aileron"
		if strings.Contains(os.Args[0], "/") {
			bin = os.Args[0]
		}
		nextSteps(d.hints, bin, d.cfg.Home, pl.Addr().String(), d.webURL)
	}
	return d.loop(errc, servers, sigs)
}

// advertise is the host:port sessions' proxy_url names: proxy.advertise,
// else the bound address, unless that is a wildcard (0.0.0.0, ::), which
// no client can dial: then this machine's host name, with a warning.
func (d *daemon) advertise(bound string) string {
	if d.cfg.Proxy.Advertise != "" {
		return d.cfg.Proxy.Advertise
	}
	ap, err := netip.ParseAddrPort(bound)
	if err != nil || !ap.Addr().IsUnspecified() {
		return bound
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	adv := net.JoinHostPort(host, strconv.Itoa(int(ap.Port())))
	d.log.Warn().Str("event", "proxy.advertise_guessed").Str("proxy", bound).Str("advertise", adv).
		Msg("proxy.listen is a wildcard address, which no sandbox can dial; proxy_url names " + adv +
			": set proxy.advertise (AILERON_PROXY__ADVERTISE) to the host:port sandboxes reach the proxy at")
	return adv
}

// serveMetrics serves GET /metrics on admin.metrics_listen, when set.
func (d *daemon) serveMetrics(errc chan<- error) (*http.Server, error) {
	if d.cfg.Admin.MetricsListen == "" {
		return nil, nil
	}
	ml, err := net.Listen("tcp", d.cfg.Admin.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("admin.metrics_listen %s: %w (change it, or set it to \"\" to serve metrics on the admin socket only)", d.cfg.Admin.MetricsListen, err)
	}
	if ap, err := netip.ParseAddrPort(ml.Addr().String()); err == nil {
		d.proxy.Guard.AddSelf(ap) // never dialled through the proxy
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metrics.Handler())
	d.serveHealth(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { errc <- srv.Serve(ml) }()
	d.log.Info().Str("event", "metrics.listening").Str("addr", ml.Addr().String()).Msg("serving GET /metrics, /healthz and /readyz")
	return srv, nil
}

// serveAdmin starts the admin API on the unix socket and, when configured,
// the approvals page on loopback TCP; it returns the servers and the page's
// bound address.
func (d *daemon) serveAdmin(errc chan<- error) ([]*http.Server, string, error) {
	if err := d.sessions.Open(context.Background()); err != nil {
		return nil, "", err
	}
	if err := d.registerGauges(); err != nil {
		return nil, "", err
	}
	al, err := admin.ListenUnix(d.cfg.Admin.Socket)
	if err != nil {
		return nil, "", err
	}
	api := &admin.API{Store: d.store, Sessions: d.sessions, Budgets: d.budgets, OnStoreChange: d.reload, OnEvent: d.rec.Event,
		Vault: d.vault, Bindings: d.bindings, Credentials: d.creds, Approvals: d.approval, Proposals: d.proposal, Catalog: d.catalog.Load, Log: d.log,
		Runs: runCanceller{d.runner}}
	d.fence = d.openFence()
	api.Sandboxes = d.fence
	if d.notifier != nil {
		api.Webhooks = d.notifier
	}
	api.Config = d.cfg.YAML
	hidden := sandboxHidden(d.cfg, d.configFile) // paths a reload never changes
	api.Hidden = func() []string { return hidden }
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", d.metrics.Handler())
	d.serveHealth(mux)
	mux.Handle("/", api.Handler())
	adminSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ConnContext: admin.ConnContext}
	servers := []*http.Server{adminSrv}
	go func() { errc <- adminSrv.Serve(al) }() // not servers[0]: the append below may move it
	webSrv, addr, err := d.serveWeb(errc, api)
	if err != nil {
		_ = al.Close()
		return nil, "", err
	}
	if webSrv != nil {
		servers = append(servers, webSrv)
	}
	return servers, addr, nil
}

// loop handles signals and housekeeping until the daemon stops.
func (d *daemon) loop(errc <-chan error, servers []*http.Server, sigs *daemonSignals) error {
	sweep := time.NewTicker(time.Minute)
	defer sweep.Stop()
	syncCtx, stopSync := context.WithCancel(context.Background())
	syncDone := make(chan struct{})
	go func() { defer close(syncDone); d.syncFleet(syncCtx) }()
	endSync := func() { stopSync(); <-syncDone } // before shutdown closes the state
	defer endSync()
	for {
		select {
		case <-sigs.hup:
			d.hangup()
		case sig := <-sigs.stop:
			endSync()
			return d.shutdown(servers, "signal "+sig.String())
		case <-sweep.C:
			d.sessions.Sweep(context.Background())
			_, _ = d.approval.Expire(context.Background())
		case err := <-errc:
			if errors.Is(err, http.ErrServerClosed) {
				continue
			}
			endSync()
			_ = d.shutdown(servers, "a listener failed: "+err.Error())
			return err
		}
	}
}

func (d *daemon) shutdown(servers []*http.Server, reason string) error {
	d.log.Info().Str("event", "daemon.stopping").Str("timeout", d.cfg.Proxy.ShutdownTimeout.String()).Msg("draining in-flight requests")
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Proxy.ShutdownTimeout)
	defer cancel()
	open := d.proxy.Stats()
	if d.fence != nil {
		d.fence.Shutdown() // fenced sandboxes lose their only link: fail closed
	}
	if d.sandboxAPI != nil {
		d.sandboxAPI.StopWaits() // waits for an access decision answer now, not at the drain's end
	}
	err := errors.Join(d.proxy.Shutdown(ctx), d.closeTools())
	if d.notifier != nil {
		d.notifier.Close()
	}
	for _, srv := range servers {
		err = errors.Join(err, srv.Shutdown(ctx))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A bounded drain is the configured behaviour, not a failure.
		d.log.Warn().Str("event", "daemon.drain_timeout").Int64("connections", open.ConnectionsOpen).Int64("tunnels", open.TunnelsOpen).
			Dur("shutdown_timeout", d.cfg.Proxy.ShutdownTimeout).
			Msg("connections still open after proxy.shutdown_timeout were closed; raise it to let long requests finish")
		err = nil
	}
	if d.audit != nil {
		d.rec.Event(audit.EventDaemonStopped, map[string]string{"pid": strconv.Itoa(os.Getpid()), "reason": reason})
		err = errors.Join(err, d.audit.Close()) // its last checkpoint goes to the witnesses too
	}
	if d.witnesses != nil {
		d.witnesses.close()
	}
	d.sessions.Close()
	d.leaveFleet()
	err = errors.Join(err, d.db.Close())
	_ = os.Remove(filepath.Join(d.cfg.Home, "daemon.json"))
	_ = os.Remove(d.cfg.Admin.Socket)
	return err
}

// registerGauges exposes the proxy's and the CAs' live figures.
func (d *daemon) registerGauges() error {
	return errors.Join(
		d.metrics.ConnectionsOpen(func() float64 { return float64(d.proxy.Stats().ConnectionsOpen) }),
		d.metrics.TunnelsOpen(func() float64 { return float64(d.proxy.Stats().TunnelsOpen) }),
		d.metrics.AuditTrail(func() (uint64, uint64, []metrics.WitnessFigures) {
			if d.audit == nil {
				return 0, 0, nil
			}
			st := d.audit.Stats()
			var ws []metrics.WitnessFigures
			if d.witnesses != nil {
				ws = d.witnesses.figures()
			}
			return st.Checkpoints, st.Signed, ws
		}),
		d.metrics.AuditStats(func() (uint64, uint64, time.Duration) {
			if d.audit == nil {
				return 0, 0, 0
			}
			st := d.audit.Stats()
			return st.Lines, st.Errors, st.LastWriteLatency
		}),
		d.metrics.ApprovalsPending(func() float64 {
			pending, err := d.approval.List(context.Background(), approvals.Filter{State: dataplane.ApprovalStatePending})
			if err != nil {
				return 0
			}
			return float64(len(pending))
		}),
		d.metrics.CertCache(func() (uint64, uint64, uint64) {
			st := d.sessions.CertStats()
			return st.Hits, st.Misses, st.Mints
		}),
	)
}

// writeState publishes where the daemon listens, for scripts and tests.
func (d *daemon) writeState(proxyAddr, webAddr string) error {
	b, err := json.Marshal(map[string]any{
		"pid": os.Getpid(), "proxy_addr": proxyAddr, "admin_socket": d.cfg.Admin.Socket, "web_addr": webAddr, "web_url": d.webURL,
	})
	if err != nil {
		return err
	}
	path := filepath.Join(d.cfg.Home, "daemon.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
