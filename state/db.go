package state

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// FileName is the control-plane database's file name inside $AILERON_HOME.
const FileName = "aileron.db"

// dbBusyTimeout is how long a statement waits for another connection or
// process holding the write lock before failing with SQLITE_BUSY.
const dbBusyTimeout = 10 * time.Second

// DB is the daemon's persistent control-plane state, a SQLite database
// (normally $AILERON_HOME/aileron.db, mode 0600) opened in WAL mode with a
// busy timeout and foreign keys on. It holds approvals, action runs, session
// metadata, the connector store index and credential bindings metadata, each
// kept by the package that owns it (approvals, actions, sessions, store,
// credentials) through Write and the Querier methods.
// What must stay a file stays one: each session's CA private key (0600,
// sessions/<id>/), connector package bytes (store/connectors/sha256/<hash>/)
// and secrets (the age-encrypted vault).
//
// A DB is safe for concurrent use, and several processes may open the same
// file: writes take SQLite's write lock at BEGIN (BEGIN IMMEDIATE) and wait
// for it up to the busy timeout.
type DB struct {
	sql     *sql.DB
	path    string // the SQLite file, or the Postgres DSN without its password
	backend Backend
	pg      *pgShared // Postgres only: what LISTEN needs (nil for SQLite)
	// wmu serialises this process's write transactions on SQLite, so that
	// only other processes ever make a writer wait in its busy handler.
	wmu sync.Mutex
	// binds caches each query rewritten with Postgres placeholders.
	binds sync.Map
}

// Open opens (creating if needed, mode 0600, parent directory 0700) the
// control-plane database at path and brings its schema up to date, applying
// each missing migration in its own transaction. Reopening an up-to-date
// database changes nothing.
//
// Errors: a database whose schema is newer than this binary knows wraps
// ErrSchemaTooNew; a path that is a symlink, not a regular file, or readable
// by group or others wraps ErrInsecureFile; a file that is not a SQLite
// database or whose schema_migrations table is inconsistent wraps
// ErrCorruptState; file-system failures wrap their *fs.PathError.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, migrations())
}

// open is Open with the migration list as a parameter, for tests.
func open(ctx context.Context, path string, migs []migration) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database path is empty; use $AILERON_HOME/%s", ErrInvalidArgument, FileName)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("resolving database path %q: %w", path, err)
	}
	if err := prepareDBFile(abs); err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(dbBusyTimeout.Milliseconds()))
	q.Set("_journal_mode", "WAL")
	q.Set("_foreign_keys", "1")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q.Encode()}).String()
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("opening database %s: %w", abs, err)
	}
	d := &DB{sql: sdb, path: abs, backend: SQLite}
	if err := d.migrate(ctx, migs); err != nil {
		sdb.Close()
		return nil, err
	}
	return d, nil
}

// prepareDBFile creates the database file with mode 0600 if it is missing
// (so SQLite's WAL and shared-memory files inherit that mode) and checks an
// existing one is a private regular file.
func prepareDBFile(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("creating database directory: %w", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating database: %w", err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("checking database file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: database %s is not a regular file (mode %s); move it aside", ErrInsecureFile, p, fi.Mode())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%w: database %s has mode %04o; run: chmod 600 %s", ErrInsecureFile, p, fi.Mode().Perm(), p)
	}
	return nil
}

// Path names the database in messages: the SQLite file's absolute path, or
// the Postgres DSN without its password.
func (d *DB) Path() string { return d.path }

// Backend reports which database this is.
func (d *DB) Backend() Backend { return d.backend }

// Shared reports whether the nodes of a fleet may share this database
// (Postgres), so that what a store caches can change under it; false for
// SQLite and for a nil DB.
func (d *DB) Shared() bool { return d != nil && d.backend == Postgres }

// QueryContext runs a read-only query outside any transaction. Queries are
// written with ? placeholders for both backends.
func (d *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := d.sql.QueryContext(ctx, d.bind(query), args...)
	return rows, d.Unavailable(err)
}

// QueryRowContext runs a read-only query for one row outside any
// transaction.
func (d *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return d.sql.QueryRowContext(ctx, d.bind(query), args...)
}

// Querier is what reads rows: *DB outside a transaction, *Tx inside one.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Scanner is *sql.Row or *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// Close closes the database. Operations after Close fail.
func (d *DB) Close() error {
	if d.pg != nil {
		d.pg.hub.stop()
	}
	if err := d.sql.Close(); err != nil {
		return fmt.Errorf("closing database %s: %w", d.path, err)
	}
	return nil
}

// SchemaVersion returns the highest migration applied to the database.
func (d *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := d.sql.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading schema version of %s: %w", d.path, err)
	}
	return int(v.Int64), nil
}

// Write runs fn in a write transaction, committing if fn returns nil and
// rolling back otherwise. Transactions are serializable on both backends:
// on SQLite, BEGIN IMMEDIATE, this process's writers taking turns before
// SQLite's lock so that only other processes ever make one wait; on
// Postgres, SERIALIZABLE isolation, and a transaction that lost a race with
// another node's (a serialization failure or deadlock) runs again, up to
// writeAttempts times. fn may therefore run more than once: it must set
// every result it returns through its closure afresh on each run.
func (d *DB) Write(ctx context.Context, fn func(*Tx) error) error {
	return d.write(ctx, sql.LevelSerializable, fn)
}

// write is Write at the given isolation level on Postgres (migrations run
// at read committed, so that a node that waited for another's migration
// lock sees what it committed).
func (d *DB) write(ctx context.Context, level sql.IsolationLevel, fn func(*Tx) error) error {
	if d.backend == SQLite {
		d.wmu.Lock()
		defer d.wmu.Unlock()
		return d.writeOnce(ctx, nil, fn)
	}
	opts := &sql.TxOptions{Isolation: level}
	var err error
	for attempt := 1; ; attempt++ {
		err = d.writeOnce(ctx, opts, fn)
		if err == nil || !retryable(err) || attempt == writeAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * time.Millisecond):
		}
	}
}

