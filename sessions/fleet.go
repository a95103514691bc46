package sessions

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/state"
)

// Fleet settings.
const (
	// lookupTimeout bounds the database read of a session id a fleet node
	// does not know yet.
	lookupTimeout = 2 * time.Second
	// missMemory is how long an id found in no row is not looked up again,
	// so that a client spraying ids costs at most one read per id and
	// interval; tombstoneMemory how long a deleted id is kept from coming
	// back through a read that raced the deletion.
	missMemory      = time.Second
	tombstoneMemory = time.Minute
	// maxMisses bounds the remembered misses; maxQueued the session ids a
	// notification queues for a re-read (beyond it, everything is re-read).
	maxMisses = 4096
	maxQueued = 1024
	// staleAfter is how long a fleet node vouches for its sessions without
	// reaching the state: past it, with every Refresh failing (a node cut
	// off from Postgres), it refuses every session, since a deletion made
	// on another node meanwhile could not reach it.
	staleAfter = 90 * time.Second
	// Derivation purposes under the fleet key.
	purposeToken = "aileron session token"
	purposeCA    = "aileron session ca"
)

// fleetState is what a fleet node keeps besides live: ids recently found
// in no row, and ids recently deleted.
type fleetState struct {
	misses     map[string]time.Time
	tombstones map[string]time.Time
	// undeleted: ids deleted here whose row could not be removed (the
	// state did not answer): their tombstones never expire, and Refresh
	// removes the rows once it can.
	undeleted map[string]bool
	synced    time.Time       // the last time the sessions were read whole
	queued    map[string]bool // ids notifications asked to re-read
	all       bool            // ... or everything
	worker    *state.Coalescer
}

// tokenKey returns the key tokens are derived with: from the fleet key,
// or the session key file of a single node.
func (s *Manager) tokenKey() ([]byte, error) {
	if s.Fleet != nil {
		return s.Fleet.Derive(purposeToken, "", state.KeySize), nil
	}
	return state.LoadOrCreateKey(s.KeyFile, "session key")
}

// newCA makes a new session's root: derived on a fleet node, random on a
// single node.
func (s *Manager) newCA(rec sessionRecord, ttl time.Duration) (*ca.Authority, error) {
	if s.Fleet != nil {
		return s.deriveCA(rec)
	}
	return ca.New(ca.Options{CommonName: "Aileron session " + rec.ID, Validity: ttl + caValidityMargin, Now: s.Now})
}

