package budgets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Budgets implements dataplane.Budgets over DB's budget_usage table.
// Methods are safe for concurrent use, from one node or many sharing DB.
type Budgets struct {
	// DB holds the counters (the sessions' own database). Required.
	DB *state.DB
	// Now is the clock windows are read from. Nil means time.Now.
	Now func() time.Time
}

// Window is one budget window of a session: Index counts windows since
// the session's creation (always 0 over the session's life), and End is
// zero for a budget over the session's life.
type Window struct {
	Index      int64
	Start, End time.Time
}

// WindowAt is the window of a session created at created, counting in
// windows of w (0: its life), that holds now. A now before created (a
// clock behind another node's) is in the first window.
func WindowAt(created time.Time, w time.Duration, now time.Time) Window {
	if w <= 0 {
		return Window{Start: created}
	}
	k := int64(0)
	if now.After(created) {
		k = int64(now.Sub(created) / w)
	}
	return windowN(created, w, k)
}

// windowN is window k of a session created at created.
func windowN(created time.Time, w time.Duration, k int64) Window {
	if w <= 0 {
		return Window{Start: created}
	}
	start := created.Add(time.Duration(k) * w)
	return Window{Index: k, Start: start, End: start.Add(w)}
}

// Used is what a session used in one window.
type Used struct {
	Window           int64
	Requests, Tokens int64
	Bytes            int64
}

// Admit implements dataplane.Budgets: a model call must name a model of
// the session's list, and a request of a session with a budget is counted
// in its current window unless a budget there is used up. Refusals are
// *dataplane.BudgetError (model_not_allowed, budget_exhausted, and
// upgrade_refused for a WebSocket a budget could not count: admissible); a
// database that cannot be reached is another error (refused 503).
func (b *Budgets) Admit(ctx context.Context, s *dataplane.Session, a dataplane.Admission) error {
	l := s.Limits
	if l == nil {
		return nil
	}
	if err := admissible(s, *l, a); err != nil {
		return err
	}
	if !l.HasBudget() {
		return nil
	}
	now := b.now()
	w := WindowAt(s.Created, l.Window, now)
	var u Used
	ok, err := b.DB.WriteRow(ctx, `INSERT INTO budget_usage (session, win, requests, tokens, bytes) VALUES (?, ?, 1, 0, 0)
		ON CONFLICT (session) DO UPDATE SET
			requests = CASE WHEN budget_usage.win < excluded.win THEN 1 ELSE budget_usage.requests + 1 END,
			tokens   = CASE WHEN budget_usage.win < excluded.win THEN 0 ELSE budget_usage.tokens END,
			bytes    = CASE WHEN budget_usage.win < excluded.win THEN 0 ELSE budget_usage.bytes END,
			win      = CASE WHEN budget_usage.win < excluded.win THEN excluded.win ELSE budget_usage.win END
		WHERE budget_usage.win < excluded.win
			OR (budget_usage.requests < ? AND budget_usage.tokens < ? AND budget_usage.bytes < ?)
		RETURNING win, requests, tokens, bytes`,
		[]any{s.ID, w.Index, limitOrMax(l.MaxRequests), limitOrMax(l.MaxTokens), limitOrMax(l.MaxBytes)},
		&u.Window, &u.Requests, &u.Tokens, &u.Bytes)
	if err != nil {
		return fmt.Errorf("counting a request of session %s: %w", s.ID, err)
	}
	if ok {
		return nil
	}
	// Refused: read what is used up, to say which budget and until when.
	if u, err = b.used(ctx, s); err != nil {
		return err
	}
	return exhausted(s, *l, u, now)
}

// used reads session s's row (the zero Used when it has none).
func (b *Budgets) used(ctx context.Context, s *dataplane.Session) (Used, error) {
	var u Used
	err := b.DB.QueryRowContext(ctx, `SELECT win, requests, tokens, bytes FROM budget_usage WHERE session = ?`, s.ID).
		Scan(&u.Window, &u.Requests, &u.Tokens, &u.Bytes)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Used{}, fmt.Errorf("reading the budgets of session %s: %w", s.ID, b.DB.Unavailable(err))
	}
	return u, nil
}

