package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// mitm is a running mitmdump child used as the comparison proxy.
type mitm struct {
	cmd     *exec.Cmd
	logPath string
	addr    string // 127.0.0.1:PORT
	caPath  string // confdir/mitmproxy-ca-cert.pem
	exited  chan struct{}
	waitErr error
}

// startMitm starts mitmdump on a free loopback port with its own confdir,
// trusting rootPath for upstream verification, and waits until it accepts
// connections and has written its CA. Bodies over 1 MiB are streamed
// (stream_large_bodies), so the streaming phase compares streaming proxies
// rather than mitmproxy's default whole-body buffering. extra goes on
// mitmdump's command line (the split table's peer adds its addon).
func startMitm(ctx context.Context, path, dir, rootPath string, extra ...string) (*mitm, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	confdir := filepath.Join(dir, "mitmproxy")
	if err := os.MkdirAll(confdir, 0o700); err != nil {
		return nil, fmt.Errorf("mitmdump: confdir: %w", err)
	}
	m := &mitm{
		logPath: filepath.Join(dir, "mitmdump.log"),
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		caPath:  filepath.Join(confdir, "mitmproxy-ca-cert.pem"),
		exited:  make(chan struct{}),
	}
	logf, err := os.Create(m.logPath)
	if err != nil {
		return nil, fmt.Errorf("mitmdump: log: %w", err)
	}
	m.cmd = exec.Command(path, "--listen-host", "127.0.0.1", "--listen-port", strconv.Itoa(port),
		"--set", "confdir="+confdir, "--set", "ssl_verify_upstream_trusted_ca="+rootPath,
		"--set", "stream_large_bodies=1m", "-q")
	m.cmd.Args = append(m.cmd.Args, extra...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	if err := m.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("mitmdump: start %s: %w", path, err)
	}
	go func() {
		m.waitErr = m.cmd.Wait()
		_ = logf.Close()
		close(m.exited)
	}()
	if err := m.waitReady(ctx, 30*time.Second); err != nil {
		m.stop(2 * time.Second)
		return nil, fmt.Errorf("%w\n%s", err, fileTail(m.logPath, 10, "mitmdump log"))
	}
	return m, nil
}

// waitReady polls until the CA file exists and the port accepts TCP.
func (m *mitm) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(m.caPath); err == nil {
			if c, err := net.DialTimeout("tcp", m.addr, time.Second); err == nil {
				_ = c.Close()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.exited:
			return fmt.Errorf("mitmdump exited during start: %v", m.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("mitmdump not ready on %s within %s", m.addr, timeout)
}

// stop sends SIGTERM, then SIGKILL after grace.
func (m *mitm) stop(grace time.Duration) {
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(grace):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// freePort asks the kernel for a free loopback TCP port. mitmdump takes a
// port number, not a listener, so there is a small window for a race.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
