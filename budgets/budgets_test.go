package budgets_test

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/budgets"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

var created = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestWindowAt(t *testing.T) {
	h := time.Hour
	for _, c := range []struct {
		name       string
		w          time.Duration
		now        time.Time
		index      int64
		start, end time.Time
	}{
		{"life", 0, created.Add(1000 * h), 0, created, time.Time{}},
		{"first window", h, created.Add(59 * time.Minute), 0, created, created.Add(h)},
		{"start of the second", h, created.Add(h), 1, created.Add(h), created.Add(2 * h)},
		{"a second before the third", h, created.Add(3*h - time.Second), 2, created.Add(2 * h), created.Add(3 * h)},
		{"a clock behind the creation", h, created.Add(-time.Minute), 0, created, created.Add(h)},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := budgets.WindowAt(created, c.w, c.now)
			if w.Index != c.index || !w.Start.Equal(c.start) || !w.End.Equal(c.end) {
				t.Errorf("WindowAt = %+v; want index %d, %v to %v", w, c.index, c.start, c.end)
			}
		})
	}
}

// newSession records a session row (budget_usage refers to it) and returns
// the session as the data plane sees it.
func newSession(t *testing.T, db *state.DB, id string, l policy.Limits) *dataplane.Session {
	t.Helper()
	err := testkit.Exec(t, db, `INSERT INTO sessions (id, token_sha256, created_at, expires_at) VALUES (?, 'x', ?, ?)`,
		id, state.FormatTime(created), state.FormatTime(created.Add(48*time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	return &dataplane.Session{ID: id, Created: created, Limits: &l}
}

// refusal is Admit's refusal err, with the status the data plane answers
// it with (dataplane.budgetRefusal).
type refused struct {
	Status     int
	Reason     policy.Reason
	Message    string
	RetryAfter time.Duration
}

func refusal(t *testing.T, err error) refused {
	t.Helper()
	var be *dataplane.BudgetError
	if !errors.As(err, &be) {
		t.Fatalf("Admit = %v; want a *dataplane.BudgetError", err)
	}
	st := http.StatusForbidden
	if be.Reason == policy.ReasonBudgetExhausted {
		st = http.StatusTooManyRequests
	}
	return refused{st, be.Reason, be.Message, be.RetryAfter}
}

func backends(t *testing.T) map[string]func(t *testing.T) (*state.DB, *state.DB) {
	return map[string]func(t *testing.T) (*state.DB, *state.DB){
		"sqlite": func(t *testing.T) (*state.DB, *state.DB) {
			p := filepath.Join(t.TempDir(), state.FileName)
			return testkit.OpenDB(t, p), testkit.OpenDB(t, p)
		},
		"postgres": func(t *testing.T) (*state.DB, *state.DB) {
			dsn := testkit.StartPostgres(t).NewDatabase()
			open := func() *state.DB {
				d, err := state.OpenPostgres(t.Context(), dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				return d
			}
			return open(), open()
		},
	}
}

// Each backend: budgets refuse when used up, with the window's end as
// Retry-After; a new window frees them; a budget over the session's life
// never frees; concurrent admissions and charges from two handles (two
// nodes) count every one and admit no more than the budget.
func TestBudgets(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			t.Run("window", func(t *testing.T) { windowed(t, a) })
			t.Run("life", func(t *testing.T) { life(t, a) })
			t.Run("models", func(t *testing.T) { models(t, a) })
			t.Run("concurrent", func(t *testing.T) { concurrent(t, a, b) })
		})
	}
}

func windowed(t *testing.T, db *state.DB) {
	clock := testkit.NewClock() // 2026-03-01T12:00:00Z, the session's creation
	bg := &budgets.Budgets{DB: db, Now: clock.Now}
	s := newSession(t, db, "s_window", policy.Limits{MaxTokens: 100, MaxRequests: 3, Window: time.Hour})
	ctx := t.Context()
	clock.Advance(10 * time.Minute)
	if err := bg.Admit(ctx, s, dataplane.Admission{}); err != nil {
		t.Fatal(err)
	}
	// A call that starts under budget is charged all it used, over the budget.
	if err := bg.Charge(ctx, s, dataplane.Spent{Tokens: 150, Bytes: 10}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(20*time.Minute + 500*time.Millisecond)
	ref := refusal(t, bg.Admit(ctx, s, dataplane.Admission{}))
	if ref.Status != http.StatusTooManyRequests || ref.Reason != policy.ReasonBudgetExhausted || ref.RetryAfter != 30*time.Minute {
		t.Errorf("refusal = %d %s retry %v (%s); want 429 budget_exhausted retry 30m0s", ref.Status, ref.Reason, ref.RetryAfter, ref.Message)
	}
	reports, err := bg.Reports(ctx, []dataplane.Session{*s})
	if err != nil {
		t.Fatal(err)
	}
	if r := reports[s.ID]; r.Tokens != 150 || r.Requests != 1 || r.Bytes != 10 || len(r.Exhausted) != 1 || r.Exhausted[0] != "tokens" ||
		r.WindowEnd == nil || !r.WindowEnd.Equal(created.Add(time.Hour)) {
		t.Errorf("report = %+v", r)
	}
	clock.Advance(30 * time.Minute) // the second window
	for i := range 3 {
		if err := bg.Admit(ctx, s, dataplane.Admission{}); err != nil {
			t.Fatalf("request %d of the new window: %v", i+1, err)
		}
	}
	ref = refusal(t, bg.Admit(ctx, s, dataplane.Admission{}))
	if ref.Reason != policy.ReasonBudgetExhausted || ref.RetryAfter != time.Hour {
		t.Errorf("fourth request: %s retry %v; want budget_exhausted after 1h0m0s", ref.Reason, ref.RetryAfter)
	}
	if r, _ := bg.Reports(ctx, []dataplane.Session{*s}); r[s.ID].Requests != 3 || r[s.ID].Tokens != 0 {
		t.Errorf("report of the second window = %+v; want 3 requests, no tokens", r[s.ID])
	}
}

func life(t *testing.T, db *state.DB) {
	clock := testkit.NewClock()
	bg := &budgets.Budgets{DB: db, Now: clock.Now}
	s := newSession(t, db, "s_life", policy.Limits{MaxBytes: 1000})
	ctx := t.Context()
	if err := bg.Admit(ctx, s, dataplane.Admission{}); err != nil {
		t.Fatal(err)
	}
	if err := bg.Charge(ctx, s, dataplane.Spent{Bytes: 1000}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(40 * time.Hour)
	ref := refusal(t, bg.Admit(ctx, s, dataplane.Admission{}))
	if ref.Reason != policy.ReasonBudgetExhausted || ref.RetryAfter != 0 {
		t.Errorf("refusal %s retry %v; want budget_exhausted without Retry-After", ref.Reason, ref.RetryAfter)
	}
}

func models(t *testing.T, db *state.DB) {
	bg := &budgets.Budgets{DB: db}
	s := newSession(t, db, "s_models", policy.Limits{Models: []string{"claude-sonnet-*", "gpt-4o"}})
	ctx := t.Context()
	for _, c := range []struct {
		a    dataplane.Admission
		want policy.Reason
	}{
		{dataplane.Admission{ModelCall: true, Model: "claude-sonnet-4-5"}, ""},
		{dataplane.Admission{ModelCall: true, Model: "gpt-4o"}, ""},
		{dataplane.Admission{ModelCall: true, Model: "gpt-4o-mini"}, policy.ReasonModelNotAllowed},
		{dataplane.Admission{ModelCall: true, Model: "claude-opus-4"}, policy.ReasonModelNotAllowed},
		{dataplane.Admission{ModelCall: true}, policy.ReasonModelNotAllowed},       // unread: fail closed
		{dataplane.Admission{Model: ""}, ""},                                       // not a model call
		{dataplane.Admission{ModelCall: true, Model: "gpt-4o", Upgrade: true}, ""}, // a WebSocket, no token budget
	} {
		err := bg.Admit(ctx, s, c.a)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.a, err)
			}
			continue
		}
		if ref := refusal(t, err); ref.Status != http.StatusForbidden || ref.Reason != c.want {
			t.Errorf("%+v: %d %s; want 403 %s", c.a, ref.Status, ref.Reason, c.want)
		}
	}
	if n := testkit.CountRows(t, db, "budget_usage WHERE session = 's_models'"); n != 0 {
		t.Errorf("a session with only a model list has %d counter rows; want none", n)
	}
}

