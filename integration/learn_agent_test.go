package integration

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLearnPythonClient: a Python client (urllib through HTTPS_PROXY with
// the session CA, as `aileron launch --unknown learn` sets them) in learn
// mode is refused each unknown request with a proposal id, nothing reaches
// the upstream, and it asks for access through the sandbox API; after it
// ends, the proposals of its session hold its traffic generalised and the
// justification it gave.
func TestLearnPythonClient(t *testing.T) {
	requireTool(t, "/usr/bin/python3")
	e := argsEnv(t)
	before := theSuite.up.Hits("api.us.example.com", "/v2/orders/555")
	const script = `
import json, os, urllib.request, urllib.error
print("session", os.environ["AILERON_SESSION_ID"])
for u in ["https://api.us.example.com/v2/orders/555?card=hunter2", "https://api.us.example.com/v2/orders/556",
          "https://unknown.example.com/v3/reports"]:
    try:
        urllib.request.urlopen(u)
        print("allowed", u)
    except urllib.error.HTTPError as e:
        body = json.loads(e.read())
        print("refused", e.code, e.headers.get("X-Aileron-Proposal-Id"), body["error"]["proposal_id"])
req = urllib.request.Request(os.environ["AILERON_API_URL"] + "/access-requests", method="POST",
    data=json.dumps({"method": "POST", "url": "https://api.us.example.com/v2/orders",
                     "justification": "to place the order the user asked for"}).encode(),
    headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req) as r:
    print("asked", r.status, json.loads(r.read())["state"])
`
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	out, errOut, err := e.d.run(ctx, "launch", "--name", "py-learner", "--unknown", "learn", "--", "python3", "-c", script)
	if err != nil {
		t.Fatalf("launch --unknown learn python3: %v\n%s%s", err, out, errOut)
	}
	sess := regexp.MustCompile(`session (s_\w+)`).FindStringSubmatch(out)
	refused := regexp.MustCompile(`refused 403 (pr_\w+) (pr_\w+)`).FindAllStringSubmatch(out, -1)
	if sess == nil || len(refused) != 3 || !strings.Contains(out, "asked 202 open") || strings.Contains(out, "allowed") {
		t.Fatalf("the Python client's run:\n%s%s", out, errOut)
	}
	for _, r := range refused {
		if r[1] != r[2] {
			t.Errorf("X-Aileron-Proposal-Id %s and the envelope's %s differ", r[1], r[2])
		}
	}
	if theSuite.up.Hits("api.us.example.com", "/v2/orders/555") != before {
		t.Error("a learned request reached the upstream")
	}
	list, err := proposalsOf(t.Context(), e.d, sess[1])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]cliProposal{}
	for _, p := range list {
		got[p.Method+" "+p.Host+" "+p.Template] = p
	}
	if p := got["GET api.us.example.com /v2/orders/{id}"]; p.Count != 2 || p.ID != refused[0][1] || p.ID != refused[1][1] {
		t.Errorf("the two orders' proposal: %+v (refusals named %v)", p, refused)
	}
	if p := got["GET unknown.example.com /v3/reports"]; p.Count != 1 || p.ID != refused[2][1] {
		t.Errorf("the unknown host's proposal: %+v", p)
	}
	if p := got["POST api.us.example.com /v2/orders"]; p.Count != 0 || p.Justification != "to place the order the user asked for" {
		t.Errorf("the asked-for proposal: %+v", p)
	}
	if len(list) != 3 || strings.Contains(e.d.cli(t, "proposals", "list", "--json"), "hunter2") {
		t.Errorf("proposals of the Python run: %+v", list)
	}
}

