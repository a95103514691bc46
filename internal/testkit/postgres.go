package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for Postgres.Exec
)

// Postgres is a real Postgres server started for one test from the Debian
// postgresql package's binaries: initdb into a private temporary
// directory, listening only on a unix socket in it (no TCP at all), run as
// the postgres user when the test runs as root, stopped and removed when
// the test ends. `make test-deps` installs the package.
type Postgres struct {
	t       testing.TB
	bin     string   // the server's bin directory
	as      []string // command prefix running a program as the server's owner
	dir     string   // owns everything below; removed at the end
	data    string
	sockets string
	running bool
}

// StartPostgres initialises and starts a server for t. A machine without
// the postgresql package fails the test, naming the fix.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{t: t, bin: postgresBin(t)}
	dir, err := os.MkdirTemp("", "aileron-pg-")
	if err != nil {
		t.Fatal(err)
	}
	p.dir, p.data, p.sockets = dir, filepath.Join(dir, "data"), filepath.Join(dir, "run")
	t.Cleanup(func() { p.stop(false); os.RemoveAll(dir) })
	for _, d := range []string{p.data, p.sockets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 { // postgres refuses to run as root
		p.as = []string{"runuser", "-u", "postgres", "--"}
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the test server runs as the postgres user, which is missing (%v); run: make test-deps", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{p.data, p.sockets} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(p.sockets, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.run("initdb", "-D", p.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync", "--no-instructions")
	p.Start()
	return p
}

// postgresBin returns the newest installed server's bin directory.
func postgresBin(t testing.TB) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(dirs) == 0 {
		t.Fatalf("no Postgres server binaries under /usr/lib/postgresql/*/bin; the fleet tests need the postgresql package: run make test-deps")
	}
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	return filepath.Dir(dirs[len(dirs)-1])
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// run runs one of the server's programs as its owner, failing t on error.
func (p *Postgres) run(prog string, args ...string) {
	p.t.Helper()
	argv := append(append(append([]string{}, p.as...), filepath.Join(p.bin, prog)), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		logTail, _ := os.ReadFile(filepath.Join(p.data, "server.log"))
		if len(logTail) > 4096 {
			logTail = logTail[len(logTail)-4096:]
		}
		p.t.Fatalf("%s: %v\n%s\nserver.log:\n%s", strings.Join(argv, " "), err, out, logTail)
	}
}

// Start starts the server, unless it runs, and waits until it accepts
// connections.
func (p *Postgres) Start() {
	p.t.Helper()
	if p.running {
		return
	}
	p.running = true
	p.run("pg_ctl", "-D", p.data, "-l", filepath.Join(p.data, "server.log"), "-w", "-t", "60",
		"-o", "-k "+p.sockets+" -c listen_addresses='' -c fsync=off -c max_connections=200", "start")
}

// Stop stops the server at once (fast shutdown: open connections are cut),
// unless it is stopped.
func (p *Postgres) Stop() {
	p.t.Helper()
	if !p.running {
		return
	}
	p.running = false
	p.stop(true)
}

func (p *Postgres) stop(mustWork bool) {
	argv := append(append([]string{}, p.as...), filepath.Join(p.bin, "pg_ctl"), "-D", p.data, "-m", "fast", "-w", "stop")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil && mustWork {
		p.t.Fatalf("stopping postgres: %v\n%s", err, out)
	}
}

// DSN returns the connection string of database name on this server.
func (p *Postgres) DSN(name string) string {
	return fmt.Sprintf("host=%s port=5432 user=postgres dbname=%s sslmode=disable", p.sockets, name)
}

// NewDatabase creates a fresh, empty database and returns its DSN.
func (p *Postgres) NewDatabase() string {
	p.t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "aileron_" + hex.EncodeToString(b)
	p.Exec("postgres", "CREATE DATABASE "+name)
	return p.DSN(name)
}

// Exec runs statements as the superuser in database db, failing t on error.
func (p *Postgres) Exec(db, stmts string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.DSN(db))
	if err != nil {
		p.t.Fatalf("connecting to postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, stmts); err != nil {
		p.t.Fatalf("%s: %v", stmts, err)
	}
}

// Query opens database db with database/sql for a test's own reads, closed
// when the test ends.
func (p *Postgres) Query(db string) *sql.DB {
	p.t.Helper()
	d, err := sql.Open("pgx", p.DSN(db))
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { d.Close() })
	return d
}