// Check implements dataplane.Budgets: it refuses as Admit would, counting
// nothing (a request about to wait for a human, or polling for one that
// waits: it is counted by Admit once approved).
func (b *Budgets) Check(ctx context.Context, s *dataplane.Session, a dataplane.Admission) error {
	l := s.Limits
	if l == nil {
		return nil
	}
	if err := admissible(s, *l, a); err != nil {
		return err
	}
	if !l.HasBudget() {
		return nil
	}
	u, err := b.used(ctx, s)
	if err != nil {
		return err
	}
	now := b.now()
	if u.Window < WindowAt(s.Created, l.Window, now).Index {
		return nil // a new window: nothing used in it yet
	}
	if len(usedUp(*l, u)) > 0 {
		return exhausted(s, *l, u, now)
	}
	return nil
}

// Charge implements dataplane.Budgets: it adds u's tokens and bytes to
// the session's current window (moving the row to it first, if it is
// new).
func (b *Budgets) Charge(ctx context.Context, s *dataplane.Session, u dataplane.Spent) error {
	l := s.Limits
	if l == nil || !l.HasBudget() || (u.Tokens <= 0 && u.Bytes <= 0) {
		return nil
	}
	w := WindowAt(s.Created, l.Window, b.now())
	var win int64
	_, err := b.DB.WriteRow(ctx, `INSERT INTO budget_usage (session, win, requests, tokens, bytes) VALUES (?, ?, 0, ?, ?)
		ON CONFLICT (session) DO UPDATE SET
			requests = CASE WHEN budget_usage.win < excluded.win THEN 0 ELSE budget_usage.requests END,
			tokens   = CASE WHEN budget_usage.win < excluded.win THEN excluded.tokens ELSE budget_usage.tokens + excluded.tokens END,
			bytes    = CASE WHEN budget_usage.win < excluded.win THEN excluded.bytes ELSE budget_usage.bytes + excluded.bytes END,
			win      = CASE WHEN budget_usage.win < excluded.win THEN excluded.win ELSE budget_usage.win END
		RETURNING win`,
		[]any{s.ID, w.Index, clampCharge(u.Tokens), clampCharge(u.Bytes)}, &win)
	if err != nil {
		return fmt.Errorf("charging %d tokens and %d bytes to session %s: %w", u.Tokens, u.Bytes, s.ID, err)
	}
	return nil
}

// Report is what a session with limits has used in its current window,
// against its limits.
type Report struct {
	Requests int64 `json:"requests"`
	Tokens   int64 `json:"tokens"`
	Bytes    int64 `json:"bytes"`
	// WindowStart and WindowEnd bound the current window; WindowEnd is
	// absent for budgets over the session's life.
	WindowStart time.Time  `json:"window_start"`
	WindowEnd   *time.Time `json:"window_end,omitempty"`
	// Exhausted names the budgets used up ("tokens", "requests",
	// "bytes"): the session's next request is refused until WindowEnd.
	Exhausted []string `json:"exhausted,omitempty"`
}

// Reports returns, by session id, the Report of each of sessions that
// has a budget, read in one query.
func (b *Budgets) Reports(ctx context.Context, sessions []dataplane.Session) (map[string]Report, error) {
	query, args := `SELECT session, win, requests, tokens, bytes FROM budget_usage`, []any(nil)
	if len(sessions) == 1 {
		query, args = query+` WHERE session = ?`, []any{sessions[0].ID}
	}
	rows, err := b.DB.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading budget usage from %s: %w", b.DB.Path(), err)
	}
	defer rows.Close()
	used := map[string]Used{}
	for rows.Next() {
		var id string
		var u Used
		if err := rows.Scan(&id, &u.Window, &u.Requests, &u.Tokens, &u.Bytes); err != nil {
			return nil, fmt.Errorf("reading budget usage from %s: %w", b.DB.Path(), err)
		}
		used[id] = u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading budget usage from %s: %w", b.DB.Path(), b.DB.Unavailable(err))
	}
	now := b.now()
	out := map[string]Report{}
	for _, s := range sessions {
		if s.Limits == nil || !s.Limits.HasBudget() {
			continue
		}
		out[s.ID] = report(s, used[s.ID], now)
	}
	return out, nil
}

// report is session s's Report given its row u at now.
func report(s dataplane.Session, u Used, now time.Time) Report {
	l := *s.Limits
	w := WindowAt(s.Created, l.Window, now)
	if u.Window < w.Index { // the row is of a past window: nothing used in this one
		u = Used{Window: w.Index}
	} else if u.Window > w.Index { // another node's clock moved it on
		w = windowN(s.Created, l.Window, u.Window)
	}
	r := Report{Requests: u.Requests, Tokens: u.Tokens, Bytes: u.Bytes, WindowStart: w.Start.UTC(),
		Exhausted: usedUp(l, u)}
	if !w.End.IsZero() {
		end := w.End.UTC()
		r.WindowEnd = &end
	}
	return r
}

