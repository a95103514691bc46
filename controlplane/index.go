package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// indexSchema identifies the pre-SQLite index.json format.
const indexSchema = "aileron.store.index.v1"

// storeIndex is the store index: for each connector FQN, its installed
// versions and which one is active. It is read from the store_versions table
// (loadIndex) and was once the content of Dir/index.json (decodeIndex, for
// the one-time import).
type storeIndex struct {
	Schema     string                     `json:"schema"`
	Connectors map[string]*indexConnector `json:"connectors"`
}

// indexConnector is one FQN's entry in the index.
type indexConnector struct {
	Active   string                  `json:"active"`
	Versions map[string]indexVersion `json:"versions"`
}

// indexVersion records one installed version of a connector.
type indexVersion struct {
	Hash        string    `json:"hash"`
	InstalledAt time.Time `json:"installed_at"`
}

// newIndex returns an empty index.
func newIndex() *storeIndex {
	return &storeIndex{Schema: indexSchema, Connectors: map[string]*indexConnector{}}
}

// decodeIndex parses and validates an index read from file. Every failure
// wraps ErrCorruptState and names file.
func decodeIndex(file string, data []byte) (*storeIndex, error) {
	ix := newIndex()
	if err := json.Unmarshal(data, ix); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (restore it from a backup, or move it away and reinstall the connectors)", ErrCorruptState, file, err)
	}
	if ix.Schema != indexSchema {
		return nil, fmt.Errorf("%w: %s: schema is %q, want %q", ErrCorruptState, file, ix.Schema, indexSchema)
	}
	if ix.Connectors == nil {
		ix.Connectors = map[string]*indexConnector{}
	}
	for fqn, c := range ix.Connectors {
		if err := validateIndexEntry(fqn, c); err != nil {
			return nil, fmt.Errorf("%w: %s: connectors[%q]: %v", ErrCorruptState, file, fqn, err)
		}
	}
	return ix, nil
}

// validateIndexEntry checks one FQN's entry: a well-formed FQN, at least one
// version, strict SemVer keys, 64-hex hashes and an active version that is
// installed. Hashes name directories, so this also keeps index content from
// reaching outside the store.
func validateIndexEntry(fqn string, c *indexConnector) error {
	if err := policy.CheckFQN(fqn); err != nil {
		return errors.New(policyMessage(err))
	}
	if c == nil || len(c.Versions) == 0 {
		return errors.New("no versions")
	}
	for v, e := range c.Versions {
		if err := policy.CheckSemVer(v); err != nil {
			return errors.New(policyMessage(err))
		}
		if !isHexHash(e.Hash) {
			return fmt.Errorf("versions[%q].hash %q is not 64 lower-case hex digits", v, e.Hash)
		}
	}
	if _, ok := c.Versions[c.Active]; !ok {
		return fmt.Errorf("active version %q is not installed", c.Active)
	}
	return nil
}

// isHexHash reports whether s is a lower-case hex SHA-256.
func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// readIndex loads the store index from the database (importing a
// pre-SQLite Dir/index.json on first use). Content failures wrap
// ErrCorruptState.
func (s *Store) readIndex() (*storeIndex, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	return loadIndex(context.Background(), db.sql, db)
}

// indexPath is Dir/index.json, the index of stores made before the index
// moved into the database; Store imports it once.
func (s *Store) indexPath() string { return filepath.Join(s.Dir, "index.json") }
