package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	toolsLinearFQN = "github://acme/aileron-connector-linear"
	toolsGoogleFQN = "github://acme/aileron-connector-google"
)

// toolsEnv is a daemon with the Linear-like and Google-like packages of
// action/testdata installed (hosts moved to the names the test PKI and the
// fake upstream serve), their credentials bound, and one session.
type toolsEnv struct {
	d         *daemon
	s         *session
	linearKey string
}

func startToolsEnv(t *testing.T) *toolsEnv {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	e := &toolsEnv{d: theSuite.startTestDaemon(t, cfg, nil)}
	for _, pkg := range []string{"linear", "google"} {
		dir := copyPackage(t, filepath.Join(theSuite.root, "action", "testdata", pkg),
			strings.NewReplacer("api.linear.test", "api.linear.app", "gmail.google.test", "gmail.googleapis.com"))
		e.d.cli(t, "connector", "install", dir)
	}
	e.linearKey = newSecret("tools linear key", "lin_api_", "")
	gmailTok := newSecret("tools gmail token", "ya29.", "")
	for _, c := range []struct{ name, secret, kind, fqn string }{
		{"tools-linear", e.linearKey, "api_key", toolsLinearFQN},
		{"tools-gmail", gmailTok, "bearer", toolsGoogleFQN},
	} {
		if out, errOut, err := e.d.runInput(t.Context(), c.secret, "credential", "set", c.name, "--kind", c.kind); err != nil {
			t.Fatalf("credential set %s: %v\n%s%s", c.name, err, out, errOut)
		}
		e.d.cli(t, "credential", "bind", c.fqn, "--credential", c.name)
	}
	e.s = e.d.newSession(t, "--name", "tools")
	return e
}

// copyPackage copies a package directory, rewriting host names in every file.
func copyPackage(t *testing.T, src string, hosts *strings.Replacer) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if de.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), []byte(hosts.Replace(string(b))), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// launch runs `aileron launch --session ID -- argv…` and returns its output.
func (e *toolsEnv) launch(t *testing.T, argv ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, errOut, err := e.d.run(ctx, append([]string{"launch", "--session", e.s.ID, "--"}, argv...)...)
	theSuite.seen.add("aileron launch "+strings.Join(argv, " "), nil, []byte(out+errOut))
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("aileron launch %v: %v\n%s", argv, err, errOut)
	}
	return out, errOut, code
}

func sha256HexOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestTools drives the tool side end to end: the run endpoint with curl,
// MCP over stdio (inside `aileron launch`) and Streamable HTTP with the
// SDK's own client, approvals decided on the admin side, generated shims
// run with sh, and launch with curl and Python.
func TestTools(t *testing.T) {
	e := startToolsEnv(t)
	t.Run("run_endpoint", e.runEndpoint)
	t.Run("mcp_stdio", e.mcpStdio)
	t.Run("mcp_http", e.mcpHTTP)
	t.Run("shims", e.shims)
	t.Run("launch", e.launchClients)
	t.Run("sandbox_cannot_decide", e.sandboxCannotDecide)
	t.Run("discovery", e.discovery)
	t.Run("cancel", e.cancelFromCLI)
}

// cancelFromCLI: `aileron actions cancel` cancels a run waiting for its
// approval, which then never runs, though approved; a second cancel
// reports the run's final status.
func (e *toolsEnv) cancelFromCLI(t *testing.T) {
	cs := mcpSession(t, &mcp.StreamableClientTransport{Endpoint: "https://aileron.internal/v1/mcp", HTTPClient: goClient(t, e.s)})
	const sendPath = "/gmail/v1/users/me/messages/send"
	before := theSuite.up.Hits("gmail.googleapis.com", sendPath)
	args := map[string]any{"to": "alice@example.com", "subject": "Cancel me", "body": "never sent"}
	m, _ := callTool(t, cs, "send_email", args)
	id, _ := m["approval_id"].(string)
	run, _ := m["run_id"].(string)
	if m["status"] != "pending_approval" || id == "" || run == "" {
		t.Fatalf("send_email: %v (want pending_approval with a run_id)", m)
	}
	if out := e.d.cli(t, "actions", "cancel", run); !strings.Contains(out, "cancelled run "+run) || !strings.Contains(out, "cancelled by cli:") {
		t.Fatalf("actions cancel: %q", out)
	}
	e.d.cli(t, "approvals", "approve", id)
	if m = pollStatus(t, cs, id); m["status"] != "cancelled" || !strings.Contains(jsonString(m["error"]), `"reason":"cancelled"`) {
		t.Fatalf("after approval: %v", m)
	}
	if m, _ = callTool(t, cs, "send_email", args); m["status"] != "cancelled" {
		t.Fatalf("an identical call after the approval: %v", m)
	}
	if out := e.d.cli(t, "actions", "cancel", run); !strings.Contains(out, "had already ended: cancelled") {
		t.Fatalf("second cancel: %q", out)
	}
	if got := theSuite.up.Hits("gmail.googleapis.com", sendPath) - before; got != 0 {
		t.Fatalf("a cancelled run sent %d e-mails", got)
	}
}

