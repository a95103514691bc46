package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// indexSchema identifies the store index format.
const indexSchema = "aileron.store.index.v1"

// storeIndex is the content of Dir/index.json: for each connector FQN, its
// installed versions and which one is active.
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

// readIndex loads Dir/index.json; a missing file is an empty index.
func (s *Store) readIndex() (*storeIndex, error) {
	p := s.indexPath()
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return newIndex(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading store index: %w", err)
	}
	return decodeIndex(p, data)
}

// writeIndex replaces Dir/index.json atomically (temp file, fsync, rename).
func (s *Store) writeIndex(ix *storeIndex) error {
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding store index: %w", err)
	}
	f, err := os.CreateTemp(s.Dir, ".index-*.json")
	if err != nil {
		return fmt.Errorf("writing store index: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.indexPath())
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing store index: %w", err)
	}
	return nil
}

// indexPath is Dir/index.json.
func (s *Store) indexPath() string { return filepath.Join(s.Dir, "index.json") }
