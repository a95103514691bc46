package controlplane

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
	"unicode"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Session limits and defaults.
const (
	// DefaultSessionTTL is the lifetime of a session created without a TTL
	// when Sessions.DefaultTTL is zero.
	DefaultSessionTTL = 24 * time.Hour
	// MaxSessionTTL bounds a session's lifetime.
	MaxSessionTTL = 366 * 24 * time.Hour
	// MaxSessionNameLen bounds a session's name, in bytes.
	MaxSessionNameLen = 128
	// caValidityMargin is how much longer a session's CA lives than the
	// session, so that the CA never expires under a live session.
	caValidityMargin = time.Hour
)

// CreateRequest asks for a new session. In JSON, TTL is a Go duration string
// ("90m", "8h"); the zero TTL means the default.
type CreateRequest struct {
	// Name is an optional label (at most MaxSessionNameLen bytes, no control
	// characters).
	Name string
	// TTL is the session's lifetime; zero means Sessions.DefaultTTL.
	TTL time.Duration
	// Connectors limits the session to these connector FQNs; empty means
	// every installed connector.
	Connectors []string
}

// createRequestJSON is CreateRequest's wire form.
type createRequestJSON struct {
	Name       string   `json:"name,omitempty"`
	TTL        string   `json:"ttl,omitempty"`
	Connectors []string `json:"connectors,omitempty"`
}

// MarshalJSON writes TTL as a Go duration string.
func (r CreateRequest) MarshalJSON() ([]byte, error) {
	w := createRequestJSON{Name: r.Name, Connectors: r.Connectors}
	if r.TTL != 0 {
		w.TTL = r.TTL.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads TTL as a Go duration string and rejects unknown
// fields. Failures wrap ErrInvalidArgument.
func (r *CreateRequest) UnmarshalJSON(data []byte) error {
	var w createRequestJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: session request: %v", ErrInvalidArgument, err)
	}
	var ttl time.Duration
	if w.TTL != "" {
		d, err := time.ParseDuration(w.TTL)
		if err != nil {
			return fmt.Errorf("%w: session request: ttl %q is not a duration; write it like 30m, 8h or 72h", ErrInvalidArgument, w.TTL)
		}
		ttl = d
	}
	*r = CreateRequest{Name: w.Name, TTL: ttl, Connectors: w.Connectors}
	return nil
}

// SessionInfo is what the control plane shows about a session. ProxyURL
// carries the session's secret token: it is set only by Create and Get.
type SessionInfo struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Connectors is the session's scope; empty means every installed
	// connector.
	Connectors []string `json:"connectors,omitempty"`
	// ProxyURL is http://ID:TOKEN@ProxyURLHost.
	ProxyURL string `json:"proxy_url,omitempty"`
	// CACertPath is the session CA certificate (PEM).
	CACertPath string `json:"ca_cert_path"`
	// CABundlePath is the session CA followed by the system roots (PEM), for
	// clients that take a single trust file and also reach passthrough hosts.
	CABundlePath string `json:"ca_bundle_path"`
	// Placeholders maps an SDK's API-key variable (e.g. LINEAR_API_KEY) to
	// this session's placeholder value, which the proxy swaps for the real
	// credential on matched operations. Set by GET /v1/sessions/{id} only.
	Placeholders map[string]string `json:"placeholders,omitempty"`
}

