package integration

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// suite is the state TestMain prepares before any test runs: the built
// binary, the fake upstreams, and the lazily started shared daemon. It is
// written once by TestMain and only read afterwards (the shared daemon is
// guarded by its sync.Once).
type suite struct {
	root   string // module root
	work   string // scratch directory removed after the run
	bin    string // built aileron binary
	pkiDir string

	up        *upstream            // main fake upstream (server.pem)
	badTLS    map[string]*upstream // "untrusted", "wrongname", "expired"
	loopTap   *tapListener         // 127.0.0.1: must never be dialled
	loop6Tap  *tapListener         // [::1]: must never be dialled (nil without IPv6)
	specPaths []string

	mainOnce sync.Once
	main     *daemon
	mainErr  error

	daemonsMu sync.Mutex
	daemons   []*daemon // every daemon started, stopped at the end

	credOnce sync.Once
	cred     *credEnv // the credentials daemon and its upstream (credentials_test.go)
	credErr  error

	secrets secretRegistry // every secret a test stored, scanned for after the run
	// tokens are the session tokens the tests were given: they belong in
	// proxy URLs the CLI prints, never in a daemon's home or logs.
	tokens secretRegistry
	seen   transcript // what the tests received, scanned for secrets after the run
}

// theSuite is set by TestMain before m.Run and never reassigned.
var theSuite *suite

// badTLSPorts maps each bad upstream certificate (testdata/pki/<name>.pem) to
// the port of stream.example.com whose resolve entry leads to an upstream
// presenting it (see testdata/specs/stream.json).
func badTLSPorts() map[string]string {
	return map[string]string{"untrusted": "9441", "wrongname": "9442", "expired": "9443"}
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	s, err := newSuite()
	if s != nil {
		defer s.close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: setup failed:", err)
		return 1
	}
	theSuite = s
	code := m.Run()
	if s.main != nil {
		if err := s.main.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "integration: the shared daemon did not exit cleanly on SIGTERM: %v\n", err)
			code = 1
		}
	}
	if !s.scanForSecrets(os.Stderr) {
		code = 1
	}
	if code != 0 {
		s.dumpLogs()
	}
	return code
}

func newSuite() (*suite, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "aileron-it-")
	if err != nil {
		return nil, err
	}
	s := &suite{root: root, work: work, pkiDir: filepath.Join(root, "integration", "testdata", "pki"), badTLS: map[string]*upstream{}}
	if err := s.build(); err != nil {
		return s, err
	}
	if s.up, err = startUpstream(s.pkiDir, "127.0.0.2", "server"); err != nil {
		return s, err
	}
	for name := range badTLSPorts() {
		u, err := startUpstream(s.pkiDir, "127.0.0.2", name)
		if err != nil {
			return s, err
		}
		s.badTLS[name] = u
	}
	if s.loopTap, err = startTap("tcp4", "127.0.0.1:0"); err != nil {
		return s, err
	}
	if t6, err := startTap("tcp6", "[::1]:0"); err == nil {
		s.loop6Tap = t6
	}
	s.specPaths = []string{
		filepath.Join(root, "policy", "testdata", "specs", "gmail.json"),
		filepath.Join(root, "policy", "testdata", "specs", "linear.json"),
		filepath.Join(root, "policy", "testdata", "specs", "regional.json"),
		filepath.Join(root, "integration", "testdata", "specs", "stream.json"),
		filepath.Join(root, "integration", "testdata", "specs", "ws.json"),
		filepath.Join(root, "integration", "testdata", "specs", "other.json"),
	}
	return s, nil
}

// build compiles ./cmd/aileron once. AILERON_IT_RACE=1 builds it with -race;
// AILERON_IT_BIN=/path uses a prebuilt binary instead.
func (s *suite) build() error {
	if bin := os.Getenv("AILERON_IT_BIN"); bin != "" {
		s.bin = bin
		return nil
	}
	s.bin = filepath.Join(s.work, "aileron")
	args := []string{"build", "-o", s.bin}
	if os.Getenv("AILERON_IT_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/aileron")
	cmd := exec.Command("go", args...)
	cmd.Dir = s.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build ./cmd/aileron in %s: %w\n%s", s.root, err, out)
	}
	return nil
}

