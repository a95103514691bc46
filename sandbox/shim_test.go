package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/policy"
)

// seen is one request the fake daemon received.
type seen struct {
	Method, Path, Query, ContentType string
	Body                             []byte
}

// fakeDaemon is a sandbox API stand-in: it records requests and answers
// with respond.
type fakeDaemon struct {
	mu      sync.Mutex
	reqs    []seen
	respond http.HandlerFunc
}

func (d *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.reqs = append(d.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), body})
	respond := d.respond
	d.mu.Unlock()
	respond(w, r)
}

// setRespond replaces the daemon's answer.
func (d *fakeDaemon) setRespond(h http.HandlerFunc) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.respond = h
}

func (d *fakeDaemon) requests() []seen {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]seen(nil), d.reqs...)
}

// answer returns a handler writing status, headers and body.
func answer(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// shimEnv is a rendered tools directory plus a fake daemon.
type shimEnv struct {
	t      *testing.T
	bin    string
	cwd    string // working directory of every run; must stay empty
	tmp    string // TMPDIR of every run; must be empty after each
	apiURL string
	daemon *fakeDaemon
}

func newShimEnv(t *testing.T, in RenderInput) *shimEnv {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required (run make test-deps)")
	}
	r, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	d := &fakeDaemon{respond: answer(500, "no answer set")}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	e := &shimEnv{t: t, bin: filepath.Join(dir, BinDir), cwd: t.TempDir(), tmp: t.TempDir(), apiURL: srv.URL + "/v1/", daemon: d}
	t.Cleanup(e.assertNothingLeft)
	return e
}

// run runs a shim (directly: its #! line and mode count) and returns its
// stdout, stderr and exit status.
func (e *shimEnv) run(name string, args ...string) (stdout, stderr string, code int) {
	e.t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, name), args...)
	cmd.Dir = e.cwd
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.cwd, "TMPDIR=" + e.tmp, "AILERON_API_URL=" + e.apiURL}
	var o, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &se
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		e.t.Fatalf("running %s: %v", name, err)
	}
	if entries, _ := os.ReadDir(e.tmp); len(entries) != 0 {
		e.t.Errorf("%s %q left %d temporary files", name, args, len(entries))
	}
	return o.String(), se.String(), code
}

// assertNothingLeft fails when a run created a file in the working
// directory: an injected command did run.
func (e *shimEnv) assertNothingLeft() {
	if entries, _ := os.ReadDir(e.cwd); len(entries) != 0 {
		e.t.Errorf("a shim run created %s in its working directory: injected code ran", entries[0].Name())
	}
}

// opPayload is what the connector-operation shim posts.
type opPayload struct {
	Args         json.RawMessage `json:"args"`
	ConnectorFQN string          `json:"connector_fqn"`
	Tool         string          `json:"tool"`
	Operation    string          `json:"operation"`
}

func TestSpecShimHelp(t *testing.T) {
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{googleSpec()}})
	all := []string{
		"google: Google APIs", "Connector " + googleFQN + " 1.2.3",
		"gmail.messages.search: Search Gmail messages", "Request:  GET https://gmail.googleapis.com/gmail/v1/users/me/messages",
		"q (string, optional): Gmail search query", "Approval: not required",
		"gmail.messages.send: Send a message", "Request:  POST https://gmail.googleapis.com/gmail/v1/users/me/messages/send",
		"Approval: required", "raw (string, required): RFC 2822 message, base64url", "threadId (string, optional): Thread to reply in",
		"  Sends the message as the user.\n  It cannot be unsent.", "sent as a JSON body", "sent as query parameters",
		"Exit status: 0 success",
		`Run:      google gmail.messages.search --args '{"q":"…"}' [--json]`,
		`Run:      google gmail.messages.send --args '{"raw":"…"}' [--json]`,
	}
	for _, args := range [][]string{{"--help"}, {}, {"-h"}} {
		out, errOut, code := e.run("google", args...)
		if code != 0 || errOut != "" {
			t.Errorf("google %q: exit %d, stderr %q", args, code, errOut)
		}
		for _, w := range all {
			if !strings.Contains(out, w) {
				t.Errorf("google %q output lacks %q:\n%s", args, w, out)
			}
		}
	}
	out, _, code := e.run("google", "gmail.messages.send", "--help")
	if code != 0 || !strings.Contains(out, "gmail.messages.send: Send a message") || !strings.Contains(out, "raw (string, required)") {
		t.Errorf("op --help: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "gmail.messages.search") || strings.Contains(out, "Usage:") {
		t.Errorf("op --help shows more than the operation:\n%s", out)
	}
	if n := len(e.daemon.requests()); n != 0 {
		t.Errorf("help sent %d requests", n)
	}
}