// Sessions manages proxy sessions: each has an id, a secret token, a TTL, a
// connector scope and its own root CA. A session's metadata (id, name, token
// hash, times, connectors) is a row of the sessions table in the
// control-plane database; its CA (private key mode 0600) and CA bundle stay
// on disk in Dir/<id>/ (mode 0700). Open loads every session into memory, so
// that Authenticate, the proxy's hot path, touches neither disk nor
// database.
//
// The token is not stored: it is derived as HMAC-SHA256(session key, id)
// truncated to 192 bits (base64url), so the daemon can show a session's env
// again, while the database holds only the token's SHA-256. The session key
// (32 random bytes, 0600) lives in KeyFile; replacing it makes existing
// sessions unusable.
//
// Call Open before anything else. Methods are safe for concurrent use. A
// Sessions must not be copied after first use.
type Sessions struct {
	// Dir is the sessions directory, normally $AILERON_HOME/sessions. Required.
	Dir string
	// DB is the control-plane database holding session metadata. Required.
	DB *state.DB
	// KeyFile is the session key, normally $AILERON_HOME/keys/session.key.
	// Required; created by Open if missing.
	KeyFile string
	// ProxyURLHost is the proxy's host:port as sandboxes reach it, written
	// into ProxyURL. Required.
	ProxyURLHost string
	// Now is the clock for creation and expiry. Nil means time.Now.
	Now func() time.Time
	// DefaultTTL applies when a CreateRequest has no TTL. Zero means
	// DefaultSessionTTL.
	DefaultTTL time.Duration
	// SystemRoots lists candidate system CA bundle files; the first that
	// exists is appended to each session's ca-bundle.pem. Nil means the usual
	// Debian/Alpine, Fedora/RHEL, openSUSE and macOS/BSD locations.
	SystemRoots []string
	// Logf receives one line per created, deleted, expired or unloadable
	// session. Nil discards them.
	Logf func(format string, args ...any)

	mu   sync.RWMutex
	key  []byte                   // nil until Open
	db   *state.DB                // nil until Open
	live map[string]*sessionEntry // by id
	// retired sums the leaf-cache counters of removed sessions, so CertStats
	// never goes backwards.
	retired ca.Stats
}

// sessionEntry is a live session in memory.
type sessionEntry struct {
	rec       sessionRecord
	tokenHash [sha256.Size]byte
	dp        *dataplane.Session // handed out by Authenticate, immutable
}

// sessionRecord is a session's metadata: a row of the sessions table.
type sessionRecord struct {
	ID          string
	Name        string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Connectors  []string
	TokenSHA256 string
}

// Open loads the session key (creating it if missing) and loads every
// session that is intact and unexpired, so sessions survive a daemon
// restart. Expired sessions are deleted; sessions that cannot be loaded are
// logged and skipped (Delete still removes them). Failures: a missing field
// (Dir, DB, KeyFile, ProxyURLHost) wraps ErrInvalidArgument; a
// key file others may read wraps ErrInsecureFile; a key of the wrong size
// wraps ErrCorruptState; the database's failures are OpenDB's.
func (s *Sessions) Open() error {
	if s.Dir == "" || s.DB == nil || s.KeyFile == "" || s.ProxyURLHost == "" {
		return fmt.Errorf("%w: Sessions needs Dir, DB, KeyFile and ProxyURLHost", ErrInvalidArgument)
	}
	key, err := state.LoadOrCreateKey(s.KeyFile, "session key")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("creating sessions directory: %w", err)
	}
	db := s.DB
	live, err := s.loadAll(db, key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.key, s.db, s.live = key, db, live
	s.mu.Unlock()
	return nil
}

