package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// storeIndex is the store index: for each connector FQN, its installed
// versions and which one is active, as read from the store_versions table
// (loadIndex).
type storeIndex struct {
	Connectors map[string]*indexConnector
}

// indexConnector is one FQN's entry in the index.
type indexConnector struct {
	Active   string
	Versions map[string]indexVersion
}

// indexVersion records one installed version of a connector.
type indexVersion struct {
	Hash        string
	InstalledAt time.Time
	// Quarantined is true for a version installed but not served: it asks
	// for more than the active version's consent (see Approve).
	Quarantined bool
}

// newIndex returns an empty index.
func newIndex() *storeIndex {
	return &storeIndex{Connectors: map[string]*indexConnector{}}
}

// validateIndexEntry checks one FQN's entry: a well-formed FQN, at least one
// version, strict SemVer keys, 64-hex hashes and an active version that is
// installed. Hashes name directories, so this also keeps index content from
// reaching outside the store.
func validateIndexEntry(fqn string, c *indexConnector) error {
	if err := policy.CheckFQN(fqn); err != nil {
		return err
	}
	if c == nil || len(c.Versions) == 0 {
		return errors.New("no versions")
	}
	for v, e := range c.Versions {
		if err := policy.CheckSemVer(v); err != nil {
			return err
		}
		if !isHexHash(e.Hash) {
			return fmt.Errorf("versions[%q].hash %q is not 64 lower-case hex digits", v, e.Hash)
		}
	}
	if e, ok := c.Versions[c.Active]; !ok {
		return fmt.Errorf("active version %q is not installed", c.Active)
	} else if e.Quarantined {
		return fmt.Errorf("active version %q is quarantined", c.Active)
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

// readIndex loads the store index from the database. Content failures wrap
// state.ErrCorruptState.
func (s *Store) readIndex(ctx context.Context) (*storeIndex, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	return loadIndex(ctx, db, db)
}
