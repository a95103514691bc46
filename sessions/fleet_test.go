package sessions

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// fleetNode opens a Manager on its own home and its own connection to the
// Postgres database dsn, with the fleet key in keyFile.
func fleetNode(t *testing.T, dsn, keyFile string, clock *testkit.Clock) (*Manager, string) {
	t.Helper()
	home := t.TempDir() // removed after the database closes (cleanups run last first): no notification writes into it then
	db, err := state.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fk, err := state.LoadFleetKey(t.Context(), db, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := &Manager{DB: db, Dir: filepath.Join(home, "sessions"), Fleet: fk, ProxyURLHost: "127.0.0.1:9080", Now: clock.Now}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close) // before the database closes
	return s, home
}

// fleetDB is a private Postgres database and one fleet key file for the
// nodes of a test.
type fleetDB struct {
	pg       *testkit.Postgres
	dsn, key string
	clock    *testkit.Clock
}

func newFleetDB(t *testing.T) *fleetDB {
	pg := testkit.StartPostgres(t)
	return &fleetDB{pg: pg, dsn: pg.NewDatabase(), key: filepath.Join(t.TempDir(), "fleet.key"), clock: testkit.NewClock()}
}

// node starts a node on the database.
func (f *fleetDB) node(t *testing.T) *Manager {
	m, _ := fleetNode(t, f.dsn, f.key, f.clock)
	return m
}