func (s *suite) close() {
	s.daemonsMu.Lock()
	ds := s.daemons
	s.daemonsMu.Unlock()
	for _, d := range ds {
		_ = d.stop()
	}
	if s.cred != nil {
		s.cred.up.Close()
	}
	if s.up != nil {
		s.up.Close()
	}
	for _, u := range s.badTLS {
		u.Close()
	}
	if s.loopTap != nil {
		s.loopTap.Close()
	}
	if s.loop6Tap != nil {
		s.loop6Tap.Close()
	}
	_ = os.RemoveAll(s.work)
}

func (s *suite) dumpLogs() {
	s.daemonsMu.Lock()
	defer s.daemonsMu.Unlock()
	for _, d := range s.daemons {
		fmt.Fprintf(os.Stderr, "---- daemon %s stderr (tail) ----\n%s\n", d.home, d.logTail(16<<10))
	}
}

// requireTool fails the test when a client binary is missing.
func requireTool(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("%s not found (%v): run `make test`, which installs the test clients via scripts/test-deps.sh", path, err)
	}
}

// authority returns host:port for a spec host entry, defaulting to 443.
func authority(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return strings.ToLower(host)
	}
	return net.JoinHostPort(strings.ToLower(host), "443")
}

// resolveAll maps every host named by the specs (and the passthrough host)
// to the main upstream, and the bad-TLS ports to their upstreams.
func (s *suite) resolveAll() (map[string]string, error) {
	res := map[string]string{"passthrough.example.org:443": s.up.Addr}
	for _, p := range s.specPaths {
		sp, err := loadSpec(p)
		if err != nil {
			return nil, err
		}
		for _, op := range sp.Ops {
			for _, h := range op.Hosts {
				res[authority(h)] = s.up.Addr
			}
		}
	}
	for name, port := range badTLSPorts() {
		res["stream.example.com:"+port] = s.badTLS[name].Addr
	}
	return res, nil
}

// baseConfig is the shared daemon's configuration (written as JSON, which
// is YAML).
func (s *suite) baseConfig() (map[string]any, error) {
	res, err := s.resolveAll()
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"proxy": map[string]any{
			"listen":      "127.0.0.1:0",
			"passthrough": []any{map[string]any{"host": "passthrough.example.org", "port": 443}},
		},
		"upstream": map[string]any{
			"resolve":  res,
			"ca_files": []string{filepath.Join(s.pkiDir, "root.pem")},
		},
		"egress": map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
		"admin":  map[string]any{"web_listen": "127.0.0.1:0"},
		"log":    map[string]any{"level": "debug"},
	}, nil
}

// mainDaemon returns the daemon shared by most tests, with every spec
// installed. It is started on first use and stopped after the run.
func (s *suite) mainDaemon(t *testing.T) *daemon {
	t.Helper()
	s.mainOnce.Do(func() {
		cfg, err := s.baseConfig()
		if err != nil {
			s.mainErr = err
			return
		}
		d, err := s.startDaemon(cfg, nil)
		if err != nil {
			s.mainErr = err
			return
		}
		for _, p := range s.specPaths {
			if _, stderr, err := d.run(context.Background(), "connector", "install", p); err != nil {
				s.mainErr = fmt.Errorf("aileron connector install %s: %w\n%s", p, err, stderr)
				return
			}
		}
		if s.mainErr = s.bindMainCredentials(d); s.mainErr != nil {
			return
		}
		s.main = d
	})
	if s.mainErr != nil {
		t.Fatalf("shared daemon: %v", s.mainErr)
	}
	s.main.logOnFailure(t)
	return s.main
}

// daemon is one running `aileron daemon` with its own AILERON_HOME.
type daemon struct {
	s        *suite
	home     string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	stopErr  error

	PID         int    `json:"pid"`
	ProxyAddr   string `json:"proxy_addr"`
	AdminSocket string `json:"admin_socket"`
}

// startDaemon writes cfg into a fresh AILERON_HOME, starts the daemon and
// waits for daemon.json. extraEnv is appended to the daemon's environment.
func (s *suite) startDaemon(cfg map[string]any, extraEnv []string) (*daemon, error) {
	home, err := os.MkdirTemp(s.work, "home-")
	if err != nil {
		return nil, err
	}
	if _, ok := cfg["admin"]; !ok {
		// Daemons run side by side: never the fixed default page port.
		cfg["admin"] = map[string]any{"web_listen": "127.0.0.1:0"}
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		return nil, err
	}
	d, err := s.launch(home, cfgPath, "daemon.stderr.log", extraEnv)
	if err != nil {
		return nil, fmt.Errorf("%w\nconfig:\n%s", err, raw)
	}
	return d, nil
}