func TestSpecShimRun(t *testing.T) {
	const upstream = "{\"messages\":[]}\n\n" // trailing newlines must survive
	const envelope = `{"status":"ok","upstream_status":200,"body":"{\"messages\":[]}"}`
	tests := []struct {
		name       string
		args       []string
		respond    http.HandlerFunc
		wantArgs   string // args as posted ("" = no request expected)
		wantQuery  string
		wantOut    string
		wantErr    string // substring of stderr ("" = stderr empty)
		wantStatus int
	}{
		{"body output", []string{"gmail.messages.search", "--args", `{"q":"from:bob"}`},
			answer(200, upstream, "X-Aileron-Upstream-Status", "200"), `{"q":"from:bob"}`, "output=body", upstream, "", 0},
		{"args default to {}", []string{"gmail.messages.search"},
			answer(200, upstream, "X-Aileron-Upstream-Status", "200"), `{}`, "output=body", upstream, "", 0},
		{"--args=", []string{"gmail.messages.search", `--args={"q":"x"}`},
			answer(200, "ok", "X-Aileron-Upstream-Status", "204"), `{"q":"x"}`, "output=body", "ok", "", 0},
		{"--json output", []string{"gmail.messages.search", "--json", "--args", `{"q":"x"}`},
			answer(200, envelope, "X-Aileron-Upstream-Status", "200"), `{"q":"x"}`, "", envelope, "", 0},
		{"upstream error", []string{"gmail.messages.search", "--args", `{}`},
			answer(200, "not found\n", "x-aileron-upstream-status", "404"), `{}`, "output=body", "not found\n", "the upstream answered HTTP 404", 1},
		{"upstream error --json", []string{"gmail.messages.search", "--json"},
			answer(200, envelope, "X-Aileron-Upstream-Status", "500"), `{}`, "", envelope, "", 1},
		{"refusal", []string{"gmail.messages.send", "--args", `{"raw":"x"}`},
			answer(403, `{"error":{"class":"policy","reason":"denied","message":"denied by policy"}}`, "X-Aileron-Message", "denied by policy: rule 3"),
			`{"raw":"x"}`, "output=body", "", "google: denied by policy: rule 3\n", 1},
		{"refusal without message header", []string{"gmail.messages.send"},
			answer(400, `{"error":{"message":"bad"}}`), `{}`, "output=body", "", "Aileron answered HTTP 400:\n{\"error\":{\"message\":\"bad\"}}", 1},
		{"refusal --json", []string{"gmail.messages.send", "--json"},
			answer(403, `{"error":{"message":"no"}}`, "X-Aileron-Message", "no"), `{}`, "", `{"error":{"message":"no"}}`, "", 1},
		{"pending approval", []string{"gmail.messages.send", "--args", `{"raw":"x"}`},
			answer(202, `{"status":"pending_approval"}`, "X-Aileron-Approval-Id", "ap_123", "X-Aileron-Message", "waiting for approval"),
			`{"raw":"x"}`, "output=body", "", "google: waiting for approval\ngoogle: approval id ap_123\n", 3},
		{"operation held for approval", []string{"gmail.messages.send", "--args", `{"raw":"x"}`},
			answer(403, `{"status":"refused","error":{"class":"capability_denied","reason":"approval_pending","message":"waits (ap_9)","approval_id":"ap_9"}}`,
				"X-Aileron-Approval-Id", "ap_9", "X-Aileron-Message", "POST /send waits for a human's approval (ap_9)"),
			`{"raw":"x"}`, "output=body", "", "google: POST /send waits for a human's approval (ap_9)\ngoogle: approval id ap_9", 3},
		{"operation held, --json", []string{"gmail.messages.send", "--json"},
			answer(403, `{"status":"refused","error":{"reason":"approval_pending","approval_id":"ap_9"}}`, "X-Aileron-Approval-Id", "ap_9"),
			`{}`, "", `{"status":"refused","error":{"reason":"approval_pending","approval_id":"ap_9"}}`, "", 3},
		{"approval denied is a refusal", []string{"gmail.messages.send"},
			answer(403, `{"status":"refused","error":{"reason":"approval_denied","approval_id":"ap_9","message":"no"}}`, "X-Aileron-Message", "a human denied this request"),
			`{}`, "output=body", "", "google: a human denied this request\n", 1},
		{"unknown operation", []string{"gmail.nope", "--args", `{}`}, nil, "", "", "",
			"google: unknown operation \"gmail.nope\"; the operations are:\n  gmail.messages.search\n  gmail.messages.send\n", 2},
		{"args not an object", []string{"gmail.messages.search", "--args", `["x"]`}, nil, "", "", "", "--args must be a JSON object", 2},
		{"--args without value", []string{"gmail.messages.search", "--args"}, nil, "", "", "", "--args needs a JSON object", 2},
		{"unexpected argument", []string{"gmail.messages.search", "extra"}, nil, "", "", "", `unexpected argument "extra"`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{googleSpec()}})
			e.daemon.setRespond(tt.respond)
			out, errOut, code := e.run("google", tt.args...)
			if code != tt.wantStatus || out != tt.wantOut {
				t.Errorf("exit %d, stdout %q; want %d, %q (stderr %q)", code, out, tt.wantStatus, tt.wantOut, errOut)
			}
			if tt.wantErr == "" && errOut != "" || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q, want %q", errOut, tt.wantErr)
			}
			reqs := e.daemon.requests()
			if tt.wantArgs == "" {
				if len(reqs) != 0 {
					t.Errorf("sent %d requests, want none", len(reqs))
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("sent %d requests, want 1", len(reqs))
			}
			req := reqs[0]
			if req.Method != "POST" || req.Path != "/v1/connector-operations/run" || req.Query != tt.wantQuery || req.ContentType != "application/json" {
				t.Errorf("request %s %s?%s (%s)", req.Method, req.Path, req.Query, req.ContentType)
			}
			var p opPayload
			if err := json.Unmarshal(req.Body, &p); err != nil {
				t.Fatalf("payload %q: %v", req.Body, err)
			}
			wantOp := tt.args[0]
			if string(p.Args) != tt.wantArgs || p.ConnectorFQN != googleFQN || p.Tool != "google" || p.Operation != wantOp {
				t.Errorf("payload %s", req.Body)
			}
		})
	}
}

