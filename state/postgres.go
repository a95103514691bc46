package state

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Backend names the database holding the control-plane state.
type Backend string

const (
	// SQLite is one node's file, $AILERON_HOME/aileron.db: the default.
	SQLite Backend = "sqlite"
	// Postgres is a server several nodes share (a fleet).
	Postgres Backend = "postgres"
)

// Postgres connection defaults, applied when the DSN does not set them.
const (
	pgConnectTimeout = 5 * time.Second
	pgMaxOpenConns   = 16
	pgAppName        = "aileron"
	// writeAttempts bounds how often Write runs a transaction that lost a
	// serialization race with another node's.
	writeAttempts = 8
	// migrationLock is the advisory lock key nodes take while migrating,
	// so that two nodes starting together do not both apply a migration.
	migrationLock = 0x61696c65726f6e // "aileron"
	// migrationWait bounds how long a node waits for another's migration.
	migrationWait = 30 * time.Second
)

// pgShared is what a Postgres DB keeps besides its pool: the parsed
// configuration (for the LISTEN connection) and the listener hub.
type pgShared struct {
	cfg *pgx.ConnConfig
	hub *hub
}

// OpenPostgres connects to the Postgres database dsn (a postgres:// URL or
// libpq key=value string; libpq's PG* environment variables and password
// file apply) and brings its schema up to date like Open, several nodes
// starting at once taking turns. Without a connect_timeout in dsn, connecting
// gives up after 5s.
//
// Errors: a malformed dsn wraps ErrInvalidArgument; a server that cannot be
// reached or refuses the login wraps ErrUnavailable; a schema newer than this
// binary wraps ErrSchemaTooNew.
func OpenPostgres(ctx context.Context, dsn string) (*DB, error) {
	return openPostgres(ctx, dsn, migrations())
}

func openPostgres(ctx context.Context, dsn string, migs []migration) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the string (its password masked only as far
		// as it can tell one): none of it is repeated here.
		return nil, fmt.Errorf("%w: state.dsn is not a Postgres connection string: write it like "+
			"postgres://aileron@db.internal:5432/aileron?sslmode=verify-full (a password's special characters percent-encoded) "+
			"or as key=value pairs (host=db.internal user=aileron dbname=aileron); `aileron config print` shows it with its password masked",
			ErrInvalidArgument)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = pgAppName
	}
	name := describePG(cfg)
	// A pooled connection the server closed (a restart) is found out before
	// it is reused, not by the statement sent on it: the pool opens another.
	sdb := stdlib.OpenDB(*cfg, stdlib.OptionResetSession(func(_ context.Context, c *pgx.Conn) error {
		if c.PgConn().CheckConn() != nil {
			return driver.ErrBadConn
		}
		return nil
	}))
	sdb.SetMaxOpenConns(pgMaxOpenConns)
	sdb.SetMaxIdleConns(pgMaxOpenConns)
	sdb.SetConnMaxIdleTime(5 * time.Minute)
	d := &DB{sql: sdb, path: name, backend: Postgres, pg: &pgShared{cfg: cfg}}
	d.pg.hub = newHub(d)
	if err := d.migrate(ctx, migs); err != nil {
		sdb.Close()
		return nil, err
	}
	return d, nil
}

// describePG names a Postgres database without its password.
func describePG(cfg *pgx.ConnConfig) string {
	host := cfg.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(cfg.Port)))
	}
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, host, cfg.Database)
}

// lockMigrations makes concurrent migrations of one Postgres database take
// turns (a transaction-scoped advisory lock); SQLite's BEGIN IMMEDIATE
// already does.
func (d *DB) lockMigrations(ctx context.Context, tx *Tx) error {
	if d.backend != Postgres {
		return nil
	}
	deadline := time.Now().Add(migrationWait)
	for {
		var got bool
		if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(?)`, int64(migrationLock)).Scan(&got); err != nil || got {
			return err
		}
		if time.Now().After(deadline) {
			var holder string
			_ = tx.QueryRowContext(ctx, `SELECT COALESCE(string_agg(a.usename || ' (pid ' || a.pid || ', ' || COALESCE(a.application_name, '') || ')', ', '), 'unknown')
				FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
				WHERE l.locktype = 'advisory' AND l.granted AND l.objid = ?`, int64(migrationLock&0xffffffff)).Scan(&holder)
			return fmt.Errorf("%w: waited %s for the schema lock of %s, held by %s; another node migrating takes seconds: "+
				"if that is not an aileron node, end it (SELECT pg_terminate_backend(PID)) and restrict who may connect (docs/fleet.md)",
				ErrUnavailable, migrationWait, d.path, holder)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// retryable reports whether err is a Postgres transaction that lost a race
// with another (serialization failure, deadlock) and may simply run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// Unavailable wraps err with ErrUnavailable when it says the database
// server cannot be reached (connection refused or lost, timeout, server
// shutting down), so callers refuse with "shared state unavailable" rather
// than a generic failure. Write and QueryContext classify their errors
// themselves; a QueryRowContext's Scan error is the caller's to pass here.
func (d *DB) Unavailable(err error) error {
	if d.backend != Postgres || err == nil || errors.Is(err, ErrUnavailable) || !connectionLost(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// connectionLost reports whether err is a failure to reach the server
// rather than an answer from it.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrConnDone)
}

// Ping checks that the database answers, within ctx. A Postgres server that
// cannot be reached wraps ErrUnavailable.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.sql.PingContext(ctx); err != nil {
		return d.Unavailable(fmt.Errorf("reaching %s: %w", d.path, err))
	}
	return nil
}

// bind rewrites query's ? placeholders as $1, $2, … for Postgres (outside
// quoted text and comments); SQLite takes the query as written.
func (d *DB) bind(query string) string {
	if d.backend != Postgres || !strings.Contains(query, "?") {
		return query
	}
	if q, ok := d.binds.Load(query); ok {
		return q.(string)
	}
	q := rebind(query)
	d.binds.Store(query, q)
	return q
}

// rebind is bind's rewrite.
func rebind(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(query[i+1:], c)
			if j < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+j+2])
			i += j + 1
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+j])
			i += j - 1
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// pgHint says how to fix the failures a new fleet's operator meets first.
func pgHint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "3D000":
			return "; create the database first (createdb -O USER NAME), or name an existing one in state.dsn"
		case "28P01", "28000":
			hint := "; check the user and password: a libpq password file (PGPASSFILE) keeps the password out of the config"
			if f := os.Getenv("PGPASSFILE"); f != "" {
				if _, ferr := os.ReadFile(f); ferr != nil {
					hint += fmt.Sprintf(" (PGPASSFILE %s cannot be read by this process: %v)", f, ferr)
				}
			}
			return hint
		case "42501":
			return "; the user needs the right to create tables in the database (GRANT CREATE ON SCHEMA public TO USER)"
		}
	}
	return ""
}

// JSONText is the SQL expression of member (a top-level key) of the JSON
// text in column, as text: json_extract on SQLite, ->> on Postgres. Both
// names are the caller's constants, never input.
func (d *DB) JSONText(column, member string) string {
	if d.backend == Postgres {
		return "(" + column + "::jsonb ->> '" + member + "')"
	}
	return "json_extract(" + column + ", '$." + member + "')"
}
