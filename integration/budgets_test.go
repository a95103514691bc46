package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
)

// Budgets: a session's model list and budgets hold across a daemon
// restart, and across the nodes of a fleet.

// llmSpec is a model provider stand-in at llm.example.com: a model call
// (usage) and a model listing.
const llmSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/llm", "version": "1.0.0"},
  "tools": [{"name": "llm", "operations": [
    {"name": "messages", "method": "POST", "path": "/v1/messages", "hosts": ["llm.example.com"], "usage": "anthropic"},
    {"name": "models", "method": "GET", "path": "/v1/models", "hosts": ["llm.example.com"], "idempotency": "idempotent"}
  ]}]
}`

// llmConfig is cfg with llm.example.com resolved to the suite's upstream,
// and the spec file to install.
func llmConfig(t *testing.T, cfg map[string]any) *specFile {
	t.Helper()
	cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["llm.example.com:443"] = theSuite.up.Addr
	p := filepath.Join(t.TempDir(), "llm.json")
	if err := os.WriteFile(p, []byte(llmSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	sp, err := loadSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// sessionUsage is a session's line of `session list --json`.
type sessionUsage struct {
	ID     string `json:"id"`
	Limits *struct {
		Models      []string `json:"models"`
		MaxRequests int64    `json:"max_requests"`
	} `json:"limits"`
	Usage *struct {
		Requests  int64      `json:"requests"`
		WindowEnd *time.Time `json:"window_end"`
		Exhausted []string   `json:"exhausted"`
	} `json:"usage"`
}

func listUsage(t *testing.T, d *daemon, id string) sessionUsage {
	t.Helper()
	var list []sessionUsage
	out := d.cli(t, "session", "list", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("session list --json: %v: %s", err, out)
	}
	for _, s := range list {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("session list --json lacks %s: %s", id, out)
	return sessionUsage{}
}

// refusedWith checks a refusal's status, reason (in the envelope and in
// Proxy-Status) and Retry-After ("" for none).
func refusedWith(t *testing.T, what string, status int, h http.Header, body []byte, wantStatus int, reason, retryAfter string) {
	t.Helper()
	class := map[string]string{"model_not_allowed": "capability_denied", "budget_exhausted": "limited"}[reason]
	assertDenial(t, what, status, body, wantStatus, class, reason)
	if ps := h.Get("Proxy-Status"); !strings.Contains(ps, `details="`+reason+": ") {
		t.Errorf("%s: Proxy-Status %q does not carry %s", what, ps, reason)
	}
	if got := h.Get("Retry-After"); got != retryAfter {
		t.Errorf("%s: Retry-After %q; want %q", what, got, retryAfter)
	}
}

