package sessions

import (
	"bytes"
	"context"
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
	"github.com/rs/zerolog"
)

// errNotOpen is returned by the methods that need Open first.
var errNotOpen = fmt.Errorf("%w: sessions.Manager used before Open", state.ErrNotOpen)

// Session limits and defaults.
const (
	// DefaultTTL is the lifetime of a session created without a TTL
	// when Manager.DefaultTTL is zero.
	DefaultTTL = 24 * time.Hour
	// MaxTTL bounds a session's lifetime.
	MaxTTL = 366 * 24 * time.Hour
	// MaxNameLen bounds a session's name, in bytes.
	MaxNameLen = 128
	// caValidityMargin is how much longer a session's CA lives than the
	// session, so that the CA never expires under a live session.
	caValidityMargin = time.Hour
)

// CreateRequest asks for a new session. In JSON, TTL is a Go duration string
// ("90m", "8h"); the zero TTL means the default.
type CreateRequest struct {
	// Name is an optional label (at most MaxNameLen bytes, no control
	// characters).
	Name string
	// TTL is the session's lifetime; zero means Manager.DefaultTTL.
	TTL time.Duration
	// Connectors limits the session to these connector FQNs; empty means
	// every installed connector.
	Connectors []string
	// Limits bounds the session's models and budgets (package budgets
	// enforces them); nil or zero means none.
	Limits *policy.Limits
	// Unknown is what the session does with a request no operation
	// matches: dataplane.UnknownDeny or dataplane.UnknownLearn; "" means
	// deny.
	Unknown string
}

// createRequestJSON is CreateRequest's wire form.
type createRequestJSON struct {
	Name       string         `json:"name,omitempty"`
	TTL        string         `json:"ttl,omitempty"`
	Connectors []string       `json:"connectors,omitempty"`
	Limits     *policy.Limits `json:"limits,omitempty"`
	Unknown    string         `json:"unknown,omitempty"`
}

// MarshalJSON writes TTL as a Go duration string.
func (r CreateRequest) MarshalJSON() ([]byte, error) {
	w := createRequestJSON{Name: r.Name, Connectors: r.Connectors, Limits: r.Limits, Unknown: r.Unknown}
	if r.TTL != 0 {
		w.TTL = r.TTL.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads TTL as a Go duration string and rejects unknown
// fields. Failures wrap state.ErrInvalidArgument.
func (r *CreateRequest) UnmarshalJSON(data []byte) error {
	var w createRequestJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: session request: %v", state.ErrInvalidArgument, err)
	}
	var ttl time.Duration
	if w.TTL != "" {
		d, err := time.ParseDuration(w.TTL)
		if err != nil {
			return fmt.Errorf("%w: session request: ttl %q is not a duration; write it like 30m, 8h or 72h", state.ErrInvalidArgument, w.TTL)
		}
		ttl = d
	}
	*r = CreateRequest{Name: w.Name, TTL: ttl, Connectors: w.Connectors, Limits: w.Limits, Unknown: w.Unknown}
	return nil
}

// Info is what the control plane shows about a session. ProxyURL
// carries the session's secret token: it is set only by Create and Get.
type Info struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// Connectors is the session's scope; empty means every installed
	// connector.
	Connectors []string `json:"connectors,omitempty"`
	// Limits are the session's model list and budgets; absent: none.
	Limits *policy.Limits `json:"limits,omitempty"`
	// Unknown is what the session does with a request no operation
	// matches: "deny" or "learn".
	Unknown string `json:"unknown"`
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

// Manager manages proxy sessions: each has an id, a secret token, a TTL, a
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
// Manager must not be copied after first use.
type Manager struct {
	// Dir is the sessions directory, normally $AILERON_HOME/sessions. Required.
	Dir string
	// DB is the control-plane database holding session metadata. Required.
	DB *state.DB
	// KeyFile is the session key, normally $AILERON_HOME/keys/session.key.
	// Required unless Fleet is set; created by Open if missing.
	KeyFile string
	// Fleet, when set, makes this node one of a fleet sharing DB
	// (Postgres): the token key and each session's CA are derived from the
	// fleet key, so every node serves every session with a byte-identical
	// CA certificate; sessions created or deleted on another node reach
	// this one through notifications, a lookup of an id it does not know,
	// and Refresh. Dir then holds only each CA's public files. Nil means
	// one node: a random CA per session, its key saved under Dir.
	Fleet *state.FleetKey
	// ProxyURLHost is the proxy's host:port as sandboxes reach it, written
	// into ProxyURL. Required.
	ProxyURLHost string
	// Now is the clock for creation and expiry. Nil means time.Now.
	Now func() time.Time
	// DefaultTTL applies when a CreateRequest has no TTL. Zero means
	// DefaultTTL.
	DefaultTTL time.Duration
	// SystemRoots lists candidate system CA bundle files; the first that
	// exists is appended to each session's ca-bundle.pem. Nil means the usual
	// Debian/Alpine, Fedora/RHEL, openSUSE and macOS/BSD locations.
	SystemRoots []string
	// Log receives one line per created, deleted, expired or unloadable
	// session. Nil discards them.
	Log *zerolog.Logger

	mu   sync.RWMutex
	key  []byte                   // nil until Open
	db   *state.DB                // nil until Open
	live map[string]*sessionEntry // by id
	// retired sums the leaf-cache counters of removed sessions, so CertStats
	// never goes backwards.
	retired ca.Stats
	// fleet is the state of a fleet node (Fleet set); guarded by mu.
	fleet fleetState
}

// sessionEntry is a live session in memory.
type sessionEntry struct {
	rec       sessionRecord
	tokenHash [sha256.Size]byte
	dp        *dataplane.Session // handed out by Authenticate, immutable
	loaded    time.Time          // when this node loaded it
}

// sessionRecord is a session's metadata: a row of the sessions table.
type sessionRecord struct {
	ID          string
	Name        string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Connectors  []string
	TokenSHA256 string
	Limits      *policy.Limits // nil: none
	Unknown     string         // dataplane.UnknownDeny or UnknownLearn
}

// Open loads the session key (creating it if missing) and loads every
// session that is intact and unexpired, so sessions survive a daemon
// restart. Expired sessions are deleted; sessions that cannot be loaded are
// logged and skipped (Delete still removes them). Failures: a missing field
// (Dir, DB, KeyFile, ProxyURLHost) wraps state.ErrInvalidArgument; a
// key file others may read wraps state.ErrInsecureFile; a key of the wrong size
// wraps state.ErrCorruptState; the database's failures are state.Open's.
func (s *Manager) Open(ctx context.Context) error {
	if s.Dir == "" || s.DB == nil || (s.KeyFile == "" && s.Fleet == nil) || s.ProxyURLHost == "" {
		return fmt.Errorf("%w: sessions.Manager needs Dir, DB, KeyFile (or Fleet) and ProxyURLHost", state.ErrInvalidArgument)
	}
	key, err := s.tokenKey()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("creating sessions directory: %w", err)
	}
	db := s.DB
	live, err := s.loadAll(ctx, db, key)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.key, s.db, s.live = key, db, live
	s.mu.Unlock()
	s.listen()
	return nil
}