// TestSpecShimArgsByteExact: --args reaches the daemon byte for byte, and
// nothing in it, nor in the operation name, is run by the shell.
func TestSpecShimArgsByteExact(t *testing.T) {
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{googleSpec()}})
	e.daemon.setRespond(answer(200, "ok", "X-Aileron-Upstream-Status", "200"))
	args := "{\n  \"q\": \"it's \\\"quoted\\\" $(touch pwned1) `touch pwned2` ${HOME} \\\\ %s %n\",\n\t\"x\": '$(touch pwned3)'\n}\n\n"
	if _, errOut, code := e.run("google", "gmail.messages.search", "--args", args); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	reqs := e.daemon.requests()
	want := `{"args":` + args + `,"connector_fqn":"` + googleFQN + `","tool":"google","operation":"gmail.messages.search"}`
	if len(reqs) != 1 || string(reqs[0].Body) != want {
		t.Fatalf("body = %q\nwant   %q", reqs, want)
	}
	for _, op := range []string{"$(touch pwned4)", "`touch pwned5`", "'; touch pwned6; '", "*", "gmail.messages.*"} {
		if _, _, code := e.run("google", op); code != 2 {
			t.Errorf("operation %q: exit %d, want 2", op, code)
		}
	}
	if n := len(e.daemon.requests()); n != 1 {
		t.Errorf("unknown operations sent %d requests", n-1)
	}
}

