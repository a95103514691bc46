package admin

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aileronhq/aileron/state"
)

// staleProbeTimeout bounds the check whether a daemon still answers on an
// existing socket.
const staleProbeTimeout = time.Second

// ListenUnix listens on a unix socket at path that only the daemon's user may
// use (mode 0600, parent directory created 0700 if missing).
//
// A socket file left by a daemon that is gone is replaced; if a daemon still
// answers on it, ListenUnix fails wrapping ErrDaemonRunning. A path that
// exists but is not a socket is never touched. The socket is bound inside a
// fresh private directory, given its mode there, and only then linked into
// place, so it is never reachable with looser permissions. Closing the
// listener removes the socket file.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating admin socket directory: %w", err)
	}
	if err := clearStaleSocket(path); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(filepath.Dir(path), ".sock-")
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s appeared while starting; is another `aileron daemon` starting?", ErrDaemonRunning, path)
		}
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &unixListener{UnixListener: ln, path: path}, nil
}

// clearStaleSocket removes a socket file at path that nothing answers on.
func clearStaleSocket(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: admin socket path %s exists and is not a socket; move it away or configure another admin.socket",
			state.ErrInvalidArgument, path)
	}
	conn, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%w: a daemon answers on %s; stop it first, or configure another admin.socket", ErrDaemonRunning, path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale admin socket: %w", err)
	}
	return nil
}

// unixListener removes its socket file when closed.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

// Close stops listening and removes the socket file.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}
