package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The split table's peers that are programs of their own: measured when
// installed, never installed by the bench.

// mitmdumpAddon sets the bench key on every request and streams
// server-sent events (mitmproxy buffers bodies under stream_large_bodies,
// which would hold every event to the end of the answer).
const mitmdumpAddon = `KEY = %q

def request(flow):
    flow.request.headers["X-Api-Key"] = KEY

def responseheaders(flow):
    if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
        flow.response.stream = True
`

// startMitmdump starts mitmdump (--mitmdump, or on PATH) with an addon that
// injects the key; its CA is in its confdir.
func (e *splitEnv) startMitmdump(ctx context.Context, o options, stderr io.Writer) *peer {
	p := &peer{splitPath: splitPath{name: "mitmdump"}, optional: true}
	path := o.mitmdump
	if path == "" {
		path, _ = exec.LookPath("mitmdump")
	}
	if path == "" {
		p.absent = "not installed"
		return p
	}
	dir := filepath.Join(e.dir, "mitmdump")
	script := filepath.Join(dir, "inject.py")
	err := errors.Join(os.MkdirAll(dir, 0o700), os.WriteFile(script, fmt.Appendf(nil, mitmdumpAddon, e.apiKey), 0o600))
	var m *mitm
	if err == nil {
		fmt.Fprintln(stderr, "bench: split phases: starting", path)
		m, err = startMitm(ctx, path, dir, e.roots, "-s", script)
	}
	if err != nil {
		p.absent, p.err = "did not start", err.Error()
		return p
	}
	p.proxy, p.roots, p.pid = "http://"+m.addr, m.caPath, m.cmd.Process.Pid
	p.stop = func() { m.stop(5 * time.Second) }
	return p
}

// squidConfig bumps every CONNECT with the peer CA, after peeking at the
// client's hello, so the leaf mimics the upstream's names (its IP address
// too; leaves minted by security_file_certgen and kept in memory), verifies the upstream against
// the bench root, adds the key and keeps nothing: no cache, no access log.
const squidConfig = `http_port 127.0.0.1:%[1]d ssl-bump tls-cert=%[2]s/ca.pem generate-host-certificates=on dynamic_cert_mem_cache_size=16MB
sslcrtd_program %[3]s -s %[2]s/ssl_db -M 16MB
sslcrtd_children 4 startup=1 idle=1
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile=%[2]s/upstream-root.pem
request_header_add X-Api-Key "%[4]s" all
http_access allow all
cache deny all
access_log none
cache_log %[2]s/cache.log
pid_filename %[2]s/squid.pid
coredump_dir %[2]s
shutdown_lifetime 0 seconds
%[5]s
`

// startSquid starts `squid -N` (on PATH, built with OpenSSL) bumping with
// the bare MITM's CA. Squid speaks HTTP/1.1 only to its clients, so the
// h2 and gRPC rows are n/a.
func (e *splitEnv) startSquid(ctx context.Context, _ options, stderr io.Writer) *peer {
	p := &peer{splitPath: splitPath{name: "squid ssl-bump"}, optional: true, unable: func(row splitRow) string {
		if row.h2 || row.grpc != "" {
			return "n/a (no h2)"
		}
		return ""
	}}
	bin, err := exec.LookPath("squid")
	if err != nil {
		p.absent = "not installed"
		return p
	}
	if v, _ := exec.CommandContext(ctx, bin, "-v").Output(); !strings.Contains(string(v), "--with-openssl") {
		p.absent, p.err = "no ssl-bump", bin+" is built without OpenSSL (`squid -v` lacks --with-openssl), which ssl-bump needs (Debian: squid-openssl)"
		return p
	}
	fmt.Fprintln(stderr, "bench: split phases: starting", bin)
	if err := e.runSquid(ctx, p, bin); err != nil {
		p.absent, p.err = "did not start", err.Error()
	}
	return p
}

// runSquid writes squid's directory (its own, readable by the user squid
// drops to when started as root), starts it and waits for its port.
func (e *splitEnv) runSquid(ctx context.Context, p *peer, bin string) error {
	// Where distributions put Squid's certificate helper.
	places := []string{"/usr/lib/squid/security_file_certgen", "/usr/libexec/squid/security_file_certgen", "/usr/lib64/squid/security_file_certgen"}
	certgen := ""
	for _, c := range places {
		if _, err := os.Stat(c); err == nil {
			certgen = c
		}
	}
	if certgen == "" {
		return fmt.Errorf("security_file_certgen not found in %v", places)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	caPEM, certPEM, err := newPeerCA()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "aileron-bench-squid-")
	if err != nil {
		return err
	}
	root, _ := os.ReadFile(e.roots)
	asUser := ""
	if os.Geteuid() == 0 {
		asUser = "cache_effective_user nobody"
	}
	err = errors.Join(os.Chmod(dir, 0o755), os.WriteFile(filepath.Join(dir, "ca.pem"), caPEM, 0o600),
		os.WriteFile(filepath.Join(dir, "root.pem"), certPEM, 0o644), os.WriteFile(filepath.Join(dir, "upstream-root.pem"), root, 0o644),
		os.WriteFile(filepath.Join(dir, "squid.conf"), fmt.Appendf(nil, squidConfig, port, dir, certgen, e.apiKey, asUser), 0o644))
	if err == nil {
		var out []byte
		if out, err = exec.CommandContext(ctx, certgen, "-c", "-s", filepath.Join(dir, "ssl_db"), "-M", "16MB").CombinedOutput(); err != nil {
			err = fmt.Errorf("%s -c: %w: %s", certgen, err, out)
		}
	}
	if err == nil && asUser != "" {
		err = chownTree(dir, "nobody")
	}
	cmd := exec.Command(bin, "-N", "-f", filepath.Join(dir, "squid.conf"))
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.RemoveAll(dir)
	}
	p.proxy, p.roots, p.pid = "http://127.0.0.1:"+strconv.Itoa(port), filepath.Join(dir, "root.pem"), cmd.Process.Pid
	if err := waitPort(ctx, exited, p.proxy[len("http://"):], 20*time.Second); err != nil {
		tail := fileTail(filepath.Join(dir, "cache.log"), 10, "squid cache.log")
		p.stop()
		p.stop = nil
		return fmt.Errorf("%w\n%s", err, tail)
	}
	return nil
}

// chownTree gives dir and everything in it to the named user.
func chownTree(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// waitPort polls until addr accepts TCP, the process exits or timeout.
func waitPort(ctx context.Context, exited <-chan struct{}, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return errors.New("exited during start")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("not accepting on %s within %s", addr, timeout)
}