// TestShimHostileSpec renders a spec whose texts try to break out of the
// shim's quoting and to drive the terminal: nothing runs, help shows the
// text without control characters, and the payload carries the FQN exactly.
func TestShimHostileSpec(t *testing.T) {
	evil := "'; touch pwned1; echo '\n$(touch pwned2)`touch pwned3`\x1b]0;title\x07\u202e\x00\r\nEOF\n"
	fqn := `github://acme/x'$(touch.pwned4)"` + "`"
	spec := &policy.Spec{
		Connector: policy.Connector{FQN: fqn, Version: evil},
		Tools: []policy.Tool{{Name: "evil", Description: evil, Operations: []policy.OperationSpec{{
			Name: "op", Summary: evil, Description: evil, Method: "GET" + evil, Path: "/x" + evil, Hosts: []string{evil},
			Inputs: []policy.Input{{Name: evil, Type: evil, Description: evil}},
		}}}},
	}
	act := testAction("evil-action", fqn)
	act.Description, act.Intent, act.Version = evil, evil, evil
	act.Inputs = []action.Input{{Name: evil, Type: evil, Label: evil, ItemsType: evil, Description: evil}}
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{spec}, Actions: []action.Installed{act}})
	for _, c := range [][]string{{"evil", "--help"}, {"evil", "op", "--help"}, {"evil-action", "--help"}} {
		out, errOut, code := e.run(c[0], c[1:]...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", c, code, errOut)
		}
		if strings.ContainsAny(out, "\x1b\x07\x00\r\u202e") {
			t.Errorf("%q prints control characters: %q", c, out)
		}
		if !strings.Contains(out, "'; touch pwned1; echo '") || !strings.Contains(out, "$(touch pwned2)`touch pwned3`") {
			t.Errorf("%q does not print the text literally:\n%s", c, out)
		}
	}
	e.daemon.setRespond(answer(200, "ok"))
	if _, errOut, code := e.run("evil", "op"); code != 0 {
		t.Fatalf("evil op: exit %d: %s", code, errOut)
	}
	var p opPayload
	if reqs := e.daemon.requests(); len(reqs) != 1 || json.Unmarshal(reqs[0].Body, &p) != nil || p.ConnectorFQN != fqn {
		t.Errorf("payload %q, want connector_fqn %q", reqs, fqn)
	}
}

func TestActionShim(t *testing.T) {
	e := newShimEnv(t, RenderInput{Actions: []action.Installed{issueCreate()}})
	for _, args := range [][]string{{"--help"}, {}} {
		out, _, code := e.run("issue-create", args...)
		for _, w := range []string{
			"issue-create: Creates a new issue.", "Action issue-create 0.0.0-dev of connector " + linearFQN, "Approval: required",
			"  # Create an issue\n\n  Creates a Linear issue in the team's backlog.",
			`title (String, required) "Title": The issue's title.`, `body (String, optional, multiline) "Body": Markdown description.`,
			"labels (array of String, optional): Label ids.", "--status ID",
		} {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("issue-create %q (exit %d) lacks %q:\n%s", args, code, w, out)
			}
		}
	}
	args := `{"title":"it's $(touch pwned)","body":"a` + "\n" + `b"}`
	tests := []struct {
		name             string
		args             []string
		respond          http.HandlerFunc
		wantPath, wantQ  string
		wantBody         string
		wantOut, wantErr string
		wantStatus       int
	}{
		{"completed", []string{"--args", args}, answer(200, `{"id":"LIN-1"}`, "X-Aileron-Upstream-Status", "200"),
			"/v1/actions/issue-create/run", "output=body", args, `{"id":"LIN-1"}`, "", 0},
		{"completed --json", []string{"--json", "--args", args}, answer(200, `{"status":"completed"}`),
			"/v1/actions/issue-create/run", "", args, `{"status":"completed"}`, "", 0},
		{"pending approval", []string{"--args", args},
			answer(202, `{"status":"pending_approval","approval_id":"ap_9"}`, "X-Aileron-Approval-Id", "ap_9", "X-Aileron-Message", "Approve at http://x/approvals/ap_9"),
			"/v1/actions/issue-create/run", "output=body", args, "",
			"issue-create: Approve at http://x/approvals/ap_9\nissue-create: approval id ap_9; run \"issue-create --status ID\" for the result once decided\n", 3},
		{"pending approval --json", []string{"--args", args, "--json"}, answer(202, `{"status":"pending_approval"}`),
			"/v1/actions/issue-create/run", "", args, `{"status":"pending_approval"}`, "", 3},
		{"failed", []string{"--args", "{}"}, answer(502, `{"error":{}}`, "X-Aileron-Message", "step issue failed: upstream 500"),
			"/v1/actions/issue-create/run", "output=body", `{}`, "", "issue-create: step issue failed: upstream 500\n", 1},
		{"status", []string{"--status", "ap_9"}, answer(200, `{"status":"completed"}`),
			"/v1/action-approvals/ap_9/result", "", "", `{"status":"completed"}`, "", 0},
		{"status pending", []string{"--status", "ap_9"}, answer(202, `{"status":"running"}`),
			"/v1/action-approvals/ap_9/result", "", "", `{"status":"running"}`, "", 3},
		{"status bad id", []string{"--status", "../../x"}, nil, "", "", "", "", `approval id "../../x" is not valid`, 2},
		{"status without id", []string{"--status"}, nil, "", "", "", "", "--status needs the approval id", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newShimEnv(t, RenderInput{Actions: []action.Installed{issueCreate()}})
			e.daemon.setRespond(tt.respond)
			out, errOut, code := e.run("issue-create", tt.args...)
			if code != tt.wantStatus || out != tt.wantOut || tt.wantErr == "" && errOut != "" || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, out, errOut, tt.wantStatus, tt.wantOut, tt.wantErr)
			}
			reqs := e.daemon.requests()
			if tt.wantPath == "" {
				if len(reqs) != 0 {
					t.Errorf("sent %d requests, want none", len(reqs))
				}
				return
			}
			if len(reqs) != 1 || reqs[0].Path != tt.wantPath || reqs[0].Query != tt.wantQ || string(reqs[0].Body) != tt.wantBody {
				t.Errorf("requests %+v; want %s?%s body %q", reqs, tt.wantPath, tt.wantQ, tt.wantBody)
			}
			if tt.wantBody == "" && len(reqs) == 1 && reqs[0].Method != "GET" {
				t.Errorf("status request is a %s, want GET", reqs[0].Method)
			}
		})
	}
}

