package proposals

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// twoNodes runs fn with two stores, each on its own connection to one
// database: two processes on one SQLite file, or two nodes of a Postgres
// fleet.
func twoNodes(t *testing.T, fn func(t *testing.T, a, b *state.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		fn(t, testkit.OpenDB(t, path), testkit.OpenDB(t, path))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testkit.StartPostgres(t).NewDatabase()
		open := func() *state.DB {
			db, err := state.OpenPostgres(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		fn(t, open(), open())
	})
}

// TestAskOpensAndJoins: an ask opens a proposal with no request counted
// and the agent's justification, audited as proposal.created and
// proposal.requested; asking again, and a later learned request of the
// same template, join it without a second proposal.created.
func TestAskOpensAndJoins(t *testing.T) {
	backends(t, func(t *testing.T, db *state.DB) {
		ctx := t.Context()
		ev := &events{}
		s := &Store{DB: db, OnEvent: ev.record}
		p, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, "/repos/42/issues", "  to read the issue list\nof repo 42 ")
		if err != nil {
			t.Fatal(err)
		}
		if p.State != StateOpen || p.Count != 0 || p.Template != "/repos/{id}/issues" ||
			p.Justification != "to read the issue list\nof repo 42" || p.Session != "s_one" {
			t.Fatalf("Ask = %+v", p)
		}
		again, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, "/repos/7/issues", "second reason")
		if err != nil || again.ID != p.ID || again.Justification != "second reason" {
			t.Fatalf("second Ask = %+v, %v; want it to join %s with the latest justification", again, err, p.ID)
		}
		id, err := s.Learn(ctx, req("/repos/9/issues", "au_1", time.Now()))
		if err != nil || id != p.ID {
			t.Fatalf("Learn after Ask = %s, %v; want it to join %s", id, err, p.ID)
		}
		if got, _ := s.Get(ctx, p.ID); got.Count != 1 || got.Justification != "second reason" {
			t.Errorf("after a learned request: %+v, want count 1 and the justification kept", got)
		}
		if created := ev.named(audit.EventProposalCreated); len(created) != 1 || created[0].Details["asked"] != "true" {
			t.Errorf("proposal.created events = %+v, want exactly one, from the ask", created)
		}
		requested := ev.named(audit.EventProposalRequested)
		if len(requested) != 2 || requested[1].Details["justification"] != "second reason" ||
			requested[1].Details["proposal_id"] != p.ID || requested[1].Session != "s_one" || requested[1].Path != "/repos/{id}/issues" {
			t.Errorf("proposal.requested events = %+v, want two, each with its justification", requested)
		}
		// Asking for a rejected proposal answers the rejection at once;
		// the justification it was rejected with stays.
		if _, err := s.Reject(ctx, p.ID, "admin", "use the search API"); err != nil {
			t.Fatal(err)
		}
		late, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, "/repos/1/issues", "please")
		if err != nil || late.ID != p.ID || late.State != StateRejected || late.Reason != "use the search API" || late.Justification != "second reason" {
			t.Fatalf("Ask after reject = %+v, %v", late, err)
		}
	})
}

func TestAskRefusesBadInput(t *testing.T) {
	s := &Store{DB: sqliteDB(t)}
	for _, tc := range []struct {
		name string
		edit func(a *[6]any)
		want string
	}{
		{"no session", func(a *[6]any) { a[0] = "" }, "session and a host"},
		{"lower-case method", func(a *[6]any) { a[1] = "get" }, "upper-case letters"},
		{"method with a space", func(a *[6]any) { a[1] = "GET X" }, "upper-case letters"},
		{"no host", func(a *[6]any) { a[2] = "" }, "session and a host"},
		{"port 0", func(a *[6]any) { a[3] = 0 }, "from 1 to 65535"},
		{"relative path", func(a *[6]any) { a[4] = "items" }, "does not start with /"},
		{"no justification", func(a *[6]any) { a[5] = " \n " }, "justification is required"},
		{"long justification", func(a *[6]any) { a[5] = strings.Repeat("x", MaxJustification+1) }, "keep it to 1024"},
		{"escape sequence", func(a *[6]any) { a[5] = "fine\x1b[2Jreally" }, "control character U+001B"},
		{"carriage return", func(a *[6]any) { a[5] = "line\rover" }, "control character U+000D"},
		{"C1 control", func(a *[6]any) { a[5] = "x\u009by" }, "control character U+009B"},
		{"not UTF-8", func(a *[6]any) { a[5] = "x\xffy" }, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := [6]any{"s_one", "GET", "api.example.com", 443, "/items", "to list items"}
			tc.edit(&a)
			_, err := s.Ask(t.Context(), a[0].(string), a[1].(string), a[2].(string), a[3].(int), a[4].(string), a[5].(string))
			if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ask: %v, want ErrInvalidArgument saying %q", err, tc.want)
			}
		})
	}
	if _, err := s.Ask(t.Context(), "s_one", "GET", "api.example.com", 443, "/items", "tabs\tand\nnewlines are fine"); err != nil {
		t.Fatalf("Ask with a tab and a newline: %v", err)
	}
	if n := testkit.CountRows(t, s.DB, "proposals"); n != 1 {
		t.Errorf("%d proposals after the refusals, want 1", n)
	}
}

