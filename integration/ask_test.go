package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The ask mode's end-to-end tests: a session whose requests no operation
// matches are held for a human, through the real daemon, the admin CLI and
// real clients (curl through `aileron launch`, Go's client).

// askSpec names api.us.example.com with one operation, so that other
// paths of that host match none.
const askSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/ask", "version": "1.0.0"},
  "tools": [{"name": "ask", "operations": [
    {"name": "known.get", "method": "GET", "path": "/v1/known", "hosts": ["api.us.example.com"]}
  ]}]
}`

// askRuleSpec is the rule a human accepts for a held request: it matches
// POST /v1/notes/{id}.
const askRuleSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://learned/notes", "version": "1.0.0"},
  "tools": [{"name": "notes", "operations": [
    {"name": "notes.create", "method": "POST", "path": "/v1/notes/{id}", "hosts": ["api.us.example.com"]}
  ]}]
}`

// askEnv starts a test daemon whose approval section is approval, with
// askSpec installed, api.us.example.com and other.example.com (which no
// connector names) resolved to the fake upstream, and a session created
// with args.
func askEnv(t *testing.T, approval map[string]any, args ...string) *toolsEnv {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["approval"] = approval
	res := cfg["upstream"].(map[string]any)["resolve"].(map[string]string)
	res["api.us.example.com:443"], res["other.example.com:443"] = theSuite.up.Addr, theSuite.up.Addr
	d := theSuite.startTestDaemon(t, cfg, nil)
	installSpecText(t, d, askSpec)
	return &toolsEnv{d: d, s: d.newSession(t, args...)}
}

// installSpecText installs a connector whose spec is text.
func installSpecText(t *testing.T, d *daemon, text string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "aileron.connector.v1.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cli(t, "connector", "install", dir)
}

// askReply is a refusal's envelope, as the tests read it.
type askReply struct {
	Error struct {
		Reason     string `json:"reason"`
		Message    string `json:"message"`
		ApprovalID string `json:"approval_id"`
		ProposalID string `json:"proposal_id"`
	} `json:"error"`
}

// curlAsk runs curl with args through the session and returns the answer's
// body and status.
func curlAsk(t *testing.T, e *toolsEnv, args ...string) (body, status string) {
	t.Helper()
	out, errOut, code := e.launch(t, append([]string{"curl", "-sS", "-w", "\n%{http_code}"}, args...)...)
	i := strings.LastIndexByte(out, '\n')
	if code != 0 || i < 0 {
		t.Fatalf("curl %v: exit %d %s %s", args, code, out, errOut)
	}
	return out[:i], out[i+1:]
}

func parseAsk(t *testing.T, what, body string) askReply {
	t.Helper()
	var r askReply
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%s: not an envelope (%v): %s", what, err, body)
	}
	return r
}

// TestAskSendOnceWithCurl: a session switched live from deny to ask has
// curl's unknown request held (approval_pending naming the approval and
// the proposal); an identical request joins the same approval; `approvals
// show` says no operation matches it; once approved, the identical request
// is sent once, byte for byte, and recorded as unknown_approved; sent again
// it waits for a new approval and is not sent. Past
// approval.max_pending_per_session, another unknown request is answered
// approval_limit.
func TestAskSendOnceWithCurl(t *testing.T) {
	e := askEnv(t, map[string]any{"hold": "1s", "max_pending_per_session": 2}, "--name", "asker")
	tag := randHex(6)
	path := "/v1/unknown/" + tag
	target := "https://api.us.example.com" + path + "?mode=full&tag=" + tag
	payload := `{"note":"send me once","tag":"` + tag + `"}`
	send := func() (string, string) {
		return curlAsk(t, e, "-H", "Content-Type: application/json", "--data-binary", payload, target)
	}
	body, status := send()
	if r := parseAsk(t, "in deny mode", body); status != "403" || r.Error.Reason != "no_matching_operation" || r.Error.ProposalID != "" {
		t.Fatalf("in deny mode: %s %s; want 403 no_matching_operation, no proposal", status, body)
	}
	e.d.cli(t, "session", "update", e.s.ID, "--unknown", "ask")

	body, status = send()
	first := parseAsk(t, "asked", body)
	if status != "403" || first.Error.Reason != "approval_pending" || first.Error.ApprovalID == "" || first.Error.ProposalID == "" {
		t.Fatalf("in ask mode: %s %s; want 403 approval_pending naming an approval and a proposal", status, body)
	}
	body, _ = send()
	if again := parseAsk(t, "asked again", body); again.Error.ApprovalID != first.Error.ApprovalID || again.Error.ProposalID != first.Error.ProposalID {
		t.Errorf("an identical request got %+v; want it to join approval %s", again.Error, first.Error.ApprovalID)
	}
	if n := len(listApprovals(t, e.d, "pending")); n != 1 {
		t.Errorf("%d approvals pending after two identical requests, want 1", n)
	}
	shown := e.d.cli(t, "approvals", "show", first.Error.ApprovalID)
	if !strings.Contains(shown, "no operation matches this request") || !strings.Contains(shown, first.Error.ProposalID) || !strings.Contains(shown, tag) {
		t.Errorf("approvals show does not say that no operation matches, or lacks the proposal or the request:\n%s", shown)
	}
	if n := theSuite.up.Hits("api.us.example.com", path); n != 0 {
		t.Fatalf("the upstream received %d requests before any decision", n)
	}

	e.d.cli(t, "approvals", "approve", first.Error.ApprovalID)
	body, status = send()
	var echo echoReply
	if err := json.Unmarshal([]byte(body), &echo); status != "200" || err != nil {
		t.Fatalf("after approval: %s %s; want the upstream's answer", status, body)
	}
	if echo.Method != "POST" || echo.RequestURI != path+"?mode=full&tag="+tag || echo.BodySHA256 != sha256Hex(payload) ||
		echo.Headers.Get("Content-Type") != "application/json" {
		t.Errorf("the upstream saw %s %s, body sha256 %s, Content-Type %q; want exactly the previewed request",
			echo.Method, echo.RequestURI, echo.BodySHA256, echo.Headers.Get("Content-Type"))
	}
	body, status = send()
	if r := parseAsk(t, "after it was sent", body); status != "403" || r.Error.Reason != "approval_pending" || r.Error.ApprovalID == first.Error.ApprovalID {
		t.Errorf("sent again after it was sent: %s %s; want a new approval_pending", status, body)
	}
	if n := theSuite.up.Hits("api.us.example.com", path); n != 1 {
		t.Errorf("the upstream received the approved request %d times, want once", n)
	}
	if l := proxiedLine(t, e.d, path); l["decision"] != "allow_after_approval" || l["reason"] != "unknown_approved" ||
		l["details.approval_id"] != first.Error.ApprovalID || l["details.proposal_id"] != first.Error.ProposalID {
		t.Errorf("the request sent once is audited as %v; want allow_after_approval, unknown_approved, naming its approval and proposal", l)
	}

	// One approval pends (the last request); a second unknown request
	// fills the session's limit, a third is refused.
	body, _ = curlAsk(t, e, "https://api.us.example.com/v1/other/"+tag)
	if r := parseAsk(t, "second unknown request", body); r.Error.Reason != "approval_pending" {
		t.Fatalf("second unknown request: %s; want approval_pending", body)
	}
	body, status = curlAsk(t, e, "https://api.us.example.com/v1/third/"+tag)
	if r := parseAsk(t, "over the limit", body); status != "429" || r.Error.Reason != "approval_limit" || r.Error.ProposalID == "" {
		t.Errorf("over the limit: %s %s; want 429 approval_limit naming its proposal", status, body)
	}
}

