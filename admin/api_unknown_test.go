package admin

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/sessions"
)

// A session's unknown-request mode is set at creation and changed over
// the admin API (audited as session.updated), and the data plane's view
// of the session changes with it; a bad mode is refused 400 naming the
// two modes, an unknown session 404.
func TestAdminSessionUnknownMode(t *testing.T) {
	d := startDaemon(t)
	var mu sync.Mutex
	events := map[audit.EventName]map[string]string{}
	d.admin.OnEvent = func(ev audit.EventName, details map[string]string) {
		mu.Lock()
		defer mu.Unlock()
		events[ev] = details
	}
	ctx := context.Background()
	info, err := d.client.CreateSession(ctx, sessions.CreateRequest{Unknown: dataplane.UnknownLearn})
	if err != nil || info.Unknown != dataplane.UnknownLearn {
		t.Fatalf("create: %+v, %v", info, err)
	}
	got, err := d.client.UpdateSession(ctx, info.ID, dataplane.UnknownDeny)
	if err != nil || got.Unknown != dataplane.UnknownDeny || got.ProxyURL != "" {
		t.Fatalf("update: %+v, %v", got, err)
	}
	if dp, err := d.admin.Sessions.Session(info.ID); err != nil || dp.Unknown != dataplane.UnknownDeny {
		t.Errorf("data plane session after the update: %+v, %v", dp, err)
	}
	mu.Lock()
	if c, u := events[audit.EventSessionCreated], events[audit.EventSessionUpdated]; c["unknown"] != "learn" ||
		u["session"] != info.ID || u["unknown"] != "deny" {
		t.Errorf("audited created %v, updated %v", c, u)
	}
	mu.Unlock()
	for _, tc := range []struct {
		id, mode string
		status   int
		says     string
	}{
		{info.ID, "asking", 400, "deny, ask, learn"},
		{info.ID, "", 400, "required"},
		{"s_aaaaaaaaaaaaaaaaaaaa", "learn", 404, "session"},
	} {
		_, err := d.client.UpdateSession(ctx, tc.id, tc.mode)
		var ref *dataplane.Refusal
		if !errors.As(err, &ref) || ref.Status != tc.status || !strings.Contains(ref.Message, tc.says) {
			t.Errorf("update %s to %q: %v; want %d saying %q", tc.id, tc.mode, err, tc.status, tc.says)
		}
	}
	if _, err := d.client.CreateSession(ctx, sessions.CreateRequest{Unknown: "allow"}); err == nil || !strings.Contains(err.Error(), "deny, ask, learn") {
		t.Errorf("create with unknown allow: %v; want refused naming deny, ask, learn", err)
	}
}