// concurrent: 40 admissions and 40 charges race on two handles; exactly
// the budget is admitted and every charge is counted.
func concurrent(t *testing.T, a, b *state.DB) {
	s := newSession(t, a, "s_race", policy.Limits{MaxRequests: 25})
	ctx := t.Context()
	var admitted, refusedN atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		bg := &budgets.Budgets{DB: []*state.DB{a, b}[i%2]}
		wg.Go(func() {
			err := bg.Admit(ctx, s, dataplane.Admission{})
			switch {
			case err == nil:
				admitted.Add(1)
			case refusal(t, err).Reason == policy.ReasonBudgetExhausted:
				refusedN.Add(1)
			default:
				t.Error(err)
			}
			if err := bg.Charge(ctx, s, dataplane.Spent{Tokens: 3, Bytes: 7}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 25 || refusedN.Load() != 15 {
		t.Errorf("admitted %d, refused %d; want 25 and 15", admitted.Load(), refusedN.Load())
	}
	var req, tok, by int64
	if err := b.QueryRowContext(ctx, `SELECT requests, tokens, bytes FROM budget_usage WHERE session = ?`, s.ID).Scan(&req, &tok, &by); err != nil {
		t.Fatal(err)
	}
	if req != 25 || tok != 120 || by != 280 {
		t.Errorf("counted %d requests, %d tokens, %d bytes; want 25, 120, 280", req, tok, by)
	}
}

// A database that cannot answer is not a budget refusal: Admit fails with
// the database's error, which the data plane answers 503.
func TestAdmitFailsClosed(t *testing.T) {
	_, db := testkit.HomeDB(t)
	s := newSession(t, db, "s_closed", policy.Limits{MaxRequests: 1})
	db.Close()
	err := (&budgets.Budgets{DB: db}).Admit(t.Context(), s, dataplane.Admission{})
	if err == nil {
		t.Fatal("admitted with the database closed")
	}
	var be *dataplane.BudgetError
	if errors.As(err, &be) {
		t.Errorf("Admit = %v, a budget refusal; want the database's failure (answered 503)", err)
	}
}

// A WebSocket whose frames a budget would have to count is refused: a
// model API's under a token or request budget (its turns pass ungated),
// any under a byte budget (its frames' bytes do).
func TestBudgetsRefuseUncountedWebSockets(t *testing.T) {
	_, db := testkit.HomeDB(t)
	bg := &budgets.Budgets{DB: db}
	for i, tc := range []struct {
		l       policy.Limits
		model   bool
		refused bool
	}{
		{policy.Limits{MaxTokens: 100}, true, true},
		{policy.Limits{MaxRequests: 100}, true, true},
		{policy.Limits{MaxBytes: 100}, true, true},
		{policy.Limits{MaxBytes: 100}, false, true},
		{policy.Limits{MaxTokens: 100}, false, false},
		{policy.Limits{MaxRequests: 100}, false, false},
		{policy.Limits{Models: []string{"m"}}, false, false},
	} {
		s := newSession(t, db, fmt.Sprintf("s_ws%d", i), tc.l)
		err := bg.Admit(t.Context(), s, dataplane.Admission{ModelCall: tc.model, Model: "m", Upgrade: true})
		switch {
		case tc.refused:
			if ref := refusal(t, err); ref.Status != http.StatusForbidden || ref.Reason != policy.ReasonUpgradeRefused {
				t.Errorf("%+v model %v: %d %s; want 403 upgrade_refused", tc.l, tc.model, ref.Status, ref.Reason)
			}
		case err != nil:
			t.Errorf("%+v model %v: %v; want admitted", tc.l, tc.model, err)
		}
	}
}

// Check refuses as Admit would and counts nothing; a new window frees it.
func TestCheck(t *testing.T) {
	_, db := testkit.HomeDB(t)
	now := created.Add(time.Minute)
	bg := &budgets.Budgets{DB: db, Now: func() time.Time { return now }}
	s := newSession(t, db, "s_re", policy.Limits{MaxTokens: 100, MaxRequests: 2, Models: []string{"m"}, Window: time.Hour})
	for range 5 { // polling a held request costs nothing
		if err := bg.Check(t.Context(), s, dataplane.Admission{}); err != nil {
			t.Fatalf("nothing used yet: %v", err)
		}
	}
	if ref := refusal(t, bg.Check(t.Context(), s, dataplane.Admission{ModelCall: true, Model: "other"})); ref.Reason != policy.ReasonModelNotAllowed {
		t.Errorf("a model off the list: %s; want model_not_allowed", ref.Reason)
	}
	if err := bg.Admit(t.Context(), s, dataplane.Admission{}); err != nil {
		t.Fatalf("the first request after five checks: %v", err)
	}
	if err := bg.Charge(t.Context(), s, dataplane.Spent{Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	if ref := refusal(t, bg.Check(t.Context(), s, dataplane.Admission{})); ref.Reason != policy.ReasonBudgetExhausted {
		t.Errorf("tokens used up: %s; want budget_exhausted", ref.Reason)
	}
	now = now.Add(time.Hour)
	if err := bg.Check(t.Context(), s, dataplane.Admission{}); err != nil {
		t.Errorf("in the next window: %v", err)
	}
}
