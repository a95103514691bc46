package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const argsFQN = "github://acme/aileron-connector-mailer"

// argsSpec is a mailer whose owner says "mail only to @example.com" and
// "max_tokens at most 4096", with an internal operation that only its
// action may use.
const argsSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "` + argsFQN + `", "version": "1.0.0"},
  "tools": [{"name": "mailer", "description": "Mailer (test connector)", "operations": [
    {"name": "send", "summary": "Send a message", "method": "POST", "path": "/v1/mail", "hosts": ["api.us.example.com"],
     "inputs": [{"name": "to", "required": true, "pattern": "^[^@]+@example\\.com$"}, {"name": "subject", "maxLength": 100}]},
    {"name": "complete", "summary": "Complete a prompt", "method": "POST", "path": "/v1/complete", "hosts": ["api.us.example.com"],
     "inputs": [{"name": "model", "enum": ["small", "large"]}, {"name": "max_tokens", "type": "integer", "maximum": 4096}]},
    {"name": "raw-send", "summary": "Send without checks", "method": "POST", "path": "/v1/raw", "hosts": ["api.us.example.com"],
     "visibility": "internal", "inputs": [{"name": "to"}]}
  ]}]
}`

// relayAction reaches the internal raw-send as its one step.
const relayAction = `+++
name = "relay"
version = "1.0.0"

[[requires.connectors]]
name = "` + argsFQN + `"
version = "1.0.0"
hash = "self"
capabilities = ["network:api.us.example.com:443"]

[[execute]]
id = "raw"
connector = "` + argsFQN + `"
op = "raw-send"

[execute.inputs]
to = "${args.to}"

[[inputs]]
name = "to"
type = "String"
label = "To"
description = "Recipient."
+++
Relays one message through the internal raw-send.
`

// argsEnv is a daemon with the mailer installed and one session.
func argsEnv(t *testing.T) *toolsEnv {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["api.us.example.com:443"] = theSuite.up.Addr
	d := theSuite.startTestDaemon(t, cfg, nil)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "actions", "relay"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"aileron.connector.v1.json": argsSpec, "actions/relay/action.md": relayAction} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.cli(t, "connector", "install", dir)
	return &toolsEnv{d: d, s: d.newSession(t, "--name", "args")}
}

// TestArgumentsOnTheWire: with the real daemon, curl and Python through
// the proxy, requests whose arguments do not fit the schema are refused 400
// invalid_arguments naming the field and the rule, and never reach the
// upstream; those that fit go through.
func TestArgumentsOnTheWire(t *testing.T) {
	e := argsEnv(t)
	curl := func(path, body string) (status string, out string) {
		t.Helper()
		out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
			"--data-binary", body, "https://api.us.example.com"+path)
		if code != 0 {
			t.Fatalf("curl exit %d: %s", code, errOut)
		}
		i := strings.LastIndexByte(out, '\n')
		return out[i+1:], out[:i]
	}
	for _, c := range []struct {
		path, body, status, field, rule, value string
	}{
		{"/v1/mail", `{"to": "ann@example.com", "subject": "hi"}`, "200", "", "", ""},
		{"/v1/mail", `{"to": "boss@rival.example"}`, "400", "body.to", "pattern", "rival"},
		{"/v1/mail", `{"subject": "no recipient"}`, "400", "body.to", "required", ""},
		{"/v1/complete", `{"model": "large", "max_tokens": 4096}`, "200", "", "", ""},
		{"/v1/complete", `{"model": "large", "max_tokens": 4097}`, "400", "body.max_tokens", "maximum", "4097"},
		{"/v1/complete", `{"model": "enormous"}`, "400", "body.model", "enum", "enormous"},
	} {
		before := theSuite.up.Hits("api.us.example.com", c.path)
		status, out := curl(c.path, c.body)
		if status != c.status {
			t.Fatalf("curl %s %s: %s %s, want %s", c.path, c.body, status, out, c.status)
		}
		hits := theSuite.up.Hits("api.us.example.com", c.path) - before
		if c.status == "200" {
			if hits != 1 {
				t.Fatalf("curl %s %s: %d upstream hits, want 1", c.path, c.body, hits)
			}
			continue
		}
		var env struct {
			Error struct{ Class, Reason, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil || env.Error.Reason != "invalid_arguments" ||
			!strings.Contains(env.Error.Message, c.field) || !strings.HasSuffix(env.Error.Message, "("+c.rule+")") ||
			c.value != "" && strings.Contains(env.Error.Message, c.value) {
			t.Errorf("curl %s %s: %s, want invalid_arguments naming %s (%s) and not %q", c.path, c.body, out, c.field, c.rule, c.value)
		}
		if hits != 0 {
			t.Errorf("curl %s %s: a misfit reached the upstream", c.path, c.body)
		}
	}
	// curl -d without a Content-Type labels JSON as a form: refused for that,
	// not for a field the form appears to lack.
	before := theSuite.up.Hits("api.us.example.com", "/v1/mail")
	out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-d", `{"to": "ann@example.com"}`, "https://api.us.example.com/v1/mail")
	if code != 0 || !strings.HasSuffix(out, "\n400") || !strings.Contains(out, `"reason":"invalid_arguments"`) ||
		!strings.Contains(out, "Content-Type: application/json (content_type)") {
		t.Fatalf("curl -d JSON: exit %d %s %s; want 400 invalid_arguments saying to send application/json", code, out, errOut)
	}
	out, errOut, code = e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary",
		`{"connector_fqn":"`+argsFQN+`","tool":"mailer","operation":"send","args":{"to":"boss@rival.example"}}`,
		"https://aileron.internal/v1/connector-operations/run")
	if code != 0 || !strings.HasSuffix(out, "\n400") || !strings.Contains(out, `"reason":"invalid_arguments"`) || strings.Contains(out, "rival") {
		t.Fatalf("run endpoint with a misfit argument: exit %d %s %s; want 400 invalid_arguments", code, out, errOut)
	}
	if theSuite.up.Hits("api.us.example.com", "/v1/mail") != before {
		t.Fatal("the run endpoint's misfit call reached the upstream")
	}
	// The refusals are on the trail with the field and the rule, no value.
	waitAudit(t, e.d, "the misfit's audit line", func(ls []auditLine) bool {
		for _, l := range ls {
			if l.str("reason") == "invalid_arguments" && l.str("path") == "/v1/complete" &&
				l.detail("field") == "body.max_tokens" && l.detail("rule") == "maximum" && !strings.Contains(string(l.Raw), "4097") {
				return true
			}
		}
		return false
	})
	requireTool(t, "/usr/bin/python3")
	before = theSuite.up.Hits("api.us.example.com", "/v1/complete")
	out, errOut, code = e.launch(t, "python3", "-c", `
