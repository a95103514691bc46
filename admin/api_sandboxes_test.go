package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/fence"
)

// recordingSandboxes remembers what the API asked of it.
type recordingSandboxes struct{ opened, attached []string }

func (r *recordingSandboxes) Open(_ context.Context, session string, pid int) (fence.Info, error) {
	r.opened = append(r.opened, session)
	return fence.Info{ID: "sbx-1", Session: session, PID: pid}, nil
}

func (r *recordingSandboxes) Attach(_ context.Context, session string, source netip.Prefix, listen netip.Addr) (fence.Info, error) {
	r.attached = append(r.attached, session+" "+source.String()+" "+listen.String())
	return fence.Info{ID: "sbx-2", Session: session, Source: source.String(), DNS: listen.String()}, nil
}

func (r *recordingSandboxes) Close(string) error { return fence.ErrNotFound }
func (r *recordingSandboxes) List() []fence.Info { return nil }

// TestOpenSandboxRequests: a process or a gateway, never both, never
// neither, and malformed addresses refused with what to send; a process's
// answer names what the daemon hides from it.
func TestOpenSandboxRequests(t *testing.T) {
	sb := &recordingSandboxes{}
	h := (&API{Sandboxes: sb, Hidden: func() []string { return []string{"/var/lib/aileron", "/var/log/aileron"} }}).Handler()
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"session":"s_1","pid":42}`, http.StatusCreated, `"hide": [
    "/var/lib/aileron",
    "/var/log/aileron"
  ]`},
		{`{"session":"s_1","source":"172.30.0.0/24","listen":"172.30.0.2"}`, http.StatusCreated, `"source": "172.30.0.0/24"`},
		{`{"session":"s_1","pid":42,"source":"172.30.0.0/24","listen":"172.30.0.2"}`, http.StatusBadRequest, `or {\"session\": ID, \"source\"`},
		{`{"session":"s_1"}`, http.StatusBadRequest, "invalid_argument"},
		{`{"session":"s_1","source":"172.30.0.0","listen":"172.30.0.2"}`, http.StatusBadRequest, `source \"172.30.0.0\"`},
		{`{"session":"s_1","source":"172.30.0.0/24","listen":"gateway"}`, http.StatusBadRequest, `listen \"gateway\"`},
		{`{"session":"s_1","pid":42,"pidd":1}`, http.StatusBadRequest, "pidd"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sandboxes", strings.NewReader(c.body)))
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d %s; want %d mentioning %s", c.body, rec.Code, rec.Body.String(), c.status, c.want)
		}
	}
	if len(sb.opened) != 1 || len(sb.attached) != 1 || sb.attached[0] != "s_1 172.30.0.0/24 172.30.0.2" {
		t.Errorf("opened %q, attached %q", sb.opened, sb.attached)
	}
}

// TestOpenSandboxNeedsHidden: a daemon that cannot say what a sandbox must
// not see opens none (the launcher never guesses), and fences nothing.
func TestOpenSandboxNeedsHidden(t *testing.T) {
	sb := &recordingSandboxes{}
	rec := httptest.NewRecorder()
	(&API{Sandboxes: sb}).Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/sandboxes", strings.NewReader(`{"session":"s_1","pid":42}`)))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "must not see") || len(sb.opened) != 0 {
		t.Errorf("%d %s, opened %q; want 503 saying why, and nothing opened", rec.Code, rec.Body.String(), sb.opened)
	}
}