func (e *toolsEnv) runEndpoint(t *testing.T) {
	post := func(body string) (map[string]any, string) {
		out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
			"--data-binary", body, "https://aileron.internal/v1/connector-operations/run")
		if code != 0 {
			t.Fatalf("curl exit %d: %s", code, errOut)
		}
		i := strings.LastIndexByte(out, '\n')
		var m map[string]any
		_ = json.Unmarshal([]byte(out[:i]), &m)
		return m, out[i+1:]
	}
	before := theSuite.up.Hits("api.linear.app", "/issues/ENG-1")
	m, status := post(`{"connector_fqn":"` + toolsLinearFQN + `","tool":"linear","operation":"get-issue","args":{"id":"ENG-1"}}`)
	body, _ := m["body"].(map[string]any)
	if status != "200" || m["status"] != "ok" || m["upstream_status"] != 200.0 || m["audit_id"] == "" || body["id"] != "ISS-ENG-1" {
		t.Fatalf("run get-issue: %s %v", status, m)
	}
	if body["auth_sha256"] != sha256HexOf(e.linearKey) {
		t.Errorf("the upstream did not receive the bound raw key as Authorization")
	}
	if got := theSuite.up.Hits("api.linear.app", "/issues/ENG-1") - before; got != 1 {
		t.Fatalf("upstream hits %d, want 1", got)
	}
	total := theSuite.up.Total()
	m, status = post(`{"connector_fqn":"` + toolsLinearFQN + `","tool":"linear","operation":"get-issue","args":{}}`)
	if status != "400" || !strings.Contains(jsonString(m), `\"id\"`) && !strings.Contains(jsonString(m), "id") {
		t.Errorf("missing path argument: %s %v", status, m)
	}
	m, status = post(`{"connector_fqn":"` + toolsLinearFQN + `","tool":"linear","operation":"delete-everything","args":{}}`)
	if status != "404" || !strings.Contains(jsonString(m), "get-issue") {
		t.Errorf("unknown operation: %s %v (want 404 listing the tool's operations)", status, m)
	}
	if theSuite.up.Total() != total {
		t.Fatal("a rejected run reached the upstream")
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mcpSession connects the SDK client over transport and lists the tools.
func mcpSession(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "aileron-integration"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("MCP connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls name and decodes the ActionResult it carries.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["status"] == nil {
		t.Fatalf("CallTool %s: no ActionResult in %s (content %s)", name, b, jsonString(res.Content))
	}
	theSuite.seen.add("MCP "+name, nil, b)
	return m, res.IsError
}

// pollStatus calls check_action_status until the run leaves
// pending_approval and running (bounded: a broken daemon fails, not hangs).
func pollStatus(t *testing.T, cs *mcp.ClientSession, id string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, _ := callTool(t, cs, "check_action_status", map[string]any{"approval_id": id})
		if s := m["status"]; s != "pending_approval" && s != "running" {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %v after 60s", id, m["status"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *toolsEnv) checkToolList(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tool := range list.Tools {
		got[tool.Name] = tool
	}
	for _, name := range []string{"get_issue", "comment_create", "send_email", "check_action_status"} {
		if got[name] == nil {
			t.Fatalf("tools/list lacks %s: %v", name, jsonString(list.Tools))
		}
	}
	schema := jsonString(got["send_email"].InputSchema)
	if !strings.Contains(schema, `"Message body"`) || !strings.Contains(schema, `"x-multiline":true`) ||
		!strings.Contains(got["send_email"].Description, "approval") {
		t.Errorf("send_email: schema %s description %q: want the labelled multiline body and the approval note", schema, got["send_email"].Description)
	}
}

// commentFlow: a read action completes; an action whose step needs the
// connector's approval pends, is approved on the admin side, and completes
// with exactly one comment sent.
func (e *toolsEnv) commentFlow(t *testing.T, cs *mcp.ClientSession, issue string) {
	m, isErr := callTool(t, cs, "get_issue", map[string]any{"id": issue})
	if isErr || m["status"] != "completed" || !strings.Contains(jsonString(m["output"]), "ISS-"+issue) {
		t.Fatalf("get_issue: %v", m)
	}
	path := "/issues/ISS-" + issue + "/comments"
	before := theSuite.up.Hits("api.linear.app", path)
	m, isErr = callTool(t, cs, "comment_create", map[string]any{"issueId": issue, "body": "Looks good\nto me"})
	id, _ := m["approval_id"].(string)
	if isErr || m["status"] != "pending_approval" || id == "" {
		t.Fatalf("comment_create: %v (want pending_approval with an approval id)", m)
	}
	if theSuite.up.Hits("api.linear.app", path) != before {
		t.Fatal("the comment was sent before approval")
	}
	e.d.cli(t, "approvals", "approve", id)
	if m = pollStatus(t, cs, id); m["status"] != "completed" {
		t.Fatalf("after approval: %v", m)
	}
	if got := theSuite.up.Hits("api.linear.app", path) - before; got != 1 {
		t.Fatalf("comments sent: %d, want exactly 1", got)
	}
}

func (e *toolsEnv) mcpStdio(t *testing.T) {
	cmd := exec.Command(theSuite.bin, "launch", "--session", e.s.ID, "--", theSuite.bin, "mcp")
	cmd.Env = cleanEnv(e.d.home)
	cs := mcpSession(t, &mcp.CommandTransport{Command: cmd})
	e.checkToolList(t, cs)
	e.commentFlow(t, cs, "STDIO")
}

func (e *toolsEnv) mcpHTTP(t *testing.T) {
	cs := mcpSession(t, &mcp.StreamableClientTransport{Endpoint: "https://aileron.internal/v1/mcp", HTTPClient: goClient(t, e.s)})
	e.checkToolList(t, cs)
	e.commentFlow(t, cs, "HTTP")

	const sendPath = "/gmail/v1/users/me/messages/send"
	before := theSuite.up.Hits("gmail.googleapis.com", sendPath)
	args := map[string]any{"to": "alice@example.com", "subject": "Launch", "body": "Line one\nLine two", "cc": []any{"bob@example.com"}}
	m, _ := callTool(t, cs, "send_email", args)
	id, _ := m["approval_id"].(string)
	if m["status"] != "pending_approval" || id == "" || !strings.Contains(jsonString(m), "review") {
		t.Fatalf("send_email: %v", m)
	}
	show := e.d.cli(t, "approvals", "show", id)
	if !strings.Contains(show, `Send \"Launch\" to alice@example.com`) && !strings.Contains(show, `Send "Launch" to alice@example.com`) {
		t.Errorf("approvals show %s lacks the action's preview:\n%s", id, show)
	}
	e.d.cli(t, "approvals", "approve", id)
	if m = pollStatus(t, cs, id); m["status"] != "completed" {
		t.Fatalf("send_email after approval: %v", m)
	}
	if got := theSuite.up.Hits("gmail.googleapis.com", sendPath) - before; got != 1 {
		t.Fatalf("emails sent: %d, want 1", got)
	}
	args["subject"] = "Do not send"
	m, _ = callTool(t, cs, "send_email", args)
	id, _ = m["approval_id"].(string)
	e.d.cli(t, "approvals", "deny", id, "--reason", "not today")
	if m = pollStatus(t, cs, id); m["status"] != "denied" {
		t.Fatalf("send_email after deny: %v", m)
	}
	if got := theSuite.up.Hits("gmail.googleapis.com", sendPath) - before; got != 1 {
		t.Fatalf("a denied e-mail was sent (%d sends)", got)
	}
}

func (e *toolsEnv) shims(t *testing.T) {
	dir := t.TempDir()
	e.d.cli(t, "session", "render", e.s.ID, "--out", dir)
	txt, err := os.ReadFile(filepath.Join(dir, "tools.txt"))
	if err != nil || !strings.Contains(string(txt), "linear "+toolsLinearFQN+" -- Aileron connector operations: get-issue, comment-create") {
		t.Fatalf("tools.txt: %v\n%s", err, txt)
	}
	bin := filepath.Join(dir, "bin")
	out, _, code := e.launch(t, "sh", filepath.Join(bin, "linear"), "--help")
	if code != 0 || !strings.Contains(out, "get-issue") || !strings.Contains(out, "Get one issue") || !strings.Contains(out, "Comment on an issue") {
		t.Fatalf("linear --help (exit %d):\n%s", code, out)
	}
	out, errOut, code := e.launch(t, "sh", filepath.Join(bin, "linear"), "get-issue", "--args", `{"id":"SHIM"}`)
	if code != 0 || !strings.Contains(out, `"ISS-SHIM"`) {
		t.Fatalf("linear get-issue (exit %d): %s %s", code, out, errOut)
	}
	out, _, code = e.launch(t, "sh", filepath.Join(bin, "linear"), "get-issue", "--args", `{"id":"SHIM"}`, "--json")
	var full map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &full) != nil || full["upstream_status"] != 200.0 {
		t.Fatalf("linear get-issue --json (exit %d): %s", code, out)
	}
	_, errOut, code = e.launch(t, "sh", filepath.Join(bin, "linear"), "comment-create", "--args", `{"id":"SHIM","body":"held"}`)
	if code != 3 || !strings.Contains(errOut, "approval id ap_") {
		t.Fatalf("linear comment-create (an operation held for approval): exit %d, stderr %s (want 3 and the approval id)", code, errOut)
	}
	_, errOut, code = e.launch(t, "sh", filepath.Join(bin, "send-email"), "--args", `{"to":"a@example.com","subject":"s","body":"b"}`)
	if code != 3 || !strings.Contains(errOut, "ap_") {
		t.Fatalf("send-email shim: exit %d, stderr %s (want 3 and the approval id)", code, errOut)
	}
	_, errOut2, err := e.d.run(t.Context(), "session", "render", e.s.ID, "--out", t.TempDir(), "--agent", "linear")
	if err == nil || !strings.Contains(errOut2, "linear") || !strings.Contains(errOut2, "conflict") {
		t.Fatalf("render with the agent named like a tool: err %v, stderr %s", err, errOut2)
	}
}