// Create starts a session: a fresh id and token, a new root CA, and its files
// under Dir/<id>. The returned info includes ProxyURL. Invalid requests wrap
// state.ErrInvalidArgument; before Open, state.ErrNotOpen.
func (s *Manager) Create(ctx context.Context, req CreateRequest) (Info, error) {
	ttl, err := s.validate(&req)
	if err != nil {
		return Info{}, err
	}
	key, db, err := s.opened()
	if err != nil {
		return Info{}, err
	}
	id, err := newSessionID()
	if err != nil {
		return Info{}, err
	}
	now := s.now().UTC().Truncate(time.Second)
	token := deriveToken(key, id)
	tokenHash := sha256.Sum256([]byte(token))
	rec := sessionRecord{ID: id, Name: req.Name, CreatedAt: now, ExpiresAt: now.Add(ttl),
		Connectors: req.Connectors, TokenSHA256: hex.EncodeToString(tokenHash[:]), Limits: req.Limits, Unknown: req.Unknown}
	authority, err := s.newCA(rec, ttl)
	if err != nil {
		return Info{}, fmt.Errorf("creating session CA: %w", err)
	}
	if err := s.writeSession(ctx, db, rec, authority); err != nil {
		return Info{}, err
	}
	e := newEntry(rec, tokenHash, authority)
	s.mu.Lock()
	s.live[id] = e
	s.mu.Unlock()
	s.log().Info().Str("event", "session.created").Str("session", id).Str("name", req.Name).
		Time("expires_at", rec.ExpiresAt).Msg("session created")
	return s.info(e, token), nil
}

