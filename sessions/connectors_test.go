package sessions

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// TestAddConnector: a connector added to a live session's scope is in its
// next Authenticate, listed, kept across a restart, added once; a session
// with an empty scope already has every connector and stays so; and
// adding everywhere reaches every scoped session.
func TestAddConnector(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	const old, learned = "local://acme/old", "local://learned/agent"
	scoped, err := s.Create(t.Context(), CreateRequest{Name: "scoped", Connectors: []string{old}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Create(t.Context(), CreateRequest{Name: "other", Connectors: []string{old}})
	if err != nil {
		t.Fatal(err)
	}
	every, err := s.Create(t.Context(), CreateRequest{Name: "every"})
	if err != nil {
		t.Fatal(err)
	}
	_, token := testkit.ProxyCreds(t, scoped.ProxyURL)
	before, err := s.Authenticate(scoped.ID, token)
	if err != nil || before.MayUse(learned) {
		t.Fatalf("before: %+v, %v", before, err)
	}
	info, changed, err := s.AddConnector(t.Context(), scoped.ID, learned)
	if err != nil || !changed || !slices.Equal(info.Connectors, []string{old, learned}) {
		t.Fatalf("AddConnector = %+v, %v, %v", info, changed, err)
	}
	after, err := s.Authenticate(scoped.ID, token)
	if err != nil || !after.MayUse(learned) || !after.MayUse(old) || before.MayUse(learned) {
		t.Errorf("after: %+v (before %+v), %v; want the connector added, the old session value untouched", after, before, err)
	}
	if _, changed, err := s.AddConnector(t.Context(), scoped.ID, learned); err != nil || changed {
		t.Errorf("adding it again: changed %v, %v; want no change", changed, err)
	}
	if info, changed, err := s.AddConnector(t.Context(), every.ID, learned); err != nil || changed || info.Connectors != nil {
		t.Errorf("adding to a session with every connector: %+v, %v, %v; want it left with an empty list", info, changed, err)
	}
	if _, _, err := s.AddConnector(t.Context(), scoped.ID, "not a fqn"); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("a bad FQN: %v, want invalid argument", err)
	}
	if _, _, err := s.AddConnector(t.Context(), "s_aaaaaaaaaaaaaaaaaaaa", learned); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("an unknown session: %v, want not found", err)
	}
	ids, err := s.AddConnectorEverywhere(t.Context(), "local://learned/second")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	want := []string{scoped.ID, other.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("AddConnectorEverywhere changed %v, want %v", ids, want)
	}
	restarted := sessionsAt(t, home, clock)
	got, err := restarted.Get(other.ID)
	if err != nil || !slices.Equal(got.Connectors, []string{old, "local://learned/second"}) {
		t.Errorf("after a restart: %+v, %v", got, err)
	}
}

// A connector added on fleet node A reaches node B through the
// notification, and through Refresh when the change came without one.
func TestFleetAddConnector(t *testing.T) {
	f := newFleetDB(t)
	a, b := f.node(t), f.node(t)
	info, err := a.Create(t.Context(), CreateRequest{TTL: time.Hour, Connectors: []string{"local://acme/old"}})
	if err != nil {
		t.Fatal(err)
	}
	id, token := testkit.ProxyCreds(t, info.ProxyURL)
	if dp, err := b.Authenticate(id, token); err != nil || dp.MayUse("local://learned/a") {
		t.Fatalf("B before the change: %+v, %v", dp, err)
	}
	if _, _, err := a.AddConnector(t.Context(), id, "local://learned/a"); err != nil {
		t.Fatal(err)
	}
	allows := func(fqn string) bool {
		dp, err := b.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		return dp.MayUse(fqn)
	}
	for deadline := time.Now().Add(10 * time.Second); !allows("local://learned/a"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never took the connector added on A")
		}
	}
	f.pg.Exec(dbName(f.dsn), `UPDATE sessions SET connectors = '["local://acme/old","local://learned/b"]'`) // without a notification
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if allows("local://learned/a") || !allows("local://learned/b") {
		t.Error("after Refresh B does not have the scope the row says")
	}
}
