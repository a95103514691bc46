package sessions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// A session's limits are stored with it: the data plane's session carries
// them and its creation time after a restart, and the info shows them.
func TestLimitsSurviveReopen(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	l := policy.Limits{Models: []string{"claude-*", "claude-*"}, MaxTokens: 1000, MaxRequests: 10, Window: time.Hour}
	info, err := s.Create(t.Context(), CreateRequest{TTL: 2 * time.Hour, Limits: &l})
	if err != nil {
		t.Fatal(err)
	}
	if info.Limits == nil || len(info.Limits.Models) != 1 || info.Limits.MaxTokens != 1000 {
		t.Errorf("info limits = %+v; want them, the model list without duplicates", info.Limits)
	}
	plain, err := s.Create(t.Context(), CreateRequest{Limits: &policy.Limits{}})
	if err != nil {
		t.Fatal(err)
	}
	again := sessionsAt(t, home, clock)
	_, token := testkit.ProxyCreds(t, info.ProxyURL)
	dp, err := again.Authenticate(info.ID, token)
	if err != nil {
		t.Fatal(err)
	}
	if dp.Limits == nil || dp.Limits.MaxRequests != 10 || dp.Limits.Window != time.Hour || !dp.Created.Equal(clock.Now()) {
		t.Errorf("session after reopen: limits %+v, created %v", dp.Limits, dp.Created)
	}
	if got, _ := again.Session(plain.ID); got == nil || got.Limits != nil {
		t.Errorf("a session created with empty limits has limits %+v after reopen; want none", got)
	}
}

func TestCreateRejectsBadLimits(t *testing.T) {
	s := sessionsAt(t, t.TempDir(), testkit.NewClock())
	for _, c := range []struct {
		l    policy.Limits
		want string
	}{
		{policy.Limits{MaxTokens: 10, Window: 48 * time.Hour}, "longer than the session's ttl"},
		{policy.Limits{Window: time.Hour}, "needs a budget"},
		{policy.Limits{Models: []string{"gpt 4"}}, "character ' '"},
	} {
		_, err := s.Create(t.Context(), CreateRequest{TTL: 24 * time.Hour, Limits: &c.l})
		if !errors.Is(err, state.ErrInvalidArgument) || !errors.Is(err, policy.ErrBadLimits) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Create(%+v) = %v; want invalid argument saying %q", c.l, err, c.want)
		}
		if msg := err.Error(); strings.Count(msg, "invalid") != 1 || strings.Count(msg, "limits") != 1 {
			t.Errorf("Create(%+v) = %q; want what is wrong said once", c.l, msg)
		}
	}
	var req CreateRequest
	err := json.Unmarshal([]byte(`{"limits":{"max_tokens":0}}`), &req)
	if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), "leave it out") {
		t.Errorf("a budget of 0 in JSON: %v", err)
	}
}
