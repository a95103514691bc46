package admin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/budgets"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/sessions"
)

// A session created with limits over the API keeps them; the list shows
// what it used of its budgets (usage), and LimitsLine says it in a line.
// Bad limits are refused 400 with what to change.
func TestAdminSessionLimits(t *testing.T) {
	d := startDaemon(t)
	var created map[string]string
	d.admin.OnEvent = func(ev audit.EventName, details map[string]string) {
		if ev == audit.EventSessionCreated && details["limits"] != "" {
			created = details
		}
	}
	bg := &budgets.Budgets{DB: d.admin.Sessions.DB, Now: d.admin.Sessions.Now} // the sessions' clock
	d.admin.Budgets = bg
	ctx := context.Background()
	l := &policy.Limits{Models: []string{"claude-*"}, MaxRequests: 1, Window: time.Hour}
	info, err := d.client.CreateSession(ctx, sessions.CreateRequest{TTL: 2 * time.Hour, Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	if created["session"] != info.ID || created["limits"] != `{"models":["claude-*"],"max_requests":1,"window":"1h0m0s"}` {
		t.Errorf("session.created details %v; want the limits", created)
	}
	plain, err := d.client.CreateSession(ctx, sessions.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	dp, err := d.admin.Sessions.Session(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := bg.Admit(ctx, dp, dataplane.Admission{}); err != nil {
		t.Fatal(err)
	}
	list, err := d.client.ListSessions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSessions = %+v, %v", list, err)
	}
	for _, s := range list {
		switch s.ID {
		case plain.ID:
			if s.Usage != nil || s.Limits != nil || LimitsLine(s) != "-" {
				t.Errorf("a session without limits lists %+v, %+v", s.Limits, s.Usage)
			}
		case info.ID:
			if s.Limits == nil || s.Limits.MaxRequests != 1 || s.Usage == nil || s.Usage.Requests != 1 ||
				len(s.Usage.Exhausted) != 1 || s.Usage.WindowEnd == nil || !s.Usage.WindowEnd.Equal(info.CreatedAt.Add(time.Hour)) {
				t.Errorf("the limited session lists %+v, usage %+v", s.Limits, s.Usage)
			}
			if line := LimitsLine(s); !strings.Contains(line, "requests 1/1; per 1h0m0s until ") || !strings.Contains(line, "EXHAUSTED: requests; models claude-*") {
				t.Errorf("LimitsLine = %q", line)
			}
		}
	}
	_, err = d.client.CreateSession(ctx, sessions.CreateRequest{TTL: time.Hour, Limits: &policy.Limits{MaxTokens: 5, Window: 2 * time.Hour}})
	if ref := apiError(t, "a window longer than the ttl", err, 400, "invalid_argument"); !strings.Contains(ref.Message, "longer than the session's ttl") {
		t.Errorf("message %q does not say what to change", ref.Message)
	}
}
