package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/notify"
)

// hookReceiver is a webhook endpoint on loopback that checks each
// delivery's signature with the shared secret and keeps the events.
type hookReceiver struct {
	mu     sync.Mutex
	events []notify.Event
	bad    []string
}

func (h *hookReceiver) handler(secret []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if got, want := r.Header.Get(notify.HeaderSignature), notify.Sign(secret, r.Header.Get(notify.HeaderTimestamp), body); got != want {
			h.bad = append(h.bad, "signature "+got)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev notify.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			h.bad = append(h.bad, string(body))
		}
		h.events = append(h.events, ev)
	}
}

// wait returns the first event named name, within 10 s.
func (h *hookReceiver) wait(t *testing.T, name string) notify.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		for _, ev := range h.events {
			if ev.Event == name {
				h.mu.Unlock()
				return ev
			}
		}
		bad := h.bad
		h.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("deliveries that did not verify: %q", bad)
		}
	}
	t.Fatalf("no %s delivery within 10 s", name)
	return notify.Event{}
}

// TestApprovalWebhooks: a held request is announced to the configured
// webhook at once, signed, with its review URL; the decision follows; and
// `approvals test-webhooks` checks the hook by hand.
func TestApprovalWebhooks(t *testing.T) {
	secret := []byte("hook-secret-" + randHex(8))
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := &hookReceiver{}
	srv := httptest.NewServer(rcv.handler(secret))
	t.Cleanup(srv.Close)
	e := startApprovalEnv(t, map[string]any{"hold": "30s",
		"webhooks": []any{map[string]any{"url": srv.URL + "/hook", "secret_file": secretFile}}}, nil)
	body := sendBody("hook-" + randHex(6))
	held := startHeld(e.c, gmailSendURL, body)
	req := rcv.wait(t, "approval.requested")
	if req.ApprovalID == "" || req.Method != "POST" || !strings.HasPrefix(req.Host, gmailSendHost) || !strings.Contains(req.ReviewURL, req.ApprovalID) {
		t.Fatalf("approval.requested delivery %+v", req)
	}
	e.d.cli(t, "approvals", "approve", req.ApprovalID)
	if r := <-held; r.status != http.StatusOK {
		t.Fatalf("the held request after approval: %d %s", r.status, trunc(r.body))
	}
	if ev := rcv.wait(t, "approval.approved"); ev.ApprovalID != req.ApprovalID || !strings.HasPrefix(ev.DecidedBy, "cli:") {
		t.Fatalf("approval.approved delivery %+v", ev)
	}
	if cfg := e.d.cli(t, "config", "print"); !strings.Contains(cfg, "# the running daemon's configuration (pid ") ||
		!strings.Contains(cfg, "hold: 30s") || !strings.Contains(cfg, srv.URL+"/hook") {
		t.Fatalf("config print does not show the running daemon's settings:\n%s", cfg)
	}
	out := e.d.cli(t, "approvals", "test-webhooks")
	if !strings.Contains(out, "ok   "+srv.URL+"/hook: HTTP 200") {
		t.Fatalf("approvals test-webhooks: %s", out)
	}
	rcv.wait(t, notify.EventTest)
}

// TestTestWebhooksWithoutHooks: asking a daemon with no webhooks to test
// them says so, and how to add one.
func TestTestWebhooksWithoutHooks(t *testing.T) {
	d := theSuite.mainDaemon(t)
	_, errOut, err := d.run(t.Context(), "approvals", "test-webhooks")
	if err == nil || !strings.Contains(errOut, "no approval.webhooks are configured") {
		t.Fatalf("approvals test-webhooks without hooks: %v %s", err, errOut)
	}
}