// usedUp names the budgets of l that u used up.
func usedUp(l policy.Limits, u Used) []string {
	var out []string
	for _, b := range []struct {
		name      string
		max, used int64
	}{{"tokens", l.MaxTokens, u.Tokens}, {"requests", l.MaxRequests, u.Requests}, {"bytes", l.MaxBytes, u.Bytes}} {
		if b.max > 0 && b.used >= b.max {
			out = append(out, b.name)
		}
	}
	return out
}

// exhausted is the refusal of a request of s whose row u has a budget
// used up.
func exhausted(s *dataplane.Session, l policy.Limits, u Used, now time.Time) error {
	which := usedUp(l, u)
	if len(which) == 0 { // changed since the upsert: say so rather than guess
		which = []string{"a budget"}
	}
	var parts []string
	for _, name := range which {
		switch name {
		case "tokens":
			parts = append(parts, fmt.Sprintf("%d of its %d tokens", u.Tokens, l.MaxTokens))
		case "requests":
			parts = append(parts, fmt.Sprintf("%d of its %d requests", u.Requests, l.MaxRequests))
		case "bytes":
			parts = append(parts, fmt.Sprintf("%d of its %d request bytes", u.Bytes, l.MaxBytes))
		default:
			parts = append(parts, name)
		}
	}
	flag := "--max-" + which[0]
	if len(which[0]) > len("requests") { // "a budget"
		flag = "budget"
	}
	if l.Window <= 0 {
		return &dataplane.BudgetError{Reason: policy.ReasonBudgetExhausted, Message: fmt.Sprintf("session %s has used %s over its life, and that budget does not renew; "+
			"create a new session (with a larger %s) to go on", s.ID, strings.Join(parts, " and "), flag)}
	}
	w := windowN(s.Created, l.Window, u.Window)
	// Retry-After in whole seconds, rounded up: the window has ended by
	// then (it starts on a whole second, and lasts whole seconds).
	retry := max((w.End.Sub(now) + time.Second - 1).Truncate(time.Second), time.Second)
	return &dataplane.BudgetError{Reason: policy.ReasonBudgetExhausted, RetryAfter: retry,
		Message: fmt.Sprintf("session %s has used %s in its budget window of %v, which ends at %s; "+
			"retry then (Retry-After), or create a session with a larger %s", s.ID, strings.Join(parts, " and "), l.Window,
			w.End.UTC().Format(time.RFC3339), flag)}
}

// modelMessage says why a model call is refused.
func modelMessage(id string, models []string, model string) string {
	list := strings.Join(models, ", ")
	if model == "" {
		return fmt.Sprintf("session %s may call only the models %s, and the proxy could not read which model this call asks for, "+
			"so it refuses it (fail closed); name the model where the provider's API expects it", id, list)
	}
	return fmt.Sprintf("session %s may call only the models %s, and this call asks for %q; use one of those, "+
		"or create a session whose --models includes it", id, list, model)
}

// limitOrMax is a budget for the upsert's condition: no budget never
// stops a request.
func limitOrMax(v int64) int64 {
	if v <= 0 {
		return math.MaxInt64
	}
	return v
}

// clampCharge bounds one charge, so that counters cannot overflow.
func clampCharge(v int64) int64 {
	return min(max(v, 0), policy.MaxBudget)
}

func (b *Budgets) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// admissible refuses what no budget's state can let through: a model call
// off the session's list, and a WebSocket whose frames a budget would have
// to count.
func admissible(s *dataplane.Session, l policy.Limits, a dataplane.Admission) error {
	if a.ModelCall && !l.AllowsModel(a.Model) {
		return &dataplane.BudgetError{Reason: policy.ReasonModelNotAllowed, Message: modelMessage(s.ID, l.Models, a.Model)}
	}
	if a.Upgrade && (l.MaxBytes > 0 || a.ModelCall && (l.MaxTokens > 0 || l.MaxRequests > 0)) {
		return &dataplane.BudgetError{Reason: policy.ReasonUpgradeRefused, Message: fmt.Sprintf("session %s has a budget "+
			"(tokens, requests or bytes), and what passes over a WebSocket once it is open (a model API's turns, its bytes) is not "+
			"gated, so it could not be stopped when the budget is used up; use the API over HTTPS (Codex falls back to it by itself)", s.ID)}
	}
	return nil
}
