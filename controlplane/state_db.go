package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// importedSuffix is appended to a pre-SQLite state file once its content is
// in the database.
const importedSuffix = ".imported"

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// stateDB resolves the database a Store, Sessions or Bindings keeps its rows
// in: the one it was given, or else one it opens itself on first use (and
// closes in close). It also remembers whether the one-time import of older
// state files has run in this process.
type stateDB struct {
	mu       sync.Mutex
	own      *DB // opened by get when no DB was given
	imported bool
}

// get returns given if non-nil, else the database file DBFileName in the
// parent directory of near (near is $AILERON_HOME/store, .../sessions or
// .../bindings.json, so that is $AILERON_HOME/aileron.db), opened once. Then,
// until it first succeeds, it runs importFn (nil means nothing to import).
func (o *stateDB) get(given *DB, near string, importFn func(*DB) error) (*DB, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	db := given
	if db == nil {
		if o.own == nil {
			own, err := OpenDB(filepath.Join(filepath.Dir(filepath.Clean(near)), DBFileName))
			if err != nil {
				return nil, err
			}
			o.own = own
		}
		db = o.own
	}
	if !o.imported && importFn != nil {
		if err := importFn(db); err != nil {
			return nil, err
		}
	}
	o.imported = true
	return db, nil
}

// close closes the database get opened itself, if any.
func (o *stateDB) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.own == nil {
		return nil
	}
	err := o.own.Close()
	o.own, o.imported = nil, false
	return err
}

// importFile imports the pre-SQLite state file once: if file exists and the
// database has no state_imports row for kind, load(tx, data) runs in a write
// transaction with the file's content (at most limit bytes) together with
// recording the import, and after the commit the file is renamed
// file + ".imported". load returns false to leave the file alone (for
// instance because the table already has rows); then nothing is recorded.
// logf reports what happened. Errors from load are returned as they are
// (they name the file); a file already imported is left in place and logged.
func (d *DB) importFile(kind, file string, limit int64, logf func(string, ...any),
	load func(ctx context.Context, tx *sql.Tx, data []byte) (bool, error)) error {
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ctx := context.Background()
	var done, already bool
	err := d.write(ctx, func(tx *sql.Tx) error {
		var when string
		err := tx.QueryRowContext(ctx, `SELECT imported_at FROM state_imports WHERE kind = ?`, kind).Scan(&when)
		if err == nil {
			already = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reading state_imports in %s: %w", d.path, err)
		}
		data, err := readBounded(file, limit)
		if err != nil {
			return fmt.Errorf("importing %s into %s: %w", file, d.path, err)
		}
		if done, err = load(ctx, tx, data); err != nil || !done {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO state_imports (kind, file, imported_at) VALUES (?, ?, ?)`,
			kind, file, fmtTime(time.Now()))
		if err != nil {
			return fmt.Errorf("recording the import of %s in %s: %w", file, d.path, err)
		}
		return nil
	})
	switch {
	case err != nil:
		return err
	case already:
		logf("state: %s was already imported into %s; it is ignored (remove it)", file, d.path)
	case !done:
		logf("state: %s not imported: %s already holds %s; it is ignored (remove it)", file, d.path, kind)
	default:
		if err := os.Rename(file, file+importedSuffix); err != nil {
			logf("state: imported %s into %s but could not rename it: %v (remove it)", file, d.path, err)
			return nil
		}
		logf("state: imported %s into %s; the old file is now %s", file, d.path, file+importedSuffix)
	}
	return nil
}

// tableEmpty reports whether table has no rows.
func tableEmpty(ctx context.Context, tx *sql.Tx, table string) (bool, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		return false, fmt.Errorf("counting rows of %s: %w", table, err)
	}
	return n == 0, nil
}

// parseStateTime reads a time stored with fmtTime; what names the value in
// the error, which wraps ErrCorruptState.
func parseStateTime(db *DB, what, s string) (time.Time, error) {
	t, err := time.ParseInLocation(dbTimeLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %s %q is not a time: %v", ErrCorruptState, db.path, what, s, err)
	}
	return t, nil
}

// discardf is a Logf that drops its lines.
func discardf(string, ...any) {}
