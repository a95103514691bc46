package action

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Installed is an action as installed with its connector package.
type Installed struct {
	*Manifest
	// Connector is the FQN of the package the action came from.
	Connector string
	// ConnectorVersion is that package's version.
	ConnectorVersion string
	// Hash is the package's content digest as recorded at install.
	Hash string
}

// Catalog is an immutable snapshot of the installed actions; the daemon
// builds a new one on reload and swaps it atomically. A nil *Catalog is
// empty. It is safe for concurrent use.
type Catalog struct {
	acts    []Installed    // sorted by name
	byName  map[string]int // name and ToolName → index into acts
	version string
}

// NewCatalog builds a catalog from acts. Two actions with the same name, or
// whose names map to the same ToolName, are an error naming both and their
// connectors; so is an entry without a manifest. Every failure wraps
// ErrConflict; all problems are joined with errors.Join.
func NewCatalog(acts []Installed) (*Catalog, error) {
	c := &Catalog{byName: map[string]int{}}
	var errs []error
	for i, a := range acts {
		if a.Manifest == nil {
			errs = append(errs, fmt.Errorf("%w: entry %d (connector %s) has no manifest", ErrConflict, i, quote(a.Connector)))
			continue
		}
		c.acts = append(c.acts, a)
	}
	sort.SliceStable(c.acts, func(i, j int) bool { return c.acts[i].Name < c.acts[j].Name })
	for i, a := range c.acts {
		for _, key := range []string{a.Name, a.ToolName()} {
			if j, dup := c.byName[key]; dup && j != i {
				b := c.acts[j]
				errs = append(errs, fmt.Errorf("%w: action %s from %s (%s) and action %s from %s (%s) are both installed as %s; uninstall one of the packages or rename one action",
					ErrConflict, quote(b.Name), quote(b.Connector), b.File, quote(a.Name), quote(a.Connector), a.File, quote(key)))
				break
			}
			c.byName[key] = i
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.version = digest(c.acts)
	return c, nil
}

// List returns the installed actions sorted by name, in a new slice.
func (c *Catalog) List() []Installed {
	if c == nil {
		return nil
	}
	return append([]Installed(nil), c.acts...)
}

// Lookup finds an action by name ("send-email") or ToolName ("send_email").
func (c *Catalog) Lookup(name string) (Installed, bool) {
	if c == nil {
		return Installed{}, false
	}
	i, ok := c.byName[name]
	if !ok {
		return Installed{}, false
	}
	return c.acts[i], true
}

// Version is a stable digest of the set: hex SHA-256 over the sorted
// (name, version, hash) of every action, plus its connector, connector
// version and manifest content, so any change a client could see changes
// it. Equal sets give equal versions across processes.
func (c *Catalog) Version() string {
	if c == nil {
		return digest(nil)
	}
	return c.version
}

// digest hashes acts, which are sorted by name, with length-prefixed
// fields so no two different sets collide by concatenation.
func digest(acts []Installed) string {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, a := range acts {
		field(a.Name)
		field(a.Version)
		field(a.Hash)
		field(a.Connector)
		field(a.ConnectorVersion)
		field(contentDigest(a.Manifest))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// contentDigest hashes what a client sees of m (everything but File).
// encoding/json sorts map keys, so the result is deterministic.
func contentDigest(m *Manifest) string {
	cp := *m
	cp.File = ""
	b, err := json.Marshal(&cp)
	if err != nil { // unreachable for parsed manifests: values are JSON-shaped
		return "unmarshalable:" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
