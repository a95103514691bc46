package testkit

import (
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for Postgres.Query

	"github.com/aileronhq/aileron/internal/pgserver"
)

// Postgres is a real Postgres server started for one test (pgserver),
// stopped and removed when the test ends. `make test-deps` installs the
// postgresql package; a machine without it fails the test saying so.
type Postgres struct {
	t testing.TB
	s *pgserver.Server
}

// StartPostgres initialises and starts a server for t.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	s, err := pgserver.Start()
	if err != nil {
		t.Fatalf("starting the test's Postgres server: %v", err)
	}
	t.Cleanup(s.Close)
	return &Postgres{t: t, s: s}
}

// Start starts the server again, unless it runs.
func (p *Postgres) Start() {
	p.t.Helper()
	if err := p.s.Resume(); err != nil {
		p.t.Fatal(err)
	}
}

// Stop stops the server at once (open connections are cut), unless it is
// stopped.
func (p *Postgres) Stop() {
	p.t.Helper()
	if err := p.s.Stop(); err != nil {
		p.t.Fatal(err)
	}
}

// DSN returns the connection string of database name on this server.
func (p *Postgres) DSN(name string) string { return p.s.DSN(name) }

// NewDatabase creates a fresh, empty database and returns its DSN.
func (p *Postgres) NewDatabase() string {
	p.t.Helper()
	dsn, err := p.s.NewDatabase()
	if err != nil {
		p.t.Fatal(err)
	}
	return dsn
}

// Exec runs statements as the superuser in database db, failing t on error.
func (p *Postgres) Exec(db, stmts string) {
	p.t.Helper()
	if err := p.s.Exec(db, stmts); err != nil {
		p.t.Fatal(err)
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