// TestAwaitSeesAnotherNodesDecision: Await on one store returns once a
// store on another connection (another process, another fleet node)
// rejects the proposal or accepts it, with the reason or the rule.
func TestAwaitSeesAnotherNodesDecision(t *testing.T) {
	twoNodes(t, func(t *testing.T, dbA, dbB *state.DB) {
		ctx := t.Context()
		a, b := &Store{DB: dbA}, &Store{DB: dbB}
		ask := func(path string) Proposal {
			p, err := a.Ask(ctx, "s_one", "POST", "api.example.com", 443, path, "to file a report")
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		p := ask("/reports")
		if got, err := a.Await(ctx, "s_one", p.ID, 0); err != nil || got.State != StateOpen {
			t.Fatalf("Await with no wait = %+v, %v; want it open at once", got, err)
		}
		if got, err := a.Await(ctx, "s_one", p.ID, 10*time.Millisecond); err != nil || got.State != StateOpen {
			t.Fatalf("Await until the wait ends = %+v, %v; want it still open", got, err)
		}
		got := awaitWhile(t, a, p.ID, func() {
			if _, err := b.Reject(ctx, p.ID, "cli:alice", "reports go through the form"); err != nil {
				t.Error(err)
			}
		})
		if got.State != StateRejected || got.Reason != "reports go through the form" || got.DecidedBy != "cli:alice" {
			t.Fatalf("Await after another node's reject = %+v", got)
		}
		q := ask("/reports/7/comments")
		got = awaitWhile(t, a, q.ID, func() {
			err := dbB.Write(ctx, func(tx *state.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE proposals SET state = 'accepted', rule = ?, connector = ?, decided_by = 'cli:bob' WHERE id = ?`,
					`{"method":"POST","template":"/reports/{id}/comments","approval":true}`, "local://learned/agent@1.0.1", q.ID)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
		if got.State != StateAccepted || got.Rule == nil || *got.Rule != (Rule{Method: "POST", Template: "/reports/{id}/comments", Approval: true}) ||
			got.Connector != "local://learned/agent@1.0.1" {
			t.Fatalf("Await after another node's accept = %+v (rule %+v)", got, got.Rule)
		}
	})
}

// awaitWhile waits on proposal id with a long wait while decide runs, and
// returns what Await returned.
func awaitWhile(t *testing.T, s *Store, id string, decide func()) Proposal {
	t.Helper()
	type res struct {
		p   Proposal
		err error
	}
	done := make(chan res, 1)
	go func() {
		p, err := s.Await(t.Context(), "s_one", id, time.Minute)
		done <- res{p, err}
	}()
	time.Sleep(2 * awaitPoll) // let it poll at least once before the decision
	decide()
	r := <-done
	if r.err != nil {
		t.Fatalf("Await: %v", r.err)
	}
	return r.p
}

// TestAwaitOnlyTheSessionsOwn: another session's proposal is reported
// exactly as one that does not exist; a cancelled wait ends.
func TestAwaitOnlyTheSessionsOwn(t *testing.T) {
	ctx := t.Context()
	s := &Store{DB: sqliteDB(t)}
	p, err := s.Ask(ctx, "s_one", "GET", "api.example.com", 443, "/x", "to read x")
	if err != nil {
		t.Fatal(err)
	}
	_, errOther := s.Await(ctx, "s_two", p.ID, time.Minute)
	const missing = "pr_aaaaaaaaaaaaaaaaaaaa"
	_, errMissing := s.Await(ctx, "s_two", missing, time.Minute)
	if !errors.Is(errOther, ErrNotFound) || !errors.Is(errMissing, ErrNotFound) ||
		strings.ReplaceAll(errOther.Error(), p.ID, "ID") != strings.ReplaceAll(errMissing.Error(), missing, "ID") {
		t.Fatalf("another session's proposal: %v; a missing one: %v; want the same not-found answer", errOther, errMissing)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Await(cctx, "s_one", p.ID, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Await with its context cancelled: %v", err)
	}
}
