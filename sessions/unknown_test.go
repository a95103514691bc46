package sessions

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// TestUnknownModeCreateUpdateList: a session's unknown-request mode is
// set at creation (deny by default), changed while it is live (its next
// Authenticate sees the new mode), listed, kept across a restart, and a
// mode other than deny, ask or learn is refused naming the three.
func TestUnknownModeCreateUpdateList(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	plain, err := s.Create(t.Context(), CreateRequest{Name: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	learner, err := s.Create(t.Context(), CreateRequest{Name: "learner", Unknown: dataplane.UnknownLearn})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Unknown != dataplane.UnknownDeny || learner.Unknown != dataplane.UnknownLearn {
		t.Errorf("created with unknown %q and %q; want deny and learn", plain.Unknown, learner.Unknown)
	}
	for _, bad := range []string{"asking", "Learn", "allow", " deny"} {
		_, err := s.Create(t.Context(), CreateRequest{Unknown: bad})
		if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), "deny, ask, learn") {
			t.Errorf("create with unknown %q: %v; want an invalid argument naming deny, ask, learn", bad, err)
		}
		if _, err := s.SetUnknown(t.Context(), plain.ID, bad); !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), "deny, ask, learn") {
			t.Errorf("update to %q: %v; want an invalid argument naming deny, ask, learn", bad, err)
		}
	}
	if _, err := s.SetUnknown(t.Context(), "s_aaaaaaaaaaaaaaaaaaaa", dataplane.UnknownLearn); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("update of an unknown session: %v; want not found", err)
	}

	_, token := testkit.ProxyCreds(t, plain.ProxyURL)
	before, err := s.Authenticate(plain.ID, token)
	if err != nil || before.Unknown != dataplane.UnknownDeny {
		t.Fatalf("before the update: %+v, %v", before, err)
	}
	info, err := s.SetUnknown(t.Context(), plain.ID, dataplane.UnknownLearn)
	if err != nil || info.Unknown != dataplane.UnknownLearn {
		t.Fatalf("update: %+v, %v", info, err)
	}
	after, err := s.Authenticate(plain.ID, token)
	if err != nil || after.Unknown != dataplane.UnknownLearn || before.Unknown != dataplane.UnknownDeny {
		t.Errorf("after the update: %+v (before: %+v), %v; want learn now, the old value untouched", after, before, err)
	}
	if dp, err := s.Session(plain.ID); err != nil || dp.Unknown != dataplane.UnknownLearn {
		t.Errorf("Session after the update: %+v, %v", dp, err)
	}
	if _, err := s.SetUnknown(t.Context(), learner.ID, ""); err != nil {
		t.Fatal(err)
	}

	want := map[string]string{plain.ID: dataplane.UnknownLearn, learner.ID: dataplane.UnknownDeny}
	check := func(m *Manager, when string) {
		list, err := m.List()
		if err != nil || len(list) != 2 {
			t.Fatalf("%s: list %+v, %v", when, list, err)
		}
		for _, in := range list {
			if in.Unknown != want[in.ID] {
				t.Errorf("%s: session %s unknown %q, want %q", when, in.Name, in.Unknown, want[in.ID])
			}
		}
	}
	check(s, "listed")
	check(sessionsAt(t, home, clock), "after a restart")
}

// A mode changed on fleet node A reaches node B through the notification,
// and through Refresh when the change came without one.
func TestFleetUnknownModeChange(t *testing.T) {
	f := newFleetDB(t)
	a, b := f.node(t), f.node(t)
	id, token := session(t, a)
	if dp, err := b.Authenticate(id, token); err != nil || dp.Unknown != dataplane.UnknownDeny {
		t.Fatalf("B before the change: %+v, %v", dp, err)
	}
	if _, err := a.SetUnknown(t.Context(), id, dataplane.UnknownLearn); err != nil {
		t.Fatal(err)
	}
	mode := func() string {
		dp, err := b.Session(id)
		if err != nil {
			t.Fatal(err)
		}
		return dp.Unknown
	}
	for deadline := time.Now().Add(10 * time.Second); mode() != dataplane.UnknownLearn; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("B never took the mode set on A")
		}
	}
	f.pg.Exec(dbName(f.dsn), `UPDATE sessions SET unknown = 'deny'`) // without a notification
	if err := b.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := mode(); got != dataplane.UnknownDeny {
		t.Errorf("after Refresh B has mode %q, want deny", got)
	}
}