// deriveCA builds session rec's root from the fleet key, the same on every
// node: valid from a minute before the session's creation to an hour after
// its expiry. Failures wrap state.ErrCorruptState.
func (s *Manager) deriveCA(rec sessionRecord) (*ca.Authority, error) {
	a, err := ca.Derive(ca.DeriveOptions{
		Seed:       s.Fleet.Derive(purposeCA, rec.ID, 32),
		CommonName: "Aileron session " + rec.ID,
		NotBefore:  rec.CreatedAt.Add(-time.Minute),
		NotAfter:   rec.ExpiresAt.Add(caValidityMargin),
		Now:        s.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: session %s: %w", state.ErrCorruptState, rec.ID, err)
	}
	return a, nil
}

// publishCA writes session id's public CA files (ca.pem, ca-bundle.pem)
// into Dir/<id> on this node, unless they are there already.
func (s *Manager) publishCA(id string, a *ca.Authority) error {
	dir := filepath.Join(s.Dir, id)
	cert := a.CertPEM()
	if have, err := os.ReadFile(filepath.Join(dir, ca.CertFile)); err == nil && bytes.Equal(have, cert) {
		return nil
	}
	tmp, err := os.MkdirTemp(s.Dir, creatingPrefix+id+"-")
	if err != nil {
		return fmt.Errorf("writing the CA files of session %s: %w", id, err)
	}
	defer os.RemoveAll(tmp)
	if err := s.fillSessionDir(tmp, a); err != nil {
		return fmt.Errorf("writing the CA files of session %s: %w", id, err)
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("writing the CA files of session %s: %w", id, err)
	}
	return nil
}

// listen subscribes a fleet node to the sessions other nodes create and
// delete.
// Notifications only queue ids: one goroutine re-reads them, however many
// arrive (a flood of them costs a bounded queue and then one Refresh).
func (s *Manager) listen() {
	if s.Fleet == nil {
		return
	}
	s.mu.Lock()
	s.fleet.synced = time.Now()
	s.fleet.worker = &state.Coalescer{Run: s.drainQueue}
	s.mu.Unlock()
	s.DB.Subscribe(state.ChannelSessions, state.Subscription{
		Changed: func(id string) { s.queue(id, false) },
		Resync:  func() { s.queue("", true) },
	})
}

// Close ends a fleet node's work on other nodes' changes, waiting for a
// re-read in progress; call it before closing the database. It does
// nothing on a single node.
func (s *Manager) Close() {
	s.mu.RLock()
	w := s.fleet.worker
	s.mu.RUnlock()
	if w != nil {
		w.Stop()
	}
}

// queue asks for session id, or all sessions, to be read again.
func (s *Manager) queue(id string, all bool) {
	s.mu.Lock()
	if s.fleet.queued == nil {
		s.fleet.queued = map[string]bool{}
	}
	switch {
	case all || len(s.fleet.queued) >= maxQueued:
		s.fleet.all, s.fleet.queued = true, nil
	case validSessionID(id):
		s.fleet.queued[id] = true
	}
	w := s.fleet.worker
	s.mu.Unlock()
	w.Trigger()
}

// drainQueue re-reads what notifications queued.
func (s *Manager) drainQueue() {
	s.mu.Lock()
	all, ids := s.fleet.all, s.fleet.queued
	s.fleet.all, s.fleet.queued = false, nil
	s.mu.Unlock()
	if all {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Refresh(ctx); err != nil {
			s.log().Warn().Str("event", "session.refresh_failed").Err(err).Msg("re-reading the sessions after a notification")
		}
		return
	}
	for id := range ids {
		s.refreshOne(id)
	}
}

// stale reports, on a fleet node, that the sessions could not be read for
// longer than staleAfter.
func (s *Manager) stale() (time.Duration, bool) {
	if s.Fleet == nil {
		return 0, false
	}
	s.mu.RLock()
	since := time.Since(s.fleet.synced)
	s.mu.RUnlock()
	return since, since > staleAfter
}

// Stale reports an error when this fleet node has not read the sessions
// for longer than it vouches for them (it then refuses every session);
// nil on a single node. For readiness.
func (s *Manager) Stale() error {
	if since, stale := s.stale(); stale {
		return fmt.Errorf("the sessions were last read from the shared state %s ago (over %s): every session is refused until it answers",
			since.Round(time.Second), staleAfter)
	}
	return nil
}

// tombstone remembers that id was deleted; s.mu is held.
func (s *Manager) tombstone(id string) {
	if s.Fleet == nil {
		return
	}
	now := time.Now()
	if s.fleet.tombstones == nil {
		s.fleet.tombstones = map[string]time.Time{}
	}
	for k, t := range s.fleet.tombstones {
		if now.Sub(t) > tombstoneMemory && !s.fleet.undeleted[k] {
			delete(s.fleet.tombstones, k)
		}
	}
	s.fleet.tombstones[id] = now
}

// adopt makes e live unless its id was deleted meanwhile, or takes its
// unknown-request mode and connectors into the live entry; it returns the
// live entry.
// s.mu is held.
func (s *Manager) adopt(e *sessionEntry) *sessionEntry {
	if t, gone := s.fleet.tombstones[e.rec.ID]; gone && (time.Since(t) <= tombstoneMemory || s.fleet.undeleted[e.rec.ID]) {
		return nil
	}
	if have := s.live[e.rec.ID]; have != nil {
		// changed on another node (SetUnknown, AddConnector)
		have = have.takeRow(e.rec)
		s.live[e.rec.ID] = have
		return have
	}
	s.live[e.rec.ID] = e
	return e
}

// lookup reads session id, which this fleet node does not know, from the
// database: another node may have just created it. An id found in no row
// is not read again for a second.
func (s *Manager) lookup(id string) *sessionEntry {
	if !validSessionID(id) {
		return nil
	}
	s.mu.Lock()
	if t, ok := s.fleet.misses[id]; ok && time.Since(t) < missMemory {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	e, err := s.readEntry(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e == nil {
		if err == nil { // no such row (a failure to read is not remembered)
			if s.fleet.misses == nil || len(s.fleet.misses) >= maxMisses {
				s.fleet.misses = map[string]time.Time{}
			}
			s.fleet.misses[id] = time.Now()
		}
		return nil
	}
	if s.live == nil {
		return nil
	}
	return s.adopt(e)
}

// readEntry reads and loads session id's row: nil, nil when there is none.
func (s *Manager) readEntry(ctx context.Context, id string) (*sessionEntry, error) {
	key, db, err := s.opened()
	if err != nil {
		return nil, err
	}
	rec, err := sessionRow(ctx, db, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !s.now().Before(rec.ExpiresAt) {
		return nil, nil
	}
	return s.loadSession(key, rec)
}

// refreshOne brings session id up to date after another node announced a
// change: loaded if it has a row, dropped (with its files) if not.
func (s *Manager) refreshOne(id string) {
	if !validSessionID(id) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := s.readEntry(ctx, id)
	if err != nil {
		s.log().Warn().Str("event", "session.refresh_failed").Str("session", id).Err(err).Msg("reading a session another node changed")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		return
	}
	if e == nil {
		s.drop(id, true)
		return
	}
	delete(s.fleet.misses, id)
	s.adopt(e)
}

// drop removes session id from this node, remembering the deletion
// (tombstone) when a notification announced it; s.mu is held.
func (s *Manager) drop(id string, announced bool) {
	if old := s.live[id]; old != nil {
		s.retire(old)
		delete(s.live, id)
		s.log().Info().Str("event", "session.deleted").Str("session", id).Msg("session deleted on another node")
	}
	if announced {
		s.tombstone(id)
	}
	os.RemoveAll(filepath.Join(s.Dir, id))
}

// Refresh makes a fleet node's sessions those of the database: sessions
// created on other nodes are loaded, deleted ones dropped, and changed
// unknown-request modes and connectors taken. The daemon
// calls it periodically, as the backstop of notifications; on a single
// node it does nothing. Errors are the database's.
func (s *Manager) Refresh(ctx context.Context) error {
	if s.Fleet == nil {
		return nil
	}
	key, db, err := s.opened()
	if err != nil {
		return err
	}
	if err := s.finishDeletes(ctx, db); err != nil {
		return err
	}
	read := time.Now() // before the rows: a session made after them is left alone below
	recs, _, err := sessionRows(ctx, db)
	if err != nil {
		return err
	}
	now := s.now()
	rows := make(map[string]sessionRecord, len(recs))
	for _, rec := range recs {
		if now.Before(rec.ExpiresAt) {
			rows[rec.ID] = rec
		}
	}
	s.mu.RLock()
	var missing []sessionRecord
	for id, rec := range rows {
		if s.live[id] == nil {
			missing = append(missing, rec)
		}
	}
	s.mu.RUnlock()
	loaded := make([]*sessionEntry, 0, len(missing))
	for _, rec := range missing {
		if e, err := s.loadSession(key, rec); err == nil {
			loaded = append(loaded, e)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.live {
		// A session that became live after the rows were read may be
		// missing from them: it is left to the next refresh.
		if _, ok := rows[id]; !ok && e.loaded.Before(read) {
			s.drop(id, false)
		}
	}
	for _, e := range loaded {
		s.adopt(e)
	}
	for id, rec := range rows { // a mode or scope changed on another node, its notification lost
		if have := s.live[id]; have != nil {
			s.live[id] = have.takeRow(rec)
		}
	}
	s.fleet.synced = read
	return nil
}

// undelete records that session id was deleted on this node but its row
// could not be removed: it stays refused here, whatever the rows say, until
// Refresh removes the row. s.mu is held.
func (s *Manager) undelete(id string) {
	if s.fleet.undeleted == nil {
		s.fleet.undeleted = map[string]bool{}
	}
	s.fleet.undeleted[id] = true
}

// finishDeletes removes the rows of the sessions deleted here while the
// state did not answer (and their directories), so that the other nodes
// drop them too.
func (s *Manager) finishDeletes(ctx context.Context, db *state.DB) error {
	s.mu.RLock()
	ids := make([]string, 0, len(s.fleet.undeleted))
	for id := range s.fleet.undeleted {
		ids = append(ids, id)
	}
	s.mu.RUnlock()
	for _, id := range ids {
		if _, err := deleteSessionRow(ctx, db, id); err != nil {
			return err
		}
		_ = os.RemoveAll(filepath.Join(s.Dir, id))
		s.mu.Lock()
		delete(s.fleet.undeleted, id)
		s.tombstone(id)
		s.mu.Unlock()
		s.log().Info().Str("event", "session.deleted").Str("session", id).Msg("session deleted (its row, once the shared state answered)")
	}
	return nil
}
