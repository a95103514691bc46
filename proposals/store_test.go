package proposals

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// events records what a Store emits.
type events struct {
	mu  sync.Mutex
	got []audit.Event
}

func (e *events) record(ev audit.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *events) named(n audit.EventName) []audit.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []audit.Event
	for _, ev := range e.got {
		if ev.Name == n {
			out = append(out, ev)
		}
	}
	return out
}

func sqliteDB(t *testing.T) *state.DB {
	return testkit.OpenDB(t, filepath.Join(t.TempDir(), "state.db"))
}

func postgresDB(t *testing.T) *state.DB {
	pg := testkit.StartPostgres(t)
	db, err := state.OpenPostgres(t.Context(), pg.NewDatabase())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// backends runs fn on SQLite and on a real Postgres.
func backends(t *testing.T, fn func(t *testing.T, db *state.DB)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteDB(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresDB(t)) })
}

func req(path, auditID string, at time.Time) dataplane.UnknownRequest {
	return dataplane.UnknownRequest{Session: "s_one", Method: "GET", Host: "api.example.com", Port: 443,
		Path: path, AuditID: auditID, Time: at}
}

func TestLearnAggregates(t *testing.T) {
	backends(t, testLearnAggregates)
}

func testLearnAggregates(t *testing.T, db *state.DB) {
	ctx := t.Context()
	ev := &events{}
	s := &Store{DB: db, OnEvent: ev.record}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var id string
	for i := range 7 {
		r := req(fmt.Sprintf("/repos/%d/issues", 100+i), fmt.Sprintf("au_%d", i), t0.Add(time.Duration(i)*time.Minute))
		r.Credential = i == 3
		got, err := s.Learn(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if id != "" && got != id {
			t.Fatalf("request %d opened proposal %s, want it to join %s", i, got, id)
		}
		id = got
	}
	// Another method, port, template or session is another proposal.
	others := []dataplane.UnknownRequest{req("/repos/1/pulls", "", t0), req("/repos/1/issues", "", t0),
		req("/repos/1/issues", "", t0), req("/repos/1/issues", "", t0)}
	others[1].Method = "POST"
	others[2].Port = 8443
	others[3].Session = "s_two"
	for _, r := range others {
		if got, err := s.Learn(ctx, r); err != nil || got == id {
			t.Fatalf("Learn(%+v) = %s, %v; want a proposal of its own", r, got, err)
		}
	}
	p, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := Proposal{ID: id, Session: "s_one", Method: "GET", Host: "api.example.com", Port: 443,
		Template: "/repos/{id}/issues", State: StateOpen, Count: 7, Credential: true}
	if p.ID != want.ID || p.Session != want.Session || p.Method != want.Method || p.Host != want.Host ||
		p.Port != want.Port || p.Template != want.Template || p.State != want.State || p.Count != want.Count ||
		p.Credential != want.Credential {
		t.Fatalf("proposal = %+v, want %+v", p, want)
	}
	if !p.FirstSeen.Equal(t0) || !p.LastSeen.Equal(t0.Add(6*time.Minute)) {
		t.Errorf("seen %v to %v, want %v to %v", p.FirstSeen, p.LastSeen, t0, t0.Add(6*time.Minute))
	}
	if fmt.Sprint(p.Examples) != "[au_0 au_1 au_2 au_3 au_4]" {
		t.Errorf("examples = %v, want the first five audit ids", p.Examples)
	}
	if n := len(ev.named(audit.EventProposalCreated)); n != 5 {
		t.Errorf("%d proposal.created events, want 5 (one per proposal)", n)
	}
	list, err := s.List(ctx, "s_one")
	if err != nil || len(list) != 4 {
		t.Fatalf("List(s_one) = %d proposals, %v; want 4", len(list), err)
	}
}

func TestLearnConcurrentCountsExactly(t *testing.T) {
	backends(t, func(t *testing.T, db *state.DB) {
		ev := &events{}
		s := &Store{DB: db, OnEvent: ev.record}
		const n = 40
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				ids[i], err = s.Learn(context.Background(), req("/items/9", fmt.Sprintf("au_%d", i), time.Now()))
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("concurrent identical requests opened proposals %s and %s", ids[0], id)
			}
		}
		p, err := s.Get(t.Context(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if p.Count != n || len(p.Examples) != maxExamples {
			t.Errorf("count %d with %d examples, want %d with %d", p.Count, len(p.Examples), n, maxExamples)
		}
		if created := ev.named(audit.EventProposalCreated); len(created) != 1 ||
			created[0].Details["proposal_id"] != ids[0] {
			t.Errorf("proposal.created events = %+v, want exactly one for %s", created, ids[0])
		}
	})
}

func TestReject(t *testing.T) {
	backends(t, func(t *testing.T, db *state.DB) {
		ctx := t.Context()
		ev := &events{}
		s := &Store{DB: db, OnEvent: ev.record}
		id, err := s.Learn(ctx, req("/x", "au_1", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Reject(ctx, id, "admin", "  "); err == nil {
			t.Fatal("Reject with an empty reason succeeded")
		}
		p, err := s.Reject(ctx, id, "admin", "not needed")
		if err != nil || p.State != StateRejected || p.Reason != "not needed" || p.DecidedBy != "admin" || p.DecidedAt == nil {
			t.Fatalf("Reject = %+v, %v", p, err)
		}
		if _, err := s.Reject(ctx, id, "admin", "again"); !errors.Is(err, ErrDecided) {
			t.Fatalf("second Reject: %v, want ErrDecided", err)
		}
		if _, err := s.Get(ctx, "pr_aaaaaaaaaaaaaaaaaaaa"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of an unknown id: %v, want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, "../etc"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of a malformed id: %v, want ErrNotFound", err)
		}
		if again, err := s.Learn(ctx, req("/x", "au_2", time.Now())); err != nil || again != id {
			t.Fatalf("Learn after reject = %s, %v; want it to join %s", again, err, id)
		}
		if l, err := s.Record(ctx, req("/x", "au_3", time.Now())); err != nil || l.ID != id || !l.Rejected || l.Reason != "not needed" {
			t.Fatalf("Record after reject = %+v, %v; want %s rejected, not needed", l, err, id)
		}
		if p, _ := s.Get(ctx, id); p.State != StateRejected || p.Count != 3 {
			t.Errorf("after later requests: %+v, want rejected with count 3", p)
		}
		if n := len(ev.named(audit.EventProposalRejected)); n != 1 {
			t.Errorf("%d proposal.rejected events, want 1", n)
		}
	})
}

func TestLearnRequiresTheKey(t *testing.T) {
	s := &Store{DB: sqliteDB(t)}
	r := req("/x", "", time.Now())
	r.Session = ""
	if _, err := s.Learn(t.Context(), r); err == nil {
		t.Fatal("Learn without a session succeeded")
	}
}

func TestLearnAndAskStopAtTheSessionLimit(t *testing.T) {
	backends(t, testLearnAndAskStopAtTheSessionLimit)
}

// A sandbox sending endless distinct paths cannot open endless proposals:
// past the session's limit a new one is refused, while requests joining
// an existing proposal, and other sessions, go on as before.
func testLearnAndAskStopAtTheSessionLimit(t *testing.T, db *state.DB) {
	ctx := t.Context()
	s := &Store{DB: db, MaxPerSession: 3}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var first string
	for i, path := range []string{"/a", "/b", "/c"} {
		id, err := s.Learn(ctx, req(path, "", t0))
		if err != nil {
			t.Fatalf("Learn(%s): %v", path, err)
		}
		if i == 0 {
			first = id
		}
	}
	for _, path := range []string{"/d", "/e/f"} {
		if id, err := s.Learn(ctx, req(path, "", t0)); !errors.Is(err, ErrLimit) || !errors.Is(err, dataplane.ErrApprovalLimit) || id != "" {
			t.Fatalf("Learn(%s) past the limit = %q, %v; want ErrLimit", path, id, err)
		}
		if _, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, path, "to read it"); !errors.Is(err, ErrLimit) {
			t.Fatalf("Ask(%s) past the limit: %v; want ErrLimit", path, err)
		}
	}
	if id, err := s.Learn(ctx, req("/a", "", t0)); err != nil || id != first {
		t.Fatalf("Learn(/a) at the limit = %q, %v; want it to join %s", id, err, first)
	}
	if p, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, "/a", "to read it"); err != nil || p.ID != first {
		t.Fatalf("Ask(/a) at the limit = %+v, %v; want it to join %s", p, err, first)
	}
	other := req("/d", "", t0)
	other.Session = "s_two"
	if _, err := s.Learn(ctx, other); err != nil {
		t.Fatalf("another session's Learn: %v", err)
	}
	all, err := s.List(ctx, "s_one")
	if err != nil || len(all) != 3 {
		t.Fatalf("s_one has %d proposals (%v); want 3", len(all), err)
	}
}