// TestShimEnvironmentErrors: no AILERON_API_URL is a usage error; an
// unreachable Aileron is exit status 4.
func TestShimEnvironmentErrors(t *testing.T) {
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{googleSpec()}})
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		apiURL, wantErr string
		want            int
	}{
		{"", "AILERON_API_URL is not set", 2},
		{closed.URL + "/v1", "could not reach Aileron at " + closed.URL + "/v1/connector-operations/run?output=body", 4},
	} {
		e.apiURL = c.apiURL
		_, errOut, code := e.run("google", "gmail.messages.search")
		if code != c.want || !strings.Contains(errOut, c.wantErr) {
			t.Errorf("AILERON_API_URL=%q: exit %d, stderr %q; want %d, %q", c.apiURL, code, errOut, c.want, c.wantErr)
		}
	}
}

// TestShimHeaderParsing: the header reader takes the final response of a
// dump holding a proxy's CONNECT answer and an interim response, matches
// names in any case and strips CR and blanks.
func TestShimHeaderParsing(t *testing.T) {
	dump := "HTTP/1.1 200 Connection established\r\nX-Aileron-Message: from the proxy\r\n\r\n" +
		"HTTP/1.1 100 Continue\r\n\r\n" +
		"HTTP/2 403\r\nx-aileron-message:   denied: see  \"docs\"  \t\r\ncontent-type: application/json\r\n\r\n"
	file := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(file, []byte(dump), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "aileron_name=t\naileron_help_fn=true\naileron_pending_hint=\n" + shimRuntime +
		`aileron_header "$1" '[Xx]-[Aa][Ii][Ll][Ee][Rr][Oo][Nn]-[Mm][Ee][Ss][Ss][Aa][Gg][Ee]:*'; printf '|'` + "\n" +
		`aileron_header "$1" '[Xx]-[Aa][Ii][Ll][Ee][Rr][Oo][Nn]-[Uu][Pp][Ss][Tt][Rr][Ee][Aa][Mm]-[Ss][Tt][Aa][Tt][Uu][Ss]:*'`
	out, err := exec.Command("sh", "-c", script, "sh", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `denied: see  "docs"|`; got != want {
		t.Errorf("headers read as %q, want %q", got, want)
	}
}
