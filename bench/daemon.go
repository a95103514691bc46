package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonInfo is $AILERON_HOME/daemon.json as the contract defines it.
type daemonInfo struct {
	PID         int    `json:"pid"`
	ProxyAddr   string `json:"proxy_addr"`
	AdminSocket string `json:"admin_socket"`
}

// sessionInfo is the part of `aileron session create --json` the bench uses.
type sessionInfo struct {
	ID         string `json:"id"`
	ProxyURL   string `json:"proxy_url"`
	CACertPath string `json:"ca_cert_path"`
}

// daemon is a running `aileron daemon` child with its own AILERON_HOME.
type daemon struct {
	bin     string
	home    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returns; waitErr is then set
	waitErr error
	info    daemonInfo
}

// benchSpec is the connector spec installed for the bench upstream.
const benchSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://bench/items", "version": "1.0.0"},
  "tools": [
    {
      "name": "items",
      "description": "The bench upstream",
      "operations": [
        {"name": "items.get", "summary": "Get one item", "method": "GET",
         "path": "/v1/items/{id}", "hosts": [%[1]q], "idempotency": "idempotent"},
        {"name": "items.secure", "summary": "Get one item with an injected API key", "method": "GET",
         "path": "/v1/secure/{id}", "hosts": [%[1]q], "idempotency": "idempotent",
         "credential": {"kind": "api_key", "header": "X-Api-Key", "format": "{key}"}},
        {"name": "blob.get", "summary": "Stream the large body", "method": "GET",
         "path": "/v1/blob", "hosts": [%[1]q], "idempotency": "idempotent"},
        {"name": "upload", "summary": "Send a large body", "method": "POST",
         "path": "/v1/upload", "hosts": [%[1]q]},
        {"name": "items.delete", "summary": "Delete an item (a human approves)", "method": "DELETE",
         "path": "/v1/items/{id}", "hosts": [%[1]q], "approval": "required"}
      ]
    },
    {
      "name": "model",
      "description": "A model API that streams its answer (the streaming row)",
      "operations": [
        {"name": "messages", "summary": "A streaming message call, usage read as it passes", "method": "POST",
         "path": "/v1/messages", "hosts": [%[1]q], "usage": "anthropic",
         "credential": {"kind": "api_key", "header": "X-Api-Key", "format": "{key}"}}
      ]
    },
    {
      "name": "grpc",
      "description": "The bench gRPC upstream (grpc-go's interop TestService)",
      "operations": [
        {"name": "grpc.unary", "summary": "A unary call with the API key injected", "method": "POST",
         "path": "/grpc.testing.TestService/UnaryCall", "hosts": [%[2]q],
         "credential": {"kind": "api_key", "header": "X-Api-Key", "format": "{key}"}},
        {"name": "grpc.stream", "summary": "A server-streaming call with the API key injected", "method": "POST",
         "path": "/grpc.testing.TestService/StreamingOutputCall", "hosts": [%[2]q],
         "credential": {"kind": "api_key", "header": "X-Api-Key", "format": "{key}"}}
      ]
    }
  ]
}
`

// benchConfig is the daemon config: an ephemeral proxy port, the bench root
// trusted upstream, the upstream's loopback address let through the SSRF
// guard, the log level (warn by default; info adds a log line per allowed
// request) and whether the daemon writes its audit trail (audit.enabled).
const benchConfig = `admin:
  web_listen: ""
approval:
  hold: 2s
proxy:
  listen: 127.0.0.1:0
upstream:
  ca_files: [%q]
egress:
  allow_cidrs: ["%s/32"]
log:
  level: %s
audit:
  enabled: %t
