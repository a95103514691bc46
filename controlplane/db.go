package controlplane

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

// DBFileName is the control-plane database's file name inside $AILERON_HOME.
const DBFileName = "aileron.db"

// dbBusyTimeout is how long a statement waits for another connection or
// process holding the write lock before failing with SQLITE_BUSY.
const dbBusyTimeout = 10 * time.Second

// dbTimeLayout is how times are stored: UTC, fixed width, so that text
// comparison in SQL orders them like time.Time.Before.
const dbTimeLayout = "2006-01-02T15:04:05.000000000Z"

// ErrSchemaTooNew is wrapped by OpenDB when the database was migrated by a
// newer aileron than this binary: opening it could corrupt data the newer
// schema relies on.
var ErrSchemaTooNew = errors.New("database schema is newer than this aileron binary")

// DB is the daemon's persistent control-plane state, a SQLite database
// (normally $AILERON_HOME/aileron.db, mode 0600) opened in WAL mode with a
// busy timeout and foreign keys on. It holds approvals, action runs, session
// metadata, the connector store index and credential bindings metadata.
// What must stay a file stays one: each session's CA private key (0600,
// sessions/<id>/), connector package bytes (store/connectors/sha256/<hash>/)
// and secrets (the age-encrypted vault).
//
// A DB is safe for concurrent use, and several processes may open the same
// file: writes take SQLite's write lock at BEGIN (BEGIN IMMEDIATE) and wait
// for it up to the busy timeout.
type DB struct {
	sql  *sql.DB
	path string
	// wmu serialises this process's write transactions, so that only other
	// processes ever make a writer wait in SQLite's busy handler.
	wmu sync.Mutex
}

// migration is one step of the schema. Versions start at 1 and are
// consecutive; a released migration is never edited, only followed by a new
// one.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the schema steps in order. Migration N is applied, in
// its own transaction, to a database at version N-1.
func migrations() []migration {
	return append([]migration{
		{version: 1, name: "approvals", sql: `
CREATE TABLE approvals (
	id          TEXT PRIMARY KEY,
	session     TEXT NOT NULL,
	digest      TEXT NOT NULL,
	state       TEXT NOT NULL CHECK (state IN ('pending','approved','denied','expired','consumed')),
	preview     TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	expires_at  TEXT NOT NULL,
	decided_at  TEXT,
	decided_by  TEXT NOT NULL DEFAULT '',
	reason      TEXT NOT NULL DEFAULT '',
	consumed_at TEXT
) STRICT;
CREATE INDEX approvals_session_digest_state ON approvals (session, digest, state);
CREATE INDEX approvals_state_expires ON approvals (state, expires_at);
-- At most one live (pending or approved) approval per session and digest:
-- a retry joins it instead of asking twice.
CREATE UNIQUE INDEX approvals_live ON approvals (session, digest)
	WHERE state IN ('pending','approved');
`},
		{version: 2, name: "action_runs", sql: `
CREATE TABLE action_runs (
	id          TEXT PRIMARY KEY,          -- the approval id when one is involved, else "ar_…"
	session     TEXT NOT NULL,
	action      TEXT NOT NULL,             -- action name
	version     TEXT NOT NULL,
	connector   TEXT NOT NULL,             -- FQN of the package the action came from
	args        TEXT NOT NULL,             -- canonical JSON
	status      TEXT NOT NULL CHECK (status IN ('pending_approval','running','completed','denied','failed')),
	approval_id TEXT NOT NULL DEFAULT '',  -- approval the run currently waits on
	next_step   INTEGER NOT NULL DEFAULT 0,
	outputs     TEXT NOT NULL DEFAULT '{}',-- step id → decoded output
	result      TEXT NOT NULL DEFAULT '',  -- JSON ActionResult once final
	created_at  TEXT NOT NULL,
	updated_at  TEXT NOT NULL
) STRICT;
CREATE INDEX action_runs_approval ON action_runs (approval_id);
`},
	}, stateMigrations()...)
}