// launch starts `aileron daemon --config cfgPath` on home, logging to
// logName in home, registers it with the suite and waits for daemon.json.
func (s *suite) launch(home, cfgPath, logName string, extraEnv []string) (*daemon, error) {
	return s.launchWith(home, cfgPath, logName, extraEnv, (*exec.Cmd).Start)
}

// launchWith is launch with start in place of cmd.Start (to start the
// daemon in a network namespace).
func (s *suite) launchWith(home, cfgPath, logName string, extraEnv []string, start func(*exec.Cmd) error) (*daemon, error) {
	d := &daemon{s: s, home: home, logPath: filepath.Join(home, logName), done: make(chan struct{})}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, err
	}
	d.cmd = exec.Command(s.bin, "daemon", "--config", cfgPath)
	d.cmd.Env = append(cleanEnv(home), extraEnv...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := start(d.cmd); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s daemon: %w", s.bin, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		_ = logf.Close()
		close(d.done)
	}()
	s.daemonsMu.Lock()
	s.daemons = append(s.daemons, d)
	s.daemonsMu.Unlock()
	if err := d.waitReady(60 * time.Second); err != nil {
		_ = d.stop()
		return nil, fmt.Errorf("%w\ndaemon stderr:\n%s", err, d.logTail(8<<10))
	}
	return d, nil
}

// startTestDaemon starts a daemon owned by t and stopped in its cleanup; a
// daemon that does not exit cleanly on SIGTERM fails t.
func (s *suite) startTestDaemon(t *testing.T, cfg map[string]any, extraEnv []string) *daemon {
	t.Helper()
	d, err := s.startDaemon(cfg, extraEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("daemon did not exit cleanly on SIGTERM: %v\n%s", err, d.logTail(4<<10))
		}
	})
	d.logOnFailure(t)
	return d
}

// cleanEnv is the test process's environment without proxy settings or
// AILERON_* variables, plus AILERON_HOME=home.
func cleanEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
			"CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO":
			continue
		}
		if strings.HasPrefix(k, "AILERON_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "AILERON_HOME="+home)
}

func (d *daemon) waitReady(limit time.Duration) error {
	path := filepath.Join(d.home, "daemon.json")
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if raw, err := os.ReadFile(path); err == nil && len(raw) > 0 {
			if err := json.Unmarshal(raw, d); err == nil && d.ProxyAddr != "" {
				return nil
			}
		}
		select {
		case <-d.done:
			return fmt.Errorf("daemon exited before writing %s: %v", path, d.waitErr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon did not write a valid %s within %s", path, limit)
		}
	}
}

// stop sends SIGTERM and waits for exit (SIGKILL after 30s). It returns the
// exit error, if any.
func (d *daemon) stop() error {
	d.stopOnce.Do(func() {
		select {
		case <-d.done:
		default:
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(30 * time.Second):
				_ = d.cmd.Process.Kill()
				<-d.done
				d.stopErr = errors.New("daemon ignored SIGTERM for 30s and was killed")
				return
			}
		}
		d.stopErr = d.waitErr
	})
	return d.stopErr
}

// exited reports whether the daemon process has ended.
func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) logTail(n int) string {
	raw, err := os.ReadFile(d.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", d.logPath, err)
	}
	if len(raw) > n {
		raw = raw[len(raw)-n:]
	}
	return string(raw)
}

// logOnFailure logs the daemon's stderr tail if t fails.
func (d *daemon) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		state := "running"
		if d.exited() {
			state = fmt.Sprintf("EXITED (%v)", d.waitErr)
		}
		t.Logf("daemon %s is %s; stderr tail:\n%s", d.home, state, d.logTail(6<<10))
	})
}

// run executes the aileron CLI against this daemon's home.
func (d *daemon) run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return d.runInput(ctx, "", args...)
}

// runInput is run with stdin; the output is recorded for the secret scan.
func (d *daemon) runInput(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	return d.runIn(ctx, "", stdin, args...)
}

// runIn is runInput in the working directory dir ("": this process's).
func (d *daemon) runIn(ctx context.Context, dir, stdin string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.s.bin, consentYes(args)...)
	cmd.Env, cmd.Dir = cleanEnv(d.home), dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	d.s.seen.add("output of `aileron "+strings.Join(args, " ")+"`", nil, append(out.Bytes(), errb.Bytes()...))
	return out.String(), errb.String(), err
}

