package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/state"
)

// database returns the Store's database; a Store without Dir or DB wraps
// state.ErrInvalidArgument.
func (s *Store) database() (*state.DB, error) {
	if err := s.checkDir(); err != nil {
		return nil, err
	}
	if s.DB == nil {
		return nil, fmt.Errorf("%w: Store.DB is nil; open $AILERON_HOME/%s with state.Open", state.ErrInvalidArgument, state.FileName)
	}
	return s.DB, nil
}

// loadIndex reads the whole store index from q and validates it like a
// decoded index: well-formed FQNs, strict SemVer, 64-hex hashes and
// exactly one active version per connector. Content failures wrap
// state.ErrCorruptState and name the database, the table and the connector.
func loadIndex(ctx context.Context, q state.Querier, db *state.DB) (*storeIndex, error) {
	rows, err := q.QueryContext(ctx, `SELECT fqn, version, hash, active, quarantined, installed_at FROM store_versions`)
	if err != nil {
		return nil, fmt.Errorf("reading the store index from %s: %w", db.Path(), err)
	}
	defer rows.Close()
	ix := newIndex()
	for rows.Next() {
		var fqn, version, hash, at string
		var active, quarantined bool
		if err := rows.Scan(&fqn, &version, &hash, &active, &quarantined, &at); err != nil {
			return nil, fmt.Errorf("reading the store index from %s: %w", db.Path(), err)
		}
		when, err := db.ParseTime("store_versions "+fqn+"@"+version+" installed_at", at)
		if err != nil {
			return nil, err
		}
		c := ix.Connectors[fqn]
		if c == nil {
			c = &indexConnector{Versions: map[string]indexVersion{}}
			ix.Connectors[fqn] = c
		}
		c.Versions[version] = indexVersion{Hash: hash, InstalledAt: when, Quarantined: quarantined}
		if active {
			c.Active = version
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the store index from %s: %w", db.Path(), err)
	}
	for fqn, c := range ix.Connectors {
		if err := validateIndexEntry(fqn, c); err != nil {
			return nil, fmt.Errorf("%w: %s: table store_versions, connector %q: %v "+
				"(restore a backup of the database, or fix the row with sqlite3)", state.ErrCorruptState, db.Path(), fqn, err)
		}
	}
	return ix, nil
}

// update runs fn in one write transaction with the index as it stands in
// it. SQLite's write lock (BEGIN IMMEDIATE) serialises updates across
// goroutines and processes, and covers fn's moves of package directories.
func (s *Store) update(ctx context.Context, fn func(ctx context.Context, tx *state.Tx, ix *storeIndex) error) error {
	db, err := s.database()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("creating store directory: %w", err)
	}
	return db.Write(ctx, func(tx *state.Tx) error {
		ix, err := loadIndex(ctx, tx, db)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx, ix); err != nil {
			return err
		}
		// The other nodes of a fleet reload their policy.
		return tx.Notify(ctx, state.ChannelStore, "index")
	})
}

// activateVersion records fqn@version (inserting it with hash and at if it
// is new) as fqn's only active version.
func activateVersion(ctx context.Context, tx *state.Tx, fqn, version, hash string, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE store_versions SET active = 0 WHERE fqn = ? AND active = 1`, fqn); err != nil {
		return fmt.Errorf("recording %s@%s in the store index: %w", fqn, version, err)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO store_versions (fqn, version, hash, active, installed_at)
		VALUES (?, ?, ?, 1, ?) ON CONFLICT (fqn, version) DO UPDATE SET active = 1, quarantined = 0`, fqn, version, hash, state.FormatTime(at))
	if err != nil {
		return fmt.Errorf("recording %s@%s in the store index: %w", fqn, version, err)
	}
	return nil
}

// quarantineVersion records fqn@version (inserting it with hash and at if
// it is new) as installed but not served. It is never the active version.
func quarantineVersion(ctx context.Context, tx *state.Tx, fqn, version, hash string, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO store_versions (fqn, version, hash, active, quarantined, installed_at)
		VALUES (?, ?, ?, 0, 1, ?) ON CONFLICT (fqn, version) DO UPDATE SET quarantined = 1`, fqn, version, hash, state.FormatTime(at))
	if err != nil {
		return fmt.Errorf("recording %s@%s in the store index: %w", fqn, version, err)
	}
	return nil
}

// deleteVersion removes fqn@version and its consent from the index and, if
// newActive is not empty, makes that version active.
func deleteVersion(ctx context.Context, tx *state.Tx, fqn, version, newActive string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM store_versions WHERE fqn = ? AND version = ?`, fqn, version); err != nil {
		return fmt.Errorf("removing %s@%s from the store index: %w", fqn, version, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM store_consents WHERE fqn = ? AND version = ?`, fqn, version); err != nil {
		return fmt.Errorf("removing the consent of %s@%s: %w", fqn, version, err)
	}
	if newActive == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `UPDATE store_versions SET active = 1 WHERE fqn = ? AND version = ?`, fqn, newActive)
	if err != nil {
		return fmt.Errorf("activating %s@%s in the store index: %w", fqn, newActive, err)
	}
	return nil
}

// movePackageAside renames the package directory of hash into a new
// staging directory, which it returns ("" if there was nothing to move).
// The caller restores it (restorePackage) if the index change fails, and
// deletes the staging directory.
func (s *Store) movePackageAside(hash string) (string, error) {
	staging, err := s.newStaging()
	if err != nil {
		return "", err
	}
	err = os.Rename(s.packageDir(hash), filepath.Join(staging, "removed"))
	if os.IsNotExist(err) {
		os.RemoveAll(staging)
		return "", nil
	}
	if err != nil {
		os.RemoveAll(staging)
		return "", fmt.Errorf("removing package %s: %w", s.packageDir(hash), err)
	}
	return staging, nil
}

// restorePackage puts a package moved aside by movePackageAside back,
// unless another install placed one meanwhile.
func (s *Store) restorePackage(staging, hash string) {
	if err := os.Rename(filepath.Join(staging, "removed"), s.packageDir(hash)); err != nil {
		s.log().Error().Str("event", "store.restore_failed").Str("dir", s.packageDir(hash)).Err(err).
			Msg("could not put a package back after a failed removal; reinstall it")
	}
}
