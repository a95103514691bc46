// Package pgserver runs a private, throwaway Postgres server from the
// Debian postgresql package's binaries, for the fleet tests and the bench:
// initdb into a temporary directory, listening only on a unix socket in it
// (no TCP at all), run as the postgres user when the caller is root (the
// server refuses root), stopped and removed by Close.
//
// It imports the standard library and pgx (to run statements), and is for
// tests and the bench only.
package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServer is wrapped when no Postgres server binaries are installed.
var ErrNoServer = errors.New("no Postgres server binaries under /usr/lib/postgresql/*/bin (install the postgresql package: make test-deps)")

// Server is one private Postgres server.
type Server struct {
	bin     string   // the server's bin directory
	as      []string // command prefix running a program as the server's owner
	dir     string   // owns everything below; removed by Close
	data    string
	sockets string
	running bool
}

// Start initialises a server in a new temporary directory and starts it.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "aileron-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data"), sockets: filepath.Join(dir, "run")}
	if err := s.init(); err != nil {
		s.Close()
		return nil, err
	}
	return s, s.Resume()
}

// init makes the directories (owned by postgres when running as root) and
// runs initdb.
func (s *Server) init() error {
	for _, d := range []string{s.data, s.sockets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	if os.Geteuid() == 0 {
		s.as = []string{"runuser", "-u", "postgres", "--"}
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root, the server runs as the postgres user, which is missing (%v); install the postgresql package (make test-deps)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(s.dir, 0o711); err != nil {
			return err
		}
		for _, d := range []string{s.data, s.sockets} {
			if err := os.Chown(d, uid, gid); err != nil {
				return err
			}
		}
		if err := os.Chmod(s.sockets, 0o755); err != nil {
			return err
		}
	}
	return s.run("initdb", "-D", s.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions")
}

// binDir returns the newest installed server's bin directory.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		return "", ErrNoServer
	}
	major := func(initdb string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
		return n
	}
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) < major(dirs[j]) })
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// run runs one of the server's programs as its owner.
func (s *Server) run(prog string, args ...string) error {
	argv := append(append(append([]string{}, s.as...), filepath.Join(s.bin, prog)), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		logTail, _ := os.ReadFile(filepath.Join(s.data, "server.log"))
		if len(logTail) > 4096 {
			logTail = logTail[len(logTail)-4096:]
		}
		return fmt.Errorf("%s: %v\n%s\nserver.log:\n%s", strings.Join(argv, " "), err, out, logTail)
	}
	return nil
}

// Resume starts the server, unless it runs, and waits until it accepts
// connections.
func (s *Server) Resume() error {
	if s.running {
		return nil
	}
	s.running = true
	return s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.data, "server.log"), "-w", "-t", "60",
		"-o", "-k "+s.sockets+" -c listen_addresses='' -c fsync=off -c max_connections=200", "start")
}

// Stop stops the server at once (fast shutdown: open connections are cut),
// unless it is stopped.
func (s *Server) Stop() error {
	if !s.running {
		return nil
	}
	s.running = false
	return s.run("pg_ctl", "-D", s.data, "-m", "fast", "-w", "stop")
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	_ = s.Stop()
	os.RemoveAll(s.dir)
}

// DSN returns the connection string of database name on this server.
func (s *Server) DSN(name string) string {
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", s.sockets, name)
}

// NewDatabase creates a fresh, empty database and returns its DSN.
func (s *Server) NewDatabase() (string, error) {
	b := make([]byte, 6)
	rand.Read(b)
	name := "aileron_" + hex.EncodeToString(b)
	if err := s.Exec("postgres", "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.DSN(name), nil
}

// Exec runs statements as the superuser in database db.
func (s *Server) Exec(db, stmts string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmts); err != nil {
		return fmt.Errorf("%s: %w", stmts, err)
	}
	return nil
}