// TestBudgetsSurviveRestart: a model call outside the session's models is
// refused before it is sent, one on the list goes; the requests budget over the session's life
// refuses the third request (no Retry-After), `session list` shows it, and
// a restarted daemon still refuses.
func TestBudgetsSurviveRestart(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	sp := llmConfig(t, cfg)
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, sp)
	sess := d.newSession(t, "--models", "claude-sonnet-*", "--max-requests", "2")
	c := goClient(t, sess)
	models, messages := "https://llm.example.com/v1/models", "https://llm.example.com/v1/messages"

	before := theSuite.up.Hits("llm.example.com", "/v1/messages")
	st, h, body := goDo(t, c, http.MethodPost, messages, `{"model":"gpt-4o","max_tokens":5,"messages":[]}`)
	refusedWith(t, "a model call for another model", st, h, body, http.StatusForbidden, "model_not_allowed", "")
	if theSuite.up.Hits("llm.example.com", "/v1/messages") != before {
		t.Error("the refused model call reached the upstream")
	}
	if st, _, body := goDo(t, c, http.MethodPost, messages, `{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}`); st != http.StatusOK {
		t.Fatalf("a model call on the list: %d %s", st, body)
	}
	if st, _, body := goDo(t, c, http.MethodGet, models, ""); st != http.StatusOK {
		t.Fatalf("the second request under budget: %d %s", st, body)
	}
	st, h, body = goDo(t, c, http.MethodGet, models, "")
	refusedWith(t, "the third request", st, h, body, http.StatusTooManyRequests, "budget_exhausted", "")
	if u := listUsage(t, d, sess.ID); u.Usage == nil || u.Usage.Requests != 2 || strings.Join(u.Usage.Exhausted, ",") != "requests" ||
		u.Limits == nil || u.Limits.MaxRequests != 2 {
		t.Errorf("session list --json: %+v; want 2 requests of 2 used, exhausted", u)
	}
	if out := d.cli(t, "session", "list"); !strings.Contains(out, "requests 2/2") || !strings.Contains(out, "EXHAUSTED: requests") {
		t.Errorf("session list does not show the usage:\n%s", out)
	}

	// launch --new takes the same limits for the session it creates.
	requireTool(t, "/usr/bin/curl")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	curl := `curl -sS -o /dev/null -w "%{http_code} " ` + models
	out, errOut, err := d.run(ctx, "launch", "--new", "--max-requests", "1", "--", "sh", "-c", curl+"; "+curl)
	if err != nil || out != "200 429 " {
		t.Errorf("launch --new --max-requests 1 with two requests: %v, statuses %q (want 200 429) %s", err, out, errOut)
	}

	nd := restartDaemon(t, d, nil)
	st, h, body = goDo(t, sess.via(t, nd), http.MethodGet, models, "")
	refusedWith(t, "after a restart", st, h, body, http.StatusTooManyRequests, "budget_exhausted", "")
}

// TestFleetBudgets: on two nodes sharing Postgres, a windowed budget used
// through node A refuses on node B, with Retry-After until the window ends.
func TestFleetBudgets(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	keys := t.TempDir()
	cfgA, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	sp := llmConfig(t, cfgA)
	nodes := map[string]*daemon{}
	for _, name := range []string{"node-a", "node-b"} {
		cfg, err := theSuite.baseConfig()
		if err != nil {
			t.Fatal(err)
		}
		llmConfig(t, cfg)
		cfg["state"] = map[string]any{"backend": "postgres", "dsn": dsn, "node": name,
			"fleet_key_file": filepath.Join(keys, "fleet.key"), "vault_key_file": filepath.Join(keys, "vault.key")}
		nodes[name] = theSuite.startTestDaemon(t, cfg, nil)
		if name == "node-a" { // the first node makes the keys the second reads
			nodes[name].install(t, sp)
		}
	}
	a, b := nodes["node-a"], nodes["node-b"]
	models := "https://llm.example.com/v1/models"
	plain := a.newSession(t)
	waitFor(t, "node B to serve the connector installed on node A", 20*time.Second, func() bool {
		st, _, _ := goDo(t, plain.via(t, b), http.MethodGet, models, "")
		return st == http.StatusOK
	})

	sess := a.newSession(t, "--max-requests", "1", "--budget-window", "1h")
	if st, _, body := goDo(t, sess.via(t, a), http.MethodGet, models, ""); st != http.StatusOK {
		t.Fatalf("the request under budget, on node A: %d %s", st, body)
	}
	st, h, body := goDo(t, sess.via(t, b), http.MethodGet, models, "")
	assertDenial(t, "on node B", st, body, http.StatusTooManyRequests, "limited", "budget_exhausted")
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 3600 {
		t.Errorf("Retry-After %q; want the seconds to the window's end, 1 to 3600", h.Get("Retry-After"))
	}
	if u := listUsage(t, b, sess.ID); u.Usage == nil || u.Usage.Requests != 1 || u.Usage.WindowEnd == nil {
		t.Errorf("session list --json on node B: %+v; want 1 request used, a window end", u)
	}
}