// validate checks and normalises req, returning the TTL to use. Failures
// wrap state.ErrInvalidArgument.
func (s *Manager) validate(req *CreateRequest) (time.Duration, error) {
	if len(req.Name) > MaxNameLen {
		return 0, fmt.Errorf("%w: session name is %d bytes; the limit is %d", state.ErrInvalidArgument, len(req.Name), MaxNameLen)
	}
	for _, r := range req.Name {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return 0, fmt.Errorf("%w: session name %q contains a control character or invalid UTF-8", state.ErrInvalidArgument, req.Name)
		}
	}
	mode, err := CheckUnknown(req.Unknown)
	if err != nil {
		return 0, err
	}
	req.Unknown = mode
	ttl := req.TTL
	if ttl == 0 {
		ttl = s.DefaultTTL
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < time.Second || ttl > MaxTTL {
		return 0, fmt.Errorf("%w: session ttl %v is out of range; use between 1s and %v", state.ErrInvalidArgument, ttl, MaxTTL)
	}
	var conns []string
	seen := map[string]bool{}
	for _, fqn := range req.Connectors {
		if err := policy.CheckFQN(fqn); err != nil {
			return 0, fmt.Errorf("%w: session connectors: %v", state.ErrInvalidArgument, err)
		}
		if !seen[fqn] {
			seen[fqn] = true
			conns = append(conns, fqn)
		}
	}
	req.Connectors = conns
	if req.Limits != nil {
		l, err := req.Limits.Check(ttl)
		if err != nil {
			return 0, limitsError{err}
		}
		req.Limits = &l
		if l.IsZero() {
			req.Limits = nil
		}
	}
	return ttl, nil
}

// Get returns the live session id, including its ProxyURL. An unknown or
// expired session wraps state.ErrNotFound.
func (s *Manager) Get(id string) (Info, error) {
	s.mu.RLock()
	key, e := s.key, s.live[id]
	s.mu.RUnlock()
	if key == nil {
		return Info{}, errNotOpen
	}
	if e == nil {
		return Info{}, fmt.Errorf("%w: session %q (see `aileron session list`)", state.ErrNotFound, id)
	}
	if !s.now().Before(e.rec.ExpiresAt) {
		return Info{}, fmt.Errorf("%w: session %s expired at %s", state.ErrNotFound, id, e.rec.ExpiresAt.Format(time.RFC3339))
	}
	return s.info(e, deriveToken(key, id)), nil
}

// List returns the live, unexpired sessions ordered by creation time, without
// their ProxyURL (which holds the token). Before Open it wraps state.ErrNotOpen.
func (s *Manager) List() ([]Info, error) {
	now := s.now()
	s.mu.RLock()
	if s.key == nil {
		s.mu.RUnlock()
		return nil, errNotOpen
	}
	out := make([]Info, 0, len(s.live))
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
// a session Open could not load. A revocation is not undone by ctx ending
// half-way (a CLI killed mid-request): the row is deleted whatever ctx does,
// or the session would come back at the next start. An unknown id wraps
// state.ErrNotFound; before Open, state.ErrNotOpen.
func (s *Manager) Delete(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	s.mu.Lock()
	if s.key == nil || s.db == nil {
		s.mu.Unlock()
		return errNotOpen
	}
	db := s.db
	e, ok := s.live[id]
	s.retire(e)
	delete(s.live, id)
	s.tombstone(id)
	s.mu.Unlock()
	if !validSessionID(id) {
		return fmt.Errorf("%w: session %q (see `aileron session list`)", state.ErrNotFound, id)
	}
	hadRow, err := deleteSessionRow(ctx, db, id)
	if err != nil && s.Fleet != nil {
		s.mu.Lock()
		s.undelete(id)
		s.mu.Unlock()
		return fmt.Errorf("%w; this node refuses session %s from now on and removes its row once the shared state answers, "+
			"but until then the other nodes may still serve it", err, id)
	}
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, id)
	if _, err := os.Lstat(dir); !ok && !hadRow && err != nil {
		return fmt.Errorf("%w: session %q (see `aileron session list`)", state.ErrNotFound, id)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing session %s: %w", id, err)
	}
	s.log().Info().Str("event", "session.deleted").Str("session", id).Msg("session deleted")
	return nil
}

// Authenticate implements dataplane.Sessions: it returns the session whose id
// and token match, comparing SHA-256(token) with the stored hash in constant
// time. It reads only memory. An empty token, an unknown, deleted or expired
// session, or a wrong token each wrap dataplane.ErrProxyAuth; the error never
// contains the token.
func (s *Manager) Authenticate(id, token string) (*dataplane.Session, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: empty token", dataplane.ErrProxyAuth)
	}
	s.mu.RLock()
	e, key := s.live[id], s.key
	s.mu.RUnlock()
	if since, stale := s.stale(); stale {
		return nil, fmt.Errorf("%w: %w: this node has not reached the fleet's shared state for %s, so it cannot vouch for session %s",
			dataplane.ErrProxyAuth, dataplane.ErrSessionsUnavailable, since.Round(time.Second), id)
	}
	if e == nil && s.Fleet != nil && key != nil &&
		subtle.ConstantTimeCompare([]byte(deriveToken(key, id)), []byte(token)) == 1 {
		e = s.lookup(id) // only for a token the fleet key made: a sprayed id costs no read
	}
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

