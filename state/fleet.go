package state

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// FleetKey is the secret every node of a fleet holds in the same file:
// what each node derives from it (session CA keys, session tokens) is the
// same on every node, so any node serves any session. The key itself never
// enters the database; only its id does, so that a node holding another key
// is refused.
type FleetKey struct {
	key []byte
	id  string
	// Created is set when LoadFleetKey made the key (the fleet's first
	// node): it must now be backed up and copied to every node.
	Created bool
}

// ID is the key's public identifier: hex of HMAC-SHA256(key, "aileron
// fleet key id"), first 8 bytes.
func (k *FleetKey) ID() string { return k.id }

// Derive returns n bytes for purpose and context:
// HKDF-SHA256(key, info = purpose NUL context). Distinct purposes give
// independent keys.
func (k *FleetKey) Derive(purpose, context string, n int) []byte {
	out, err := hkdf.Key(sha256.New, k.key, nil, purpose+"\x00"+context, n)
	if err != nil { // only for n beyond 255*32 bytes: a programming error
		return nil
	}
	return out
}

func newFleetKey(key []byte) *FleetKey {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("aileron fleet key id"))
	return &FleetKey{key: key, id: hex.EncodeToString(mac.Sum(nil)[:8])}
}

// LoadFleetKey returns the fleet key in path (KeySize bytes, mode 0600)
// after checking that it is the key of db's fleet: the first node to start
// on a database records the key's id; every later node must hold the same
// key. When path does not exist and db has no fleet yet, a new key is made
// and recorded (the file is written only once the record is in, so a race
// between two first nodes leaves one fleet key). Errors: a key another fleet
// holds, or no key file while the fleet has one, wrap ErrConflict and say
// which file to copy; a file others may read wraps ErrInsecureFile.
func LoadFleetKey(ctx context.Context, db *DB, path string) (*FleetKey, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return createFleetKey(ctx, db, path)
	}
	key, err := LoadOrCreateKey(path, "fleet key")
	if err != nil {
		return nil, err
	}
	fk := newFleetKey(key)
	if err := registerFleetKey(ctx, db, fk, path); err != nil {
		return nil, err
	}
	return fk, nil
}

// createFleetKey makes the fleet's first key, or explains where to get it.
func createFleetKey(ctx context.Context, db *DB, path string) (*FleetKey, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating the fleet key: %w", err)
	}
	fk := newFleetKey(key)
	suffix := make([]byte, 6)
	rand.Read(suffix)
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new-"+hex.EncodeToString(suffix)) // nodes may share the directory
	if err := CreatePrivateFile(tmp, key, "fleet key"); err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := registerFleetKey(ctx, db, fk, path); err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		return nil, fmt.Errorf("saving the fleet key %s (recorded as %s in %s: put the key in place by hand): %w", path, fk.id, db.Path(), err)
	}
	fk.Created = true
	return fk, nil
}

// registerFleetKey records fk as db's fleet key, or checks it is the one
// recorded.
func registerFleetKey(ctx context.Context, db *DB, fk *FleetKey, path string) error {
	return db.Write(ctx, func(tx *Tx) error {
		var have string
		err := tx.QueryRowContext(ctx, `SELECT key_id FROM fleet WHERE id = 1`).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO fleet (id, key_id, created_at) VALUES (1, ?, ?)`, fk.id, FormatTime(time.Now()))
			return err
		case err != nil:
			return fmt.Errorf("reading the fleet key id from %s: %w", db.Path(), err)
		case have == fk.id:
			return nil
		}
		if _, statErr := os.Lstat(path); errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("%w: no fleet key at %s, and the fleet on %s already has one (id %s); "+
				"copy the fleet key file from one of its nodes to %s (mode 0600)", ErrConflict, path, db.Path(), have, path)
		}
		return fmt.Errorf("%w: the fleet key %s (id %s) is not the key of the fleet on %s (id %s); "+
			"replace it with the fleet key file of one of its nodes (mode 0600)", ErrConflict, path, fk.id, db.Path(), have)
	})
}