// writeOnce is one run of Write's transaction.
func (d *DB) writeOnce(ctx context.Context, opts *sql.TxOptions, fn func(*Tx) error) error {
	stx, err := d.sql.BeginTx(ctx, opts)
	if err != nil {
		return d.Unavailable(fmt.Errorf("starting a transaction on %s: %w", d.path, err))
	}
	tx := &Tx{tx: stx, db: d}
	if err := fn(tx); err != nil {
		stx.Rollback()
		return d.Unavailable(err)
	}
	if err := stx.Commit(); err != nil {
		return d.Unavailable(fmt.Errorf("committing to %s: %w", d.path, err))
	}
	return nil
}

// Tx is a write transaction of Write. Its queries use ? placeholders on
// both backends.
type Tx struct {
	tx *sql.Tx
	db *DB
}

// ExecContext runs a statement in the transaction.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.db.bind(query), args...)
}

// QueryContext runs a query in the transaction.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.db.bind(query), args...)
}

// QueryRowContext runs a query for one row in the transaction.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.db.bind(query), args...)
}

// Notify tells every node listening on channel (DB.Listen) that the object
// named payload changed, when and only when the transaction commits. On
// SQLite, where one node owns the file, it does nothing: stores wake their
// own waiters after the commit and poll for other processes' changes.
func (t *Tx) Notify(ctx context.Context, channel Channel, payload string) error {
	if t.db.backend != Postgres {
		return nil
	}
	if _, err := t.tx.ExecContext(ctx, `SELECT pg_notify($1, $2)`, string(channel), payload); err != nil {
		return fmt.Errorf("notifying %s of %s: %w", channel, payload, err)
	}
	return nil
}

// migrate creates schema_migrations if needed, refuses a schema newer than
// migs, and applies the missing migrations in order.
func (d *DB) migrate(ctx context.Context, migs []migration) error {
	for i, m := range migs {
		if m.version != i+1 {
			return fmt.Errorf("%w: migration %q has version %d, want %d (versions must be consecutive from 1)",
				ErrCorruptState, m.name, m.version, i+1)
		}
	}
	err := d.write(ctx, sql.LevelReadCommitted, func(tx *Tx) error {
		if err := d.lockMigrations(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at TEXT NOT NULL
		)`)
		return err
	})
	if err != nil {
		if d.backend == Postgres {
			return d.Unavailable(fmt.Errorf("preparing the schema of %s (state.dsn): %w%s", d.path, err, pgHint(err)))
		}
		return fmt.Errorf("%w: %s is not a usable SQLite database: %v", ErrCorruptState, d.path, err)
	}
	for _, m := range migs {
		if err := d.apply(ctx, m, len(migs)); err != nil {
			return err
		}
	}
	// A database at a newer version than migs still needs the check when
	// nothing was applied.
	return d.Write(ctx, func(tx *Tx) error { _, err := d.currentVersion(ctx, tx, len(migs)); return err })
}

// apply runs migration m in one transaction unless it is already applied.
// latest is the highest version this binary knows.
func (d *DB) apply(ctx context.Context, m migration, latest int) error {
	return d.write(ctx, sql.LevelReadCommitted, func(tx *Tx) error {
		if err := d.lockMigrations(ctx, tx); err != nil {
			return err
		}
		cur, err := d.currentVersion(ctx, tx, latest)
		if err != nil {
			return err
		}
		if cur >= m.version {
			return nil
		}
		if cur != m.version-1 {
			return fmt.Errorf("%w: %s is at schema version %d but the next migration is %d",
				ErrCorruptState, d.path, cur, m.version)
		}
		if _, err := tx.ExecContext(ctx, m.For(d.backend)); err != nil {
			return fmt.Errorf("applying migration %d (%s) to %s: %w", m.version, m.name, d.path, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
			m.version, FormatTime(time.Now()))
		if err != nil {
			return fmt.Errorf("recording migration %d in %s: %w", m.version, d.path, err)
		}
		return nil
	})
}

// currentVersion reads the schema version inside tx, failing with
// ErrSchemaTooNew if it is above latest.
func (d *DB) currentVersion(ctx context.Context, tx *Tx, latest int) (int, error) {
	var v sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("reading schema version of %s: %w", d.path, err)
	}
	if int(v.Int64) > latest {
		return 0, fmt.Errorf("%w: %s has schema version %d but this aileron knows versions up to %d; "+
			"run a newer aileron, or restore a backup made before the upgrade", ErrSchemaTooNew, d.path, v.Int64, latest)
	}
	return int(v.Int64), nil
}

// WriteRow runs one statement that writes and returns at most one row (an
// INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING, an UPDATE … RETURNING)
// on its own, outside Write, and scans the row into dest; found is false
// when the statement's condition left no row to return. On Postgres it runs
// at read committed, where a conditional update waits for a concurrent one
// and checks its condition against the row that one left: counters that
// many nodes change at once lose no change and need no retry. On SQLite it
// takes this process's turn among writers, like Write.
func (d *DB) WriteRow(ctx context.Context, query string, args []any, dest ...any) (found bool, err error) {
	if d.backend == SQLite {
		d.wmu.Lock()
		defer d.wmu.Unlock()
	}
	err = d.sql.QueryRowContext(ctx, d.bind(query), args...).Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, d.Unavailable(fmt.Errorf("writing to %s: %w", d.path, err))
	}
	return true, nil
}