// consentYes gives `connector install` --yes, the consent of a caller
// without a terminal, unless args already say how to consent (--yes,
// --lock).
func consentYes(args []string) []string {
	if len(args) < 2 || args[0] != "connector" || args[1] != "install" {
		return args
	}
	for _, a := range args {
		if a == "--yes" || a == "--lock" || strings.HasPrefix(a, "--lock=") {
			return args
		}
	}
	return append([]string{"connector", "install", "--yes"}, args[2:]...)
}

// cli runs the aileron CLI and fails t unless it exits 0.
func (d *daemon) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := d.run(context.Background(), args...)
	if err != nil {
		t.Fatalf("aileron %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// install runs `connector install` for sp, checks the first line of its
// answer, `installed FQN@VERSION sha256:HEX` (the signature verdict and
// the grants follow), and binds a test credential when sp is one of the shared
// connectors whose operations need one.
func (d *daemon) install(t *testing.T, sp *specFile) {
	t.Helper()
	out, _, _ := strings.Cut(strings.TrimSpace(d.cli(t, "connector", "install", sp.Path)), "\n")
	want := "installed " + sp.FQN + "@" + sp.Version + " sha256:"
	if hexPart, ok := strings.CutPrefix(out, want); !ok || len(hexPart) != 64 {
		t.Errorf("connector install %s printed %q, want %q followed by 64 hex digits", sp.Path, out, want)
	}
	// Operations that need a credential are refused without one: bind the
	// suite's test credential so allowed requests stay allowed.
	if err := d.s.bindTestCredential(d, sp.FQN); err != nil {
		t.Fatal(err)
	}
}

// session is the JSON `aileron session create --json` prints.
type session struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	CreatedAt    time.Time `json:"created_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	Connectors   []string  `json:"connectors"`
	ProxyURL     string    `json:"proxy_url"`
	CACertPath   string    `json:"ca_cert_path"`
	CABundlePath string    `json:"ca_bundle_path"`

	d       *daemon
	envText string // cached `session env` output
}

// newSession runs `session create --json` with extra args.
func (d *daemon) newSession(t *testing.T, args ...string) *session {
	t.Helper()
	out := d.cli(t, append([]string{"session", "create", "--json"}, args...)...)
	var s session
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("session create --json printed invalid JSON (%v): %q", err, out)
	}
	if s.ID == "" || s.ProxyURL == "" || s.CACertPath == "" {
		t.Fatalf("session create --json lacks id, proxy_url or ca_cert_path: %q", out)
	}
	s.d = d
	if u, err := url.Parse(s.ProxyURL); err == nil {
		if tok, ok := u.User.Password(); ok {
			theSuite.tokens.add("token of session "+s.ID, tok)
		}
	}
	return &s
}

// proxyURL parses the session's proxy URL.
func (s *session) proxyURL(t *testing.T) *url.URL {
	t.Helper()
	u, err := url.Parse(s.ProxyURL)
	if err != nil || u.User == nil {
		t.Fatalf("session proxy_url %q is not http://id:token@host:port (%v)", s.ProxyURL, err)
	}
	return u
}

// auth returns the Proxy-Authorization value for the session.
func (s *session) auth(t *testing.T) string {
	t.Helper()
	u := s.proxyURL(t)
	pw, _ := u.User.Password()
	return basicAuth(u.User.Username(), pw)
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// caPool returns a pool holding only the session CA.
func (s *session) caPool(t *testing.T) *x509.CertPool {
	t.Helper()
	return certPoolFrom(t, s.CACertPath)
}

// caCert returns the session CA certificate.
func (s *session) caCert(t *testing.T) *x509.Certificate {
	t.Helper()
	return readCert(t, s.CACertPath)
}

// env returns `aileron session env ID` output (shell export lines).
func (s *session) env(t *testing.T) string {
	t.Helper()
	out := s.d.cli(t, "session", "env", s.ID)
	if !strings.Contains(out, "HTTPS_PROXY") {
		t.Fatalf("session env %s printed no HTTPS_PROXY: %q", s.ID, out)
	}
	return out
}

func certPoolFrom(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read CA %s: %v", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		t.Fatalf("%s holds no PEM certificate", path)
	}
	return pool
}