// Live implements dataplane.Sessions: nil while session id exists and has
// not expired, else an error wrapping dataplane.ErrProxyAuth saying which.
// It reads only memory.
func (s *Manager) Live(id string) error {
	s.mu.RLock()
	e := s.live[id]
	s.mu.RUnlock()
	if since, stale := s.stale(); stale {
		return fmt.Errorf("%w: %w: this node has not reached the fleet's shared state for %s",
			dataplane.ErrProxyAuth, dataplane.ErrSessionsUnavailable, since.Round(time.Second))
	}
	switch {
	case e == nil:
		return fmt.Errorf("%w: session %s was deleted", dataplane.ErrProxyAuth, id)
	case !s.now().Before(e.rec.ExpiresAt):
		return fmt.Errorf("%w: session %s expired at %s", dataplane.ErrProxyAuth, id, e.rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Session returns live session id as the data plane sees it, for work the
// daemon does on a session's behalf (an approved action that resumes after
// a restart). An unknown or expired session wraps state.ErrNotFound.
func (s *Manager) Session(id string) (*dataplane.Session, error) {
	s.mu.RLock()
	e := s.live[id]
	s.mu.RUnlock()
	if e == nil || !s.now().Before(e.rec.ExpiresAt) {
		return nil, fmt.Errorf("%w: session %s is unknown or expired", state.ErrNotFound, id)
	}
	return e.dp, nil
}

// Sweep deletes expired sessions from memory, database and disk and returns
// how many it removed. The daemon calls it periodically; Authenticate
// refuses expired sessions whether or not they have been swept.
func (s *Manager) Sweep(ctx context.Context) int {
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
		ids, err := deleteExpiredSessions(ctx, db, now)
		if err != nil {
			s.log().Error().Str("event", "session.sweep_failed").Err(err).Msg("sweeping expired sessions")
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
			s.log().Error().Str("event", "session.sweep_failed").Str("session", id).Err(err).Msg("removing an expired session")
			continue
		}
		s.log().Info().Str("event", "session.expired").Str("session", id).Msg("expired session removed")
	}
	return len(expired)
}

// newEntry builds the in-memory form of a session; tokenHash is the decoded
// rec.TokenSHA256.
func newEntry(rec sessionRecord, tokenHash [sha256.Size]byte, authority *ca.Authority) *sessionEntry {
	return &sessionEntry{rec: rec, tokenHash: tokenHash, loaded: time.Now(),
		dp: &dataplane.Session{ID: rec.ID, Name: rec.Name, CA: authority, Connectors: rec.Connectors,
			Created: rec.CreatedAt, Limits: rec.Limits, Unknown: unknownMode(rec.Unknown)}}
}

// info renders e; token, when non-empty, goes into ProxyURL.
func (s *Manager) info(e *sessionEntry, token string) Info {
	dir := filepath.Join(s.Dir, e.rec.ID)
	in := Info{ID: e.rec.ID, Name: e.rec.Name, CreatedAt: e.rec.CreatedAt, ExpiresAt: e.rec.ExpiresAt,
		Connectors: append([]string(nil), e.rec.Connectors...), Limits: e.rec.Limits, Unknown: unknownMode(e.rec.Unknown),
		CACertPath: filepath.Join(dir, ca.CertFile), CABundlePath: filepath.Join(dir, bundleFile)}
	if token != "" {
		u := url.URL{Scheme: "http", User: url.UserPassword(e.rec.ID, token), Host: s.ProxyURLHost}
		in.ProxyURL = u.String()
	}
	return in
}

// opened returns the key and database of Open, or state.ErrNotOpen.
func (s *Manager) opened() ([]byte, *state.DB, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.key == nil || s.db == nil {
		return nil, nil, errNotOpen
	}
	return s.key, s.db, nil
}

// now returns the session clock's time.
func (s *Manager) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// log returns Log, or a logger that discards.
func (s *Manager) log() *zerolog.Logger {
	if s.Log != nil {
		return s.Log
	}
	nop := zerolog.Nop()
	return &nop
}

// CertStats sums the leaf-cache counters of every session's CA, including
// sessions already deleted or expired (for metrics: it never decreases).
func (s *Manager) CertStats() ca.Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	total := s.retired
	for _, e := range s.live {
		addStats(&total, e.dp.CA.Stats())
	}
	return total
}

// retire keeps a removed session's cache counters; s.mu is held.
func (s *Manager) retire(e *sessionEntry) {
	if e != nil && e.dp != nil && e.dp.CA != nil {
		addStats(&s.retired, e.dp.CA.Stats())
	}
}

func addStats(dst *ca.Stats, st ca.Stats) {
	dst.Hits += st.Hits
	dst.Misses += st.Misses
	dst.Mints += st.Mints
}

// limitsError is an invalid argument whose message is the limits check's
// alone ("invalid session limits: …"), said once.
type limitsError struct{ err error }

func (e limitsError) Error() string   { return e.err.Error() }
func (e limitsError) Unwrap() []error { return []error{state.ErrInvalidArgument, e.err} }
