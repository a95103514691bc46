package sessions

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/state"
)

// Session files and formats.
const (
	// bundleFile is the session CA followed by the system roots.
	bundleFile = "ca-bundle.pem"
	// tokenSize is the token's length in bytes before base64url (192 bits).
	tokenSize = 24
	// sessionIDPrefix starts every session id.
	sessionIDPrefix = "s_"
	// sessionIDChars is the number of random base32 characters after it.
	sessionIDChars = 20
	// creatingPrefix marks a session directory still being written.
	creatingPrefix = ".creating-"
)

// defaultSystemRoots lists well-known system CA bundle locations.
func defaultSystemRoots() []string {
	return []string{
		"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine, Arch
		"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL, CentOS
		"/etc/ssl/ca-bundle.pem",             // openSUSE
		"/etc/ssl/cert.pem",                  // macOS, BSDs, Alpine
	}
}

// newSessionID returns "s_" and 20 random lower-case base32 characters
// (100 bits).
func newSessionID() (string, error) { return state.RandomID(sessionIDPrefix, sessionIDChars) }

// validSessionID reports whether id has the form newSessionID produces, so it
// is safe to use as a directory name.
func validSessionID(id string) bool { return state.ValidID(id, sessionIDPrefix, sessionIDChars) }

// deriveToken returns the session's token: base64url (no padding) of
// HMAC-SHA256(key, id) truncated to 192 bits.
func deriveToken(key []byte, id string) string {
	mac := hmac.New(sha256.New, key)
	io.WriteString(mac, id)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:tokenSize])
}

// loadAll brings the sessions on record up to date and loads them:
// leftovers of interrupted creations are deleted, expired sessions deleted
// (row and directory), and
// every other session loaded with its CA; the ones that cannot be are logged
// and skipped.
func (s *Manager) loadAll(ctx context.Context, db *state.DB, key []byte) (map[string]*sessionEntry, error) {
	dirs, err := s.sessionDirs()
	if err != nil {
		return nil, err
	}
	now := s.now()
	expired, err := deleteExpiredSessions(ctx, db, now)
	if err != nil {
		return nil, err
	}
	for _, id := range expired {
		if validSessionID(id) {
			os.RemoveAll(filepath.Join(s.Dir, id))
		}
		s.log().Info().Str("event", "session.expired").Str("session", id).Msg("expired session removed")
	}
	recs, bad, err := sessionRows(ctx, db)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for id, err := range bad {
		known[id] = true
		s.log().Error().Str("event", "session.unloadable").Str("session", id).Err(err).
			Msg("skipping the session; `aileron session delete " + id + "` removes it")
	}
	live := make(map[string]*sessionEntry, len(recs))
	for _, rec := range recs {
		known[rec.ID] = true
		e, err := s.loadSession(key, rec)
		if err != nil {
			s.log().Error().Str("event", "session.unloadable").Str("session", rec.ID).Err(err).
				Msg("skipping the session; `aileron session delete " + rec.ID + "` removes it")
			continue
		}
		live[rec.ID] = e
	}
	for _, id := range dirs {
		if !known[id] && s.Fleet != nil { // a copy of public files a deleted session left
			os.RemoveAll(filepath.Join(s.Dir, id))
			continue
		}
		if !known[id] {
			s.log().Warn().Str("event", "session.orphaned").Str("dir", filepath.Join(s.Dir, id)).Str("db", db.Path()).
				Msg("session directory has no record in the database; `aileron session delete " + id + "` removes it")
		}
	}
	return live, nil
}

// sessionDirs returns the ids of the session directories under Dir,
// deleting the leftovers of interrupted creations.
func (s *Manager) sessionDirs() ([]string, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading sessions directory: %w", err)
	}
	var ids []string
	for _, de := range entries {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, creatingPrefix):
			os.RemoveAll(filepath.Join(s.Dir, name))
		case de.IsDir() && validSessionID(name):
			ids = append(ids, name)
		}
	}
	return ids, nil
}

// loadSession checks rec against the session key and loads its CA from
// Dir/<id>. Failures wrap state.ErrCorruptState.
func (s *Manager) loadSession(key []byte, rec sessionRecord) (*sessionEntry, error) {
	if !validSessionID(rec.ID) {
		return nil, fmt.Errorf("%w: session id %q is malformed", state.ErrCorruptState, rec.ID)
	}
	tokenHash, err := checkRecord(key, rec)
	if err != nil {
		return nil, err
	}
	if s.Fleet != nil {
		authority, err := s.deriveCA(rec)
		if err != nil {
			return nil, err
		}
		if err := s.publishCA(rec.ID, authority); err != nil {
			return nil, err
		}
		return newEntry(rec, tokenHash, authority), nil
	}
	authority, err := ca.LoadDir(filepath.Join(s.Dir, rec.ID), ca.Options{Now: s.Now})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", state.ErrCorruptState, err)
	}
	return newEntry(rec, tokenHash, authority), nil
}

// writeSession stores a new session: its directory is staged as
// Dir/.creating-<id> (mode 0700) with the CA and the CA bundle and renamed to
// Dir/<id>, and then its row is inserted into db, so that a crash never
// leaves a half-written session on record. If the row cannot be written, the
// directory is removed.
func (s *Manager) writeSession(ctx context.Context, db *state.DB, rec sessionRecord, authority *ca.Authority) error {
	tmp := filepath.Join(s.Dir, creatingPrefix+rec.ID)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("creating session directory: %w", err)
	}
	final := filepath.Join(s.Dir, rec.ID)
	err := s.fillSessionDir(tmp, authority)
	if err == nil {
		err = os.Chmod(tmp, 0o700)
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("writing session %s: %w", rec.ID, err)
	}
	err = db.Write(ctx, func(tx *state.Tx) error {
		if err := insertSession(ctx, tx, rec); err != nil {
			return err
		}
		return tx.Notify(ctx, state.ChannelSessions, rec.ID)
	})
	if err != nil {
		os.RemoveAll(final)
		return err
	}
	return nil
}

// fillSessionDir writes the CA and the bundle into dir.
func (s *Manager) fillSessionDir(dir string, authority *ca.Authority) error {
	if s.Fleet != nil { // the key is derived, never saved
		if err := os.WriteFile(filepath.Join(dir, ca.CertFile), authority.CertPEM(), 0o644); err != nil {
			return err
		}
	} else if err := authority.Save(dir); err != nil {
		return err
	}
	bundle := authority.CertPEM()
	if roots := s.systemRoots(); roots != nil {
		if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
			bundle = append(bundle, '\n')
		}
		bundle = append(bundle, roots...)
	}
	return os.WriteFile(filepath.Join(dir, bundleFile), bundle, 0o644)
}

// systemRoots returns the content of the first readable system CA bundle, or
// nil if there is none.
func (s *Manager) systemRoots() []byte {
	candidates := s.SystemRoots
	if candidates == nil {
		candidates = defaultSystemRoots()
	}
	for _, p := range candidates {
		if data, err := os.ReadFile(p); err == nil && len(data) > 0 {
			return data
		}
	}
	return nil
}