func (e *toolsEnv) launchClients(t *testing.T) {
	out, errOut, code := e.launch(t, "curl", "-sS", "https://api.linear.app/issues/CURL")
	if code != 0 || !strings.Contains(out, `"ISS-CURL"`) {
		t.Fatalf("launch curl: exit %d %s %s", code, out, errOut)
	}
	requireTool(t, "/usr/bin/python3")
	out, errOut, code = e.launch(t, "python3", "-c",
		"import urllib.request; print(urllib.request.urlopen('https://api.linear.app/issues/PY').read().decode())")
	if code != 0 || !strings.Contains(out, `"ISS-PY"`) {
		t.Fatalf("launch python3: exit %d %s %s", code, out, errOut)
	}
	_, _, code = e.launch(t, "sh", "-c", "exit 7")
	if code != 7 {
		t.Fatalf("launch did not pass the exit status on: %d", code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, errOut, err := e.d.run(ctx, "launch", "--new", "--", "curl", "-sS", "https://api.linear.app/issues/NEW")
	if err != nil || !strings.Contains(out, `"ISS-NEW"`) {
		t.Fatalf("launch --new curl: %v %s %s", err, out, errOut)
	}
}

// sandboxCannotDecide: through the proxy, with the session's credentials,
// nothing approves, lists or installs.
func (e *toolsEnv) sandboxCannotDecide(t *testing.T) {
	m, _ := func() (map[string]any, bool) {
		c := goClient(t, e.s)
		st, _, b := goDo(t, c, "POST", "https://aileron.internal/v1/actions/send-email/run",
			`{"to":"x@example.com","subject":"held","body":"b"}`)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if st != 202 {
			t.Fatalf("run send-email: %d %s", st, b)
		}
		return m, true
	}()
	id, _ := m["approval_id"].(string)
	c := goClient(t, e.s)
	for _, try := range []struct{ method, url string }{
		{"POST", "https://aileron.internal/v1/approvals/" + id + "/approve"},
		{"POST", "https://aileron.internal/v1/action-approvals/" + id + "/approve"},
		{"GET", "https://aileron.internal/v1/approvals"},
		{"POST", "https://aileron.internal/v1/connectors"},
		{"GET", "https://aileron.internal/v1/credentials"},
		{"POST", "https://aileron.internal/v1/bindings"},
	} {
		st, _, b := goDo(t, c, try.method, try.url, `{}`)
		if st != 404 && st != 405 {
			t.Errorf("%s %s from the sandbox: %d %s", try.method, try.url, st, b)
		}
	}
	show := e.d.cli(t, "approvals", "show", id, "--json")
	if !strings.Contains(show, `"state": "pending"`) {
		t.Fatalf("approval %s changed state after the sandbox's attempts:\n%s", id, show)
	}
}