import json, urllib.request, urllib.error
def post(body):
    req = urllib.request.Request("https://api.us.example.com/v1/complete", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req).status, ""
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)["error"]["reason"]
print(post({"max_tokens": 100}), post({"max_tokens": 100000}))
`)
	if code != 0 || strings.TrimSpace(out) != "(200, '') (400, 'invalid_arguments')" {
		t.Fatalf("python3: exit %d, %q %s", code, out, errOut)
	}
	if got := theSuite.up.Hits("api.us.example.com", "/v1/complete") - before; got != 1 {
		t.Fatalf("python3: %d upstream hits, want 1 (the request that fits)", got)
	}
}

// TestInternalOperationOnlyThroughActions: the internal raw-send answers
// curl through the proxy, the run endpoint and the generated shim as an
// operation that does not exist, and is reached as the step of an action
// run through the sandbox API.
func TestInternalOperationOnlyThroughActions(t *testing.T) {
	e := argsEnv(t)
	hits := func() int { return theSuite.up.Hits("api.us.example.com", "/v1/raw") }
	out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json",
		"--data-binary", `{"to":"x@example.com"}`, "https://api.us.example.com/v1/raw")
	if code != 0 || !strings.HasSuffix(out, "\n403") || !strings.Contains(out, "no_matching_operation") || strings.Contains(out, "raw-send") ||
		strings.Contains(out, "/v1/raw,") || strings.Contains(out, "POST /v1/raw\"") {
		t.Fatalf("curl to the internal operation: exit %d %s %s", code, out, errOut)
	}
	run := func(op string) (string, string) {
		out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", "-H", "Content-Type: application/json", "--data-binary",
			`{"connector_fqn":"`+argsFQN+`","tool":"mailer","operation":"`+op+`","args":{"to":"x@example.com"}}`,
			"https://aileron.internal/v1/connector-operations/run")
		if code != 0 {
			t.Fatalf("curl run %s: exit %d %s", op, code, errOut)
		}
		i := strings.LastIndexByte(out, '\n')
		return out[i+1:], out[:i]
	}
	status, internal := run("raw-send")
	ustatus, unknown := run("no-such-op")
	if status != "404" || ustatus != "404" || strings.Replace(internal, "raw-send", "no-such-op", 1) != unknown || strings.Contains(unknown, "raw-send") {
		t.Fatalf("run endpoint: internal %s %s; unknown %s %s; want the same 404, listing no internal operation", status, internal, ustatus, unknown)
	}
	dir := t.TempDir()
	e.d.cli(t, "session", "render", e.s.ID, "--out", dir)
	_, errOut, code = e.launch(t, "sh", filepath.Join(dir, "bin", "mailer"), "raw-send", "--args", `{"to":"x@example.com"}`)
	if code == 0 || strings.Contains(errOut, "POST /v1/raw") {
		t.Fatalf("shim mailer raw-send: exit %d, stderr %s; want a failure that names no internal operation", code, errOut)
	}
	if hits() != 0 {
		t.Fatalf("the internal operation was reached from the sandbox (%d hits)", hits())
	}
	st, _, b := goDo(t, goClient(t, e.s), "POST", "https://aileron.internal/v1/actions/relay/run", `{"to":"ann@example.com"}`)
	var res map[string]any
	if err := json.Unmarshal(b, &res); err != nil || st != 200 || res["status"] != "completed" {
		t.Fatalf("run relay: %d %s", st, b)
	}
	if hits() != 1 {
		t.Fatalf("the action's step did not reach the internal operation (%d hits)", hits())
	}
}