// TestLearnAgentCLI runs the real Claude Code, Codex and Gemini CLI, each
// launched in a session in learn mode, in a namespace with nothing but
// loopback (the stand-in provider plays their model): each asks for access
// with request_access, the human rejects it with a reason through the CLI,
// and the agent's model receives that reason. Claude Code started bare in
// learn mode has its own unknown requests (its bootstrap and telemetry)
// refused and learned into proposals: none reaches the stand-in.
func TestLearnAgentCLI(t *testing.T) {
	e := startAgentEnv(t)
	for _, tc := range []struct {
		agent string
		args  []string
	}{
		{"claude", []string{"-p"}},
		{"codex", []string{"exec", "--skip-git-repo-check", "-m", "gpt-test"}},
		{"gemini", []string{"--skip-trust", "-m", "gemini-test", "-p"}},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			s := e.d.newSession(t, "--name", tc.agent+"-learner", "--unknown", "learn")
			why := "to read issue 7, which the user asked about (" + tc.agent + ")"
			e.st.Queue(
				turn{Tool: "request_access", Input: map[string]any{"method": "GET", "url": "https://issues.example.com/acme/app/issues/7",
					"justification": why}},
				turn{Text: "AGENT DONE: access was refused.", When: afterToolResult},
			)
			n := len(e.st.Requests())
			rejected := make(chan error, 1)
			go func() { rejected <- rejectWhenAsked(e.d, s.ID, why, "issues are out of scope for "+tc.agent) }()
			args := append([]string{"launch", tc.agent, "--session", s.ID, "--"}, tc.args...)
			out, errOut, code := e.launch(t, append(args, "Read issue 7 of acme/app.")...)
			if err := <-rejected; err != nil {
				t.Fatal(err)
			}
			if code != 0 || !strings.Contains(out, "AGENT DONE") {
				t.Fatalf("aileron launch %s: exit %d\nstdout:\n%s\nstderr:\n%s", tc.agent, code, out, errOut)
			}
			var results []string
			for _, r := range e.st.Requests()[n:] {
				results = append(results, r.ToolResults...)
			}
			// Claude Code passes on the text (with its lead, "Their
			// reason: …"), Codex the structured answer: both carry it.
			if all := strings.Join(results, "\n"); !strings.Contains(all, "issues are out of scope for "+tc.agent) {
				t.Errorf("the model never received the human's reason; tool results:\n%s", all)
			}
		})
	}

	bare := e.d.newSession(t, "--name", "claude-bare", "--unknown", "learn")
	n := len(e.st.Requests())
	if out, errOut, code := e.launch(t, "launch", "--session", bare.ID, "--", "env", "-u", "ANTHROPIC_BASE_URL", "-u", "ANTHROPIC_AUTH_TOKEN",
		"claude", "-p", "hi"); code != 0 {
		t.Fatalf("aileron launch -- claude in learn mode: exit %d\n%s%s", code, out, errOut)
	}
	list, err := proposalsOf(t.Context(), e.d, bare.ID)
	if err != nil {
		t.Fatal(err)
	}
	var learned []string
	for _, p := range list {
		learned = append(learned, p.Method+" "+p.Host+p.Template)
	}
	t.Logf("learned from the bare agent: %q", learned)
	for _, want := range []string{"/api/claude_cli/bootstrap", "/api/eval/"} {
		if !slices.ContainsFunc(learned, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no proposal for the bare agent's %s; learned: %q", want, learned)
		}
	}
	for _, r := range e.st.Requests()[n:] {
		if strings.Contains(r.Path, "/api/eval/") || strings.Contains(r.Path, "/api/claude_cli/") || strings.Contains(r.Path, "/api/event_logging/") {
			t.Errorf("a learned request reached the stand-in: %s %s%s", r.Method, r.Host, r.Path)
		}
	}
}

// rejectWhenAsked waits until session has a proposal asked for with
// justification, checks that `proposals show` prints it, and rejects it
// with reason through the admin CLI.
func rejectWhenAsked(d *daemon, session, justification, reason string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		list, err := proposalsOf(ctx, d, session)
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.Justification != justification {
				continue
			}
			show, errOut, err := d.run(ctx, "proposals", "show", p.ID)
			if err != nil || !strings.Contains(show, "asked      "+justification) {
				return errors.New("proposals show " + p.ID + ": " + show + errOut)
			}
			if _, errOut, err := d.run(ctx, "proposals", "reject", p.ID, "--reason", reason); err != nil {
				return errors.New("proposals reject: " + err.Error() + ": " + errOut)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the agent never asked for access: " + ctx.Err().Error())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