`

// startDaemon writes the config (with audit.enabled set to audit) under dir,
// starts the daemon with AILERON_HOME dir/home and waits for daemon.json. On
// failure the daemon is stopped and the error carries the tail of its log.
func startDaemon(ctx context.Context, bin, dir, rootPath, upstreamIP, logLevel string, audit bool, extra ...string) (*daemon, error) {
	return startDaemonConfig(ctx, bin, dir, fmt.Sprintf(benchConfig, rootPath, upstreamIP, logLevel, audit), extra...)
}

// startDaemonConfig is startDaemon with the whole config file given.
func startDaemonConfig(ctx context.Context, bin, dir, config string, extra ...string) (*daemon, error) {
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: create AILERON_HOME %s: %w", home, err)
	}
	cfgPath := filepath.Join(dir, "aileron.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("daemon: write config: %w", err)
	}
	d := &daemon{bin: bin, home: home, logPath: filepath.Join(dir, "daemon.log"), exited: make(chan struct{})}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, fmt.Errorf("daemon: create log: %w", err)
	}
	d.cmd = exec.Command(bin, append([]string{"daemon", "--config", cfgPath}, extra...)...)
	d.cmd.Env = d.env()
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("daemon: start %s: %w (build it with `make build`)", bin, err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		_ = logf.Close()
		close(d.exited)
	}()
	if err := d.waitReady(ctx, 20*time.Second); err != nil {
		_ = d.stop(2 * time.Second)
		return nil, fmt.Errorf("%w\n%s", err, d.logTail(20))
	}
	return d, nil
}

// env is the environment for the daemon and the CLI: the caller's, minus any
// AILERON_* override, plus AILERON_HOME.
func (d *daemon) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AILERON_") {
			env = append(env, kv)
		}
	}
	return append(env, "AILERON_HOME="+d.home)
}

// waitReady polls daemon.json until it parses with a proxy address, the
// daemon exits, or timeout passes.
func (d *daemon) waitReady(ctx context.Context, timeout time.Duration) error {
	path := filepath.Join(d.home, "daemon.json")
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			var info daemonInfo
			if json.Unmarshal(b, &info) == nil && info.ProxyAddr != "" {
				d.info = info
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.exited:
			return fmt.Errorf("daemon exited before writing %s: %v", path, d.waitErr)
		case <-deadline.C:
			return fmt.Errorf("daemon did not write a valid %s within %s", path, timeout)
		case <-tick.C:
		}
	}
}

// cli runs `aileron ARGS...` against this daemon's home and returns stdout.
// A failure carries the command, exit status and stderr.
func (d *daemon) cli(ctx context.Context, args ...string) ([]byte, error) {
	return d.cliStdin(ctx, "", args...)
}

// cliStdin is cli with stdin fed from the given string (a secret: it never
// goes on the command line, and errors carry only the command and stderr).
func (d *daemon) cliStdin(ctx context.Context, stdin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.bin, args...)
	cmd.Env = d.env()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("`aileron %s`: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// installSpec writes the bench connector spec for upstreamAddr (and the
// gRPC upstream at grpcAddr) into the home and installs it. The note is non-empty when the CLI's output differs
// from the contract's `installed FQN@VERSION sha256:HEX`.
func (d *daemon) installSpec(ctx context.Context, upstreamAddr, grpcAddr string) (note string, err error) {
	path := filepath.Join(d.home, "bench-connector.json")
	if err := os.WriteFile(path, fmt.Appendf(nil, benchSpec, upstreamAddr, grpcAddr), 0o600); err != nil {
		return "", fmt.Errorf("write connector spec: %w", err)
	}
	out, err := d.cli(ctx, "connector", "install", "--yes", path)
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(string(out), "installed local://bench/items@1.0.0 sha256:") {
		note = fmt.Sprintf("contract: `aileron connector install` printed %q, want \"installed local://bench/items@1.0.0 sha256:HEX\"",
			strings.TrimSpace(string(out)))
	}
	return note, nil
}

// Names the injection phase uses: the vault entry and the connector it is
// bound to.
const (
	benchCredential = "benchkey"
	benchConnector  = "local://bench/items"
)

// setCredential stores key as the api_key credential benchCredential (the
// secret on stdin) and binds it to the bench connector, so the daemon injects
// it on items.secure. An error names the step that failed.
func (d *daemon) setCredential(ctx context.Context, key string) error {
	if _, err := d.cliStdin(ctx, key+"\n", "credential", "set", benchCredential, "--kind", "api_key"); err != nil {
		return err
	}
	_, err := d.cli(ctx, "credential", "bind", benchConnector, "--credential", benchCredential)
	return err
}

// checkNotes compares daemon.json with the process the bench started and
// counts warning and error lines in the daemon's log, except the expected
// audit.disabled warning of the audit-off daemon. name labels the notes.
func (d *daemon) checkNotes(name string) []string {
	var notes []string
	if d.info.PID != d.cmd.Process.Pid {
		notes = append(notes, fmt.Sprintf("contract: %s daemon.json pid is %d, the daemon process is %d", name, d.info.PID, d.cmd.Process.Pid))
	}
	b, _ := os.ReadFile(d.logPath)
	var n int
	var first string
	for line := range strings.Lines(string(b)) {
		if strings.Contains(line, `"event":"audit.disabled"`) {
			continue
		}
		if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
			if n++; n == 1 {
				first = strings.TrimSpace(line)
			}
		}
	}
	if n > 0 {
		notes = append(notes, fmt.Sprintf("%s daemon logged %d warning/error lines; first: %s", name, n, first))
	}
	return notes
}

// secretNotes looks for the bench credential's plaintext in the daemon's
// log and every file under its home (audit log, vault, state) after the
// run: the contract says secret bytes never appear in any of them.
func (d *daemon) secretNotes(secret string) []string {
	var notes []string
	check := func(path string) {
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(secret)) {
			notes = append(notes, "contract: the injected secret appears in plaintext in "+path)
		}
	}
	check(d.logPath)
	_ = filepath.WalkDir(d.home, func(path string, de fs.DirEntry, err error) error {
		if err == nil && de.Type().IsRegular() {
			check(path)
		}
		return nil
	})
	return notes
}

// createSession runs `aileron session create --json` and checks the fields
// the bench needs are present.
func (d *daemon) createSession(ctx context.Context) (sessionInfo, error) {
	out, err := d.cli(ctx, "session", "create", "--name", "bench", "--ttl", "1h", "--json")
	if err != nil {
		return sessionInfo{}, err
	}
	var s sessionInfo
	if err := json.Unmarshal(out, &s); err != nil {
		return sessionInfo{}, fmt.Errorf("`aileron session create --json`: output is not JSON: %w", err)
	}
	if s.ProxyURL == "" || s.CACertPath == "" {
		return sessionInfo{}, errors.New("`aileron session create --json`: proxy_url or ca_cert_path missing")
	}
	return s, nil
}

// stop sends SIGTERM and waits up to grace for the daemon to exit, then
// kills it. It reports a kill or a non-zero exit as an error.
func (d *daemon) stop(grace time.Duration) error {
	select {
	case <-d.exited:
		return d.waitErr
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.exited:
		if d.waitErr != nil {
			return fmt.Errorf("daemon exited after SIGTERM with %v", d.waitErr)
		}
		return nil
	case <-t.C:
		_ = d.cmd.Process.Kill()
		<-d.exited
		return fmt.Errorf("daemon did not exit within %s of SIGTERM; killed", grace)
	}
}

// logTail returns the last n lines of the daemon's log, indented.
func (d *daemon) logTail(n int) string {
	return fileTail(d.logPath, n, "daemon log")
}

// fileTail returns the last n lines of path under a heading.
func fileTail(path string, n int, heading string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return "  (" + heading + " is empty)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + heading + " (last lines):\n    " + strings.Join(lines, "\n    ")
}

// peakRSSKiB reads VmHWM (peak resident set) of pid from /proc, in KiB.
func peakRSSKiB(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		return strconv.ParseInt(fields[0], 10, 64)
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM line in /proc/%d/status", pid)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's utime and stime; it
// is 100 on every mainstream Linux build.
const clockTicks = 100

// procCPU reads the user+system CPU time of pid (all threads) from
// /proc/PID/stat, at 1/clockTicks resolution.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	// Fields after the parenthesised command name: state is field 3, utime
	// and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("cpu time: unexpected /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu time: unexpected /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