// stateMigrations are the steps that moved the file-based state (store
// index, sessions, bindings) into the database.
func stateMigrations() []migration {
	return []migration{
		{version: 3, name: "state_imports", sql: `
-- Unused: meant for a one-time import of pre-SQLite state files, a format
-- no release ever had (the import is gone; the table stays, since a
-- released migration is never edited).
CREATE TABLE state_imports (
	kind        TEXT PRIMARY KEY,          -- 'store_index' or 'bindings'
	file        TEXT NOT NULL,             -- the file imported, now renamed file + '.imported'
	imported_at TEXT NOT NULL
) STRICT;
`},
		{version: 4, name: "store_versions", sql: `
-- The connector store index; package bytes stay content-addressed on disk
-- under store/connectors/sha256/<hash>/.
CREATE TABLE store_versions (
	fqn          TEXT NOT NULL,
	version      TEXT NOT NULL,            -- strict SemVer
	hash         TEXT NOT NULL CHECK (length(hash) = 64 AND hash NOT GLOB '*[^0-9a-f]*'),
	active       INTEGER NOT NULL DEFAULT 0 CHECK (active IN (0, 1)),
	installed_at TEXT NOT NULL,
	PRIMARY KEY (fqn, version)
) STRICT;
-- At most one active version per connector (the store keeps exactly one).
CREATE UNIQUE INDEX store_versions_active ON store_versions (fqn) WHERE active = 1;
CREATE INDEX store_versions_hash ON store_versions (hash);
`},
		{version: 5, name: "sessions", sql: `
-- Session metadata; each session's CA (private key mode 0600) stays in
-- sessions/<id>/ on disk.
CREATE TABLE sessions (
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL DEFAULT '',
	token_sha256 TEXT NOT NULL,            -- hex SHA-256 of the token; the token is never stored
	connectors   TEXT NOT NULL DEFAULT '[]', -- JSON array of FQNs; empty means every installed connector
	created_at   TEXT NOT NULL,
	expires_at   TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_expires ON sessions (expires_at);
`},
		{version: 6, name: "bindings", sql: `
-- Credential bindings metadata; secrets stay in the age-encrypted vault.
CREATE TABLE bindings (
	connector  TEXT PRIMARY KEY,           -- connector FQN
	credential TEXT NOT NULL,              -- vault entry name
	header     TEXT NOT NULL DEFAULT '',
	format     TEXT NOT NULL DEFAULT '',
	query      TEXT NOT NULL DEFAULT '',
	env        TEXT NOT NULL DEFAULT '',
	updated_at TEXT NOT NULL
) STRICT;
`},
	}
}

// OpenDB opens (creating if needed, mode 0600, parent directory 0700) the
// control-plane database at path and brings its schema up to date, applying
// each missing migration in its own transaction. Reopening an up-to-date
// database changes nothing.
//
// Errors: a database whose schema is newer than this binary knows wraps
// ErrSchemaTooNew; a path that is a symlink, not a regular file, or readable
// by group or others wraps ErrInsecureFile; a file that is not a SQLite
// database or whose schema_migrations table is inconsistent wraps
// ErrCorruptState; file-system failures wrap their *fs.PathError.
func OpenDB(path string) (*DB, error) {
	return openDB(path, migrations())
}

// openDB is OpenDB with the migration list as a parameter, for tests.
func openDB(path string, migs []migration) (*DB, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: database path is empty; use $AILERON_HOME/%s", ErrInvalidArgument, DBFileName)
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
	d := &DB{sql: sdb, path: abs}
	if err := d.migrate(context.Background(), migs); err != nil {
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

// Path returns the database file's absolute path.
func (d *DB) Path() string { return d.path }

// Close closes the database. Operations after Close fail.
func (d *DB) Close() error {
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

// write runs fn in a write transaction (BEGIN IMMEDIATE), committing if fn
// returns nil and rolling back otherwise.
func (d *DB) write(ctx context.Context, fn func(*sql.Tx) error) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	tx, err := d.sql.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("starting a transaction on %s: %w", d.path, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing to %s: %w", d.path, err)
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
	err := d.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			applied_at TEXT NOT NULL
		)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: %s is not a usable SQLite database: %v", ErrCorruptState, d.path, err)
	}
	for _, m := range migs {
		if err := d.apply(ctx, m, len(migs)); err != nil {
			return err
		}
	}
	// A database at a newer version than migs still needs the check when
	// nothing was applied.
	return d.write(ctx, func(tx *sql.Tx) error { _, err := d.currentVersion(ctx, tx, len(migs)); return err })
}

// apply runs migration m in one transaction unless it is already applied.
// latest is the highest version this binary knows.
func (d *DB) apply(ctx context.Context, m migration, latest int) error {
	return d.write(ctx, func(tx *sql.Tx) error {
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
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("applying migration %d (%s) to %s: %w", m.version, m.name, d.path, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
			m.version, time.Now().UTC().Format(dbTimeLayout))
		if err != nil {
			return fmt.Errorf("recording migration %d in %s: %w", m.version, d.path, err)
		}
		return nil
	})
}

// currentVersion reads the schema version inside tx, failing with
// ErrSchemaTooNew if it is above latest.
func (d *DB) currentVersion(ctx context.Context, tx *sql.Tx, latest int) (int, error) {
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
