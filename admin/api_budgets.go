package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aileronhq/aileron/budgets"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/sessions"
)

// SessionView is a session as GET /v1/sessions lists it: its Info and, for
// a session with a budget, what it used in its current window (usage).
type SessionView struct {
	sessions.Info
	Usage *budgets.Report `json:"usage,omitempty"`
}

// sessionViews adds each session's usage to list (none without Budgets).
func (a *API) sessionViews(ctx context.Context, list []sessions.Info) ([]SessionView, error) {
	out := make([]SessionView, len(list))
	var counted []dataplane.Session
	for i, in := range list {
		out[i].Info = in
		if in.Limits != nil && in.Limits.HasBudget() {
			counted = append(counted, dataplane.Session{ID: in.ID, Created: in.CreatedAt, Limits: in.Limits})
		}
	}
	if a.Budgets == nil || len(counted) == 0 {
		return out, nil
	}
	reports, err := a.Budgets.Reports(ctx, counted)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if r, ok := reports[out[i].ID]; ok {
			out[i].Usage = &r
		}
	}
	return out, nil
}

// LimitsLine shows a session's limits and what it used of them on one
// line ("tokens 1200/1000; per 1h0m0s until …; EXHAUSTED: tokens; models
// claude-*"), for the CLI's table and the approvals page: "-" for none.
func LimitsLine(s SessionView) string {
	l := s.Limits
	if l == nil {
		return "-"
	}
	var parts []string
	var used struct{ tokens, requests, bytes int64 }
	if s.Usage != nil {
		used.tokens, used.requests, used.bytes = s.Usage.Tokens, s.Usage.Requests, s.Usage.Bytes
	}
	for _, b := range []struct {
		name      string
		max, used int64
	}{{"tokens", l.MaxTokens, used.tokens}, {"requests", l.MaxRequests, used.requests}, {"bytes", l.MaxBytes, used.bytes}} {
		if b.max > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", b.name, b.used, b.max))
		}
	}
	switch {
	case l.Window > 0 && s.Usage != nil && s.Usage.WindowEnd != nil:
		parts = append(parts, "per "+l.Window.String()+" until "+s.Usage.WindowEnd.Format(time.RFC3339))
	case l.Window > 0:
		parts = append(parts, "per "+l.Window.String())
	case l.HasBudget():
		parts = append(parts, "for the session's life")
	}
	if s.Usage != nil && len(s.Usage.Exhausted) > 0 {
		parts = append(parts, "EXHAUSTED: "+strings.Join(s.Usage.Exhausted, ","))
	}
	if l.Models != nil {
		parts = append(parts, "models "+strings.Join(l.Models, ","))
	}
	return strings.Join(parts, "; ")
}