// TestAskDenyAndRule: a held request to a host no connector names (its
// CONNECT intercepted) is denied with a reason, which the held client
// receives with the approval and proposal ids, and nothing is sent; a held
// request for which a matching connector is installed (and the policy
// reloaded) while it waits is, once approved, decided by that rule: sent
// as its operation, which its audit line names.
func TestAskDenyAndRule(t *testing.T) {
	e := askEnv(t, map[string]any{"hold": "60s"}, "--name", "asker", "--unknown", "ask")
	c := goClient(t, e.s)
	before := theSuite.up.HostHits("other.example.com")
	held := startHeld(c, "https://other.example.com/v1/reports/1", `{"q":"all"}`)
	ap := waitPendingFor(t, e.d, e.s.ID)
	const reason = "use the reporting connector instead"
	e.d.cli(t, "approvals", "deny", ap.ID, "--reason", reason)
	r := waitHeld(t, held)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := parseAsk(t, "denied", string(r.body)); r.status != http.StatusForbidden || got.Error.Reason != "approval_denied" ||
		!strings.Contains(got.Error.Message, reason) || got.Error.ApprovalID != ap.ID || got.Error.ProposalID == "" {
		t.Errorf("denied: %d %s; want 403 approval_denied with the reason, the approval and the proposal", r.status, r.body)
	}
	if n := theSuite.up.HostHits("other.example.com") - before; n != 0 {
		t.Errorf("the upstream received %d requests for a denied one", n)
	}

	tag := randHex(6)
	notes := "/v1/notes/" + tag
	held = startHeld(c, "https://api.us.example.com"+notes, `{"text":"hi"}`)
	ap = waitPendingFor(t, e.d, e.s.ID)
	installSpecText(t, e.d, askRuleSpec) // the human accepts the proposal as a rule
	e.d.cli(t, "approvals", "approve", ap.ID)
	if r = waitHeld(t, held); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("approved under the new rule: %d %s %v; want the upstream's answer", r.status, r.body, r.err)
	}
	if n := theSuite.up.Hits("api.us.example.com", notes); n != 1 {
		t.Errorf("the upstream received %d requests, want 1", n)
	}
	if l := proxiedLine(t, e.d, notes); l["operation"] != "notes.create" || l["connector"] != "local://learned/notes" ||
		l["reason"] != "operation_matched" || l["details.approval_id"] != ap.ID {
		t.Errorf("the approved request is audited as %v; want the new rule's operation, naming the approval", l)
	}
}

// proxiedLine is the string fields of the audit trail's
// connector.proxy.proxied line for path.
func proxiedLine(t *testing.T, d *daemon, path string) auditStrings {
	t.Helper()
	lines, err := parseAuditLines([]byte(d.cli(t, "audit", "tail", "--json", "--event", "connector.proxy.proxied")))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if l.M["path"] == path {
			out := auditStrings{}
			for k, v := range l.M {
				if s, ok := v.(string); ok {
					out[k] = s
				}
			}
			if det, ok := l.M["details"].(map[string]any); ok {
				for k, v := range det {
					if s, ok := v.(string); ok {
						out["details."+k] = s
					}
				}
			}
			return out
		}
	}
	t.Fatalf("no connector.proxy.proxied line for %s in the audit trail", path)
	return nil
}

// auditStrings is an audit line's string fields, details as "details.KEY".
type auditStrings map[string]string