// session creates an hour-long session on m and returns its id and token.
func session(t *testing.T, m *Manager) (id, token string) {
	t.Helper()
	info, err := m.Create(t.Context(), CreateRequest{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return testkit.ProxyCreds(t, info.ProxyURL)
}

// A session created on node A is served by node B at once, with the same
// token and a byte-identical CA certificate; deleting it on A ends it on B;
// a node started later loads it with the same CA. No CA private key is
// written anywhere.
func TestFleetAnyNodeServesAnySession(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	clock := testkit.NewClock()
	keyA := filepath.Join(t.TempDir(), "fleet.key")
	a, homeA := fleetNode(t, dsn, keyA, clock)
	keyB := filepath.Join(t.TempDir(), "fleet.key")
	raw, err := os.ReadFile(keyA)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyB, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, homeB := fleetNode(t, dsn, keyB, clock)

	info, err := a.Create(t.Context(), CreateRequest{Name: "agent", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	id, token := testkit.ProxyCreds(t, info.ProxyURL)
	sb, err := b.Authenticate(id, token)
	if err != nil {
		t.Fatalf("node B does not serve a session node A created: %v", err)
	}
	sa, err := a.Authenticate(id, token)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sa.CA.Certificate().Raw, sb.CA.Certificate().Raw) {
		t.Fatal("nodes A and B present different CA certificates for one session")
	}
	if _, err := b.Authenticate(id, token+"x"); !errors.Is(err, dataplane.ErrProxyAuth) {
		t.Fatalf("wrong token on B = %v", err)
	}
	got, err := b.Get(id)
	if err != nil || got.ProxyURL != info.ProxyURL {
		t.Fatalf("B.Get = %+v, %v; want A's proxy URL", got, err)
	}
	pemB, err := os.ReadFile(got.CACertPath)
	if err != nil || !bytes.Equal(pemB, sa.CA.CertPEM()) {
		t.Fatalf("B's ca.pem (%s) is not A's certificate: %v", got.CACertPath, err)
	}
	for _, home := range []string{homeA, homeB} {
		if _, err := os.Stat(filepath.Join(home, "sessions", id, ca.KeyFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a fleet node wrote the CA's private key under %s: %v", home, err)
		}
	}

	// A node started later derives the same CA.
	c, _ := fleetNode(t, dsn, keyA, clock)
	sc, err := c.Authenticate(id, token)
	if err != nil || !bytes.Equal(sc.CA.Certificate().Raw, sa.CA.Certificate().Raw) {
		t.Fatalf("node C: %v, or another certificate", err)
	}

	// Deleted on A: B and C stop serving it, through the notification.
	if err := a.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Manager{b, c} {
		deadline := time.Now().Add(10 * time.Second)
		for n.Live(id) == nil {
			if time.Now().After(deadline) {
				t.Fatal("a node still serves a session deleted on another")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := n.Authenticate(id, token); !errors.Is(err, dataplane.ErrProxyAuth) {
			t.Fatalf("Authenticate after delete = %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(homeB, "sessions", id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("B kept the deleted session's files: %v", err)
	}
}

// Refresh, the backstop of notifications, loads what another node created
// and drops what it deleted.
func TestFleetRefresh(t *testing.T) {
	f := newFleetDB(t)
	a, b := f.node(t), f.node(t)
	info, err := a.Create(t.Context(), CreateRequest{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Live(info.ID); err != nil {
		t.Fatalf("after Refresh, B does not know A's session: %v", err)
	}
	f.pg.Exec(dbName(f.dsn), `DELETE FROM sessions`) // deleted without a notification
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Live(info.ID); err == nil {
		t.Fatal("after Refresh, B still serves a session whose row is gone")
	}
}

// dbName is the dbname of a testkit DSN.
func dbName(dsn string) string {
	i := bytes.LastIndex([]byte(dsn), []byte("dbname="))
	rest := dsn[i+len("dbname="):]
	if j := bytes.IndexByte([]byte(rest), ' '); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// A fleet node that could not read the sessions for longer than it vouches
// for them refuses every session (a deletion made on another node could not
// reach it), and serves them again once a Refresh succeeds. A token the
// fleet key did not make is refused without a lookup.
func TestFleetStaleNodeRefusesSessions(t *testing.T) {
	f := newFleetDB(t)
	a := f.node(t)
	id, token := session(t, a)
	a.mu.Lock()
	a.fleet.synced = time.Now().Add(-staleAfter - time.Second)
	a.mu.Unlock()
	if _, err := a.Authenticate(id, token); !errors.Is(err, dataplane.ErrProxyAuth) || !errors.Is(err, dataplane.ErrSessionsUnavailable) ||
		!strings.Contains(err.Error(), "cannot vouch") {
		t.Fatalf("Authenticate on a stale node = %v; want refused as unavailable, not as wrong credentials", err)
	}
	if err := a.Live(id); !errors.Is(err, dataplane.ErrSessionsUnavailable) || a.Stale() == nil {
		t.Fatalf("a stale node: Live = %v, Stale = %v; want both to say it cannot vouch", err, a.Stale())
	}
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(id, token); err != nil || a.Stale() != nil {
		t.Fatalf("after a Refresh: %v, %v", err, a.Stale())
	}
	// A row another node wrote without a notification reaching this one:
	// a wrong token does not make node B read it; the right one does.
	b := f.node(t)
	other, err := newSessionID()
	if err != nil {
		t.Fatal(err)
	}
	tok := deriveToken(b.key, other)
	sum := sha256.Sum256([]byte(tok))
	rec := sessionRecord{ID: other, CreatedAt: f.clock.Now(), ExpiresAt: f.clock.Now().Add(time.Hour), TokenSHA256: hex.EncodeToString(sum[:])}
	if err := b.DB.Write(t.Context(), func(tx *state.Tx) error { return insertSession(t.Context(), tx, rec) }); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(other, tok+"x"); !errors.Is(err, dataplane.ErrProxyAuth) {
		t.Fatalf("a wrong token on node B = %v", err)
	}
	b.mu.RLock()
	known := b.live[other] != nil
	b.mu.RUnlock()
	if known {
		t.Fatal("a wrong token made node B look the session up")
	}
	if _, err := b.Authenticate(other, tok); err != nil {
		t.Fatalf("the right token of a session node B did not know: %v", err)
	}
}

// TestFleetDeleteDuringAnOutageIsFinished: a session deleted on node A
// while Postgres does not answer fails with an error saying so, stays
// refused on A however old its tombstone grows, and once the database
// answers A's next Refresh removes the row, so node B drops it too; it is
// never served again by A.
func TestFleetDeleteDuringAnOutageIsFinished(t *testing.T) {
	f := newFleetDB(t)
	a, b := f.node(t), f.node(t)
	id, token := session(t, a)
	if _, err := b.Authenticate(id, token); err != nil {
		t.Fatal(err)
	}
	f.pg.Stop()
	if err := a.Delete(t.Context(), id); err == nil || !strings.Contains(err.Error(), "removes its row once") {
		t.Fatalf("Delete while Postgres is down = %v; want a failure saying the deletion finishes later", err)
	}
	if _, err := a.Authenticate(id, token); err == nil {
		t.Fatal("node A still serves the session it deleted")
	}
	f.pg.Start()
	a.mu.Lock()
	a.fleet.tombstones[id] = time.Now().Add(-2 * tombstoneMemory) // long past the tombstone's memory
	a.mu.Unlock()
	if err := a.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(id, token); err == nil {
		t.Fatal("node A serves again the session it deleted during the outage")
	}
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate(id, token); err == nil {
		t.Fatal("node B still serves a session whose deletion A finished")
	}
}