// Create starts a session: a fresh id and token, a new root CA, and its files
// under Dir/<id>. The returned info includes ProxyURL. Invalid requests wrap
// ErrInvalidArgument; before Open, ErrNotOpen.
func (s *Sessions) Create(req CreateRequest) (SessionInfo, error) {
	ttl, err := s.validate(&req)
	if err != nil {
		return SessionInfo{}, err
	}
	key, db, err := s.opened()
	if err != nil {
		return SessionInfo{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return SessionInfo{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	token := deriveToken(key, id)
	tokenHash := sha256.Sum256([]byte(token))
	rec := sessionRecord{ID: id, Name: req.Name, CreatedAt: now, ExpiresAt: now.Add(ttl),
		Connectors: req.Connectors, TokenSHA256: hex.EncodeToString(tokenHash[:])}
	authority, err := ca.New(ca.Options{CommonName: "Aileron session " + id, Validity: ttl + caValidityMargin, Now: s.Now})
	if err != nil {
		return SessionInfo{}, fmt.Errorf("creating session CA: %w", err)
	}
	if err := s.writeSession(db, rec, authority); err != nil {
		return SessionInfo{}, err
	}
	e := newEntry(rec, tokenHash, authority)
	s.mu.Lock()
	s.live[id] = e
	s.mu.Unlock()
	s.logf("session: created %s (%q), expires %s", id, req.Name, rec.ExpiresAt.Format(time.RFC3339))
	return s.info(e, token), nil
}

// validate checks and normalises req, returning the TTL to use. Failures
// wrap ErrInvalidArgument.
func (s *Sessions) validate(req *CreateRequest) (time.Duration, error) {
	if len(req.Name) > MaxSessionNameLen {
		return 0, fmt.Errorf("%w: session name is %d bytes; the limit is %d", ErrInvalidArgument, len(req.Name), MaxSessionNameLen)
	}
	for _, r := range req.Name {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return 0, fmt.Errorf("%w: session name %q contains a control character or invalid UTF-8", ErrInvalidArgument, req.Name)
		}
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = s.DefaultTTL
	}
	if ttl == 0 {
		ttl = DefaultSessionTTL
	}
	if ttl < time.Second || ttl > MaxSessionTTL {
		return 0, fmt.Errorf("%w: session ttl %v is out of range; use between 1s and %v", ErrInvalidArgument, ttl, MaxSessionTTL)
	}
	var conns []string
	seen := map[string]bool{}
	for _, fqn := range req.Connectors {
		if err := policy.CheckFQN(fqn); err != nil {
			return 0, fmt.Errorf("%w: session connectors: %v", ErrInvalidArgument, err)
		}
		if !seen[fqn] {
			seen[fqn] = true
			conns = append(conns, fqn)
		}
	}
	req.Connectors = conns
	return ttl, nil
}

// Get returns the live session id, including its ProxyURL. An unknown or
// expired session wraps ErrNotFound.
func (s *Sessions) Get(id string) (SessionInfo, error) {
	s.mu.RLock()
	key, e := s.key, s.live[id]
	s.mu.RUnlock()
	if key == nil {
		return SessionInfo{}, ErrNotOpen
	}
	if e == nil {
		return SessionInfo{}, fmt.Errorf("%w: session %q (see `aileron session list`)", ErrNotFound, id)
	}
	if !s.now().Before(e.rec.ExpiresAt) {
		return SessionInfo{}, fmt.Errorf("%w: session %s expired at %s", ErrNotFound, id, e.rec.ExpiresAt.Format(time.RFC3339))
	}
	return s.info(e, deriveToken(key, id)), nil
}

// List returns the live, unexpired sessions ordered by creation time, without
// their ProxyURL (which holds the token). Before Open it wraps ErrNotOpen.
func (s *Sessions) List() ([]SessionInfo, error) {
	now := s.now()
	s.mu.RLock()
	if s.key == nil {
		s.mu.RUnlock()
		return nil, ErrNotOpen
	}
	out := make([]SessionInfo, 0, len(s.live))
	for _, e := range s.live {
		if now.Before(e.rec.ExpiresAt) {
			out = append(out, s.info(e, ""))
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Delete ends a session at once (Authenticate fails from then on) and
// removes its row and its directory, key material included. It also removes
// a session Open could not load. An unknown id wraps ErrNotFound; before
// Open, ErrNotOpen.
func (s *Sessions) Delete(id string) error {
	s.mu.Lock()
	if s.key == nil || s.db == nil {
		s.mu.Unlock()
		return ErrNotOpen
	}
	db := s.db
	e, ok := s.live[id]
	s.retire(e)
	delete(s.live, id)
	s.mu.Unlock()
	if !validSessionID(id) {
		return fmt.Errorf("%w: session %q (see `aileron session list`)", ErrNotFound, id)
	}
	hadRow, err := deleteSessionRow(db, id)
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, id)
	if _, err := os.Lstat(dir); !ok && !hadRow && err != nil {
		return fmt.Errorf("%w: session %q (see `aileron session list`)", ErrNotFound, id)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing session %s: %w", id, err)
	}
	s.logf("session: deleted %s", id)
	return nil
}

// Authenticate implements dataplane.Sessions: it returns the session whose id
// and token match, comparing SHA-256(token) with the stored hash in constant
// time. It reads only memory. An empty token, an unknown, deleted or expired
// session, or a wrong token each wrap dataplane.ErrProxyAuth; the error never
// contains the token.
func (s *Sessions) Authenticate(id, token string) (*dataplane.Session, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: empty token", dataplane.ErrProxyAuth)
	}
	s.mu.RLock()
	e := s.live[id]
	s.mu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("%w: unknown session", dataplane.ErrProxyAuth)
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], e.tokenHash[:]) != 1 {
		return nil, fmt.Errorf("%w: wrong token for session %s", dataplane.ErrProxyAuth, id)
	}
	if !s.now().Before(e.rec.ExpiresAt) {
		return nil, fmt.Errorf("%w: session %s expired", dataplane.ErrProxyAuth, id)
	}
	return e.dp, nil
}

// Session returns live session id as the data plane sees it, for work the
// daemon does on a session's behalf (an approved action that resumes after
// a restart). An unknown or expired session wraps ErrNotFound.
func (s *Sessions) Session(id string) (*dataplane.Session, error) {
	s.mu.RLock()
	e := s.live[id]
	s.mu.RUnlock()
	if e == nil || !s.now().Before(e.rec.ExpiresAt) {
		return nil, fmt.Errorf("%w: session %s is unknown or expired", ErrNotFound, id)
	}
	return e.dp, nil
}

// Sweep deletes expired sessions from memory, database and disk and returns
// how many it removed. The daemon calls it periodically; Authenticate
// refuses expired sessions whether or not they have been swept.
func (s *Sessions) Sweep() int {
	now := s.now()
	gone := map[string]bool{}
	s.mu.Lock()
	db := s.db
	for id, e := range s.live {
		if !now.Before(e.rec.ExpiresAt) {
			gone[id] = true
			s.retire(e)
			delete(s.live, id)
		}
	}
	s.mu.Unlock()
	if db != nil {
		ids, err := deleteExpiredSessions(db, now)
		if err != nil {
			s.logf("session: sweeping expired sessions: %v", err)
		}
		for _, id := range ids {
			gone[id] = true
		}
	}
	expired := make([]string, 0, len(gone))
	for id := range gone {
		if validSessionID(id) {
			expired = append(expired, id)
		}
	}
	sort.Strings(expired)
	for _, id := range expired {
		if err := os.RemoveAll(filepath.Join(s.Dir, id)); err != nil {
			s.logf("session: removing expired %s: %v", id, err)
			continue
		}
		s.logf("session: expired %s removed", id)
	}
	return len(expired)
}

// newEntry builds the in-memory form of a session; tokenHash is the decoded
// rec.TokenSHA256.
func newEntry(rec sessionRecord, tokenHash [sha256.Size]byte, authority *ca.Authority) *sessionEntry {
	return &sessionEntry{rec: rec, tokenHash: tokenHash,
		dp: &dataplane.Session{ID: rec.ID, Name: rec.Name, CA: authority, Connectors: rec.Connectors}}
}

// info renders e; token, when non-empty, goes into ProxyURL.
func (s *Sessions) info(e *sessionEntry, token string) SessionInfo {
	dir := filepath.Join(s.Dir, e.rec.ID)
	in := SessionInfo{ID: e.rec.ID, Name: e.rec.Name, CreatedAt: e.rec.CreatedAt, ExpiresAt: e.rec.ExpiresAt,
		Connectors: append([]string(nil), e.rec.Connectors...),
		CACertPath: filepath.Join(dir, ca.CertFile), CABundlePath: filepath.Join(dir, bundleFile)}
	if token != "" {
		u := url.URL{Scheme: "http", User: url.UserPassword(e.rec.ID, token), Host: s.ProxyURLHost}
		in.ProxyURL = u.String()
	}
	return in
}

// opened returns the key and database of Open, or ErrNotOpen.
func (s *Sessions) opened() ([]byte, *state.DB, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.key == nil || s.db == nil {
		return nil, nil, ErrNotOpen
	}
	return s.key, s.db, nil
}

// now returns the session clock's time.
func (s *Sessions) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// logf writes to Logf if set.
func (s *Sessions) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// CertStats sums the leaf-cache counters of every session's CA, including
// sessions already deleted or expired (for metrics: it never decreases).
func (s *Sessions) CertStats() ca.Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	total := s.retired
	for _, e := range s.live {
		addStats(&total, e.dp.CA.Stats())
	}
	return total
}

// retire keeps a removed session's cache counters; s.mu is held.
func (s *Sessions) retire(e *sessionEntry) {
	if e != nil && e.dp != nil && e.dp.CA != nil {
		addStats(&s.retired, e.dp.CA.Stats())
	}
}

func addStats(dst *ca.Stats, st ca.Stats) {
	dst.Hits += st.Hits
	dst.Misses += st.Misses
	dst.Mints += st.Mints
}
