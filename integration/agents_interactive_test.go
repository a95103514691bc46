package integration

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// nsPane runs argv in a detached tmux session whose server starts in ns (a
// socket of its own in a new directory, so it is always a new server, never
// one outside ns) and returns functions to send keys (tmux key names or
// text) and to read the screen, and whether argv still runs.
func nsPane(t *testing.T, ns netns.NsHandle, env []string, argv ...string) (keys func(...string), screen func() string, alive func() bool) {
	t.Helper()
	requireTool(t, "tmux")
	sock := filepath.Join(t.TempDir(), "tmux.sock")
	tmux := func(args ...string) *exec.Cmd {
		cmd := exec.Command("tmux", append([]string{"-S", sock}, args...)...)
		cmd.Env = env
		return cmd
	}
	start := tmux(append([]string{"new-session", "-d", "-x", "200", "-y", "50", "--"}, argv...)...)
	if err := inNetns(ns, start.Run); err != nil {
		t.Fatalf("tmux new-session in the test's namespace: %v", err)
	}
	t.Cleanup(func() { _ = tmux("kill-server").Run() })
	keys = func(k ...string) {
		if out, err := tmux(append([]string{"send-keys", "-t", "0"}, k...)...).CombinedOutput(); err != nil {
			t.Fatalf("tmux send-keys: %v %s", err, out)
		}
	}
	screen = func() string {
		out, _ := tmux("capture-pane", "-p", "-t", "0").Output()
		return string(out)
	}
	alive = func() bool { return tmux("has-session", "-t", "0").Run() == nil }
	return keys, screen, alive
}

// paneWatch polls a pane's screen, keeping every screen it saw.
type paneWatch struct {
	screen func() string
	seen   []string
}

// wait polls until the screen shows one of want (bounded, 90 s: a turn of
// Claude Code with MCP tools takes a few seconds) and returns which.
func (p *paneWatch) wait(t *testing.T, want ...string) string {
	t.Helper()
	var s string
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		s = p.screen()
		if len(p.seen) == 0 || p.seen[len(p.seen)-1] != s {
			p.seen = append(p.seen, s)
		}
		for _, w := range want {
			if strings.Contains(s, w) {
				return w
			}
		}
	}
	t.Fatalf("the screen never showed %q:\n%s", want, s)
	return ""
}

// never fails t when a screen p saw showed one of bad.
func (p *paneWatch) never(t *testing.T, bad ...string) {
	t.Helper()
	for _, s := range p.seen {
		for _, b := range bad {
			if strings.Contains(s, b) {
				t.Errorf("the screen showed %q:\n%s", b, s)
				return
			}
		}
	}
}

// onboard writes the ~/.claude.json of a user who has finished Claude
// Code's onboarding, and trusts dir unless it is "".
func onboard(t *testing.T, home, dir string) {
	t.Helper()
	cfg := map[string]any{"hasCompletedOnboarding": true}
	if dir != "" {
		cfg["projects"] = map[string]any{dir: map[string]any{"hasTrustDialogAccepted": true}}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAgentsInteractive runs `aileron launch claude` with no arguments, as
// the docs' first example does, in a real terminal (tmux) in the test's
// namespace with nothing but loopback: Claude Code asks nothing about the
// key, takes a typed prompt, and completes the turn with its tools through
// Aileron, the stand-in seeing the real key. With an API key, a first run
// (no ~/.claude.json) goes through Claude Code's own onboarding (theme,
// security notes, folder trust) and never its login or connectivity check;
// with a subscription token, a first run needs the onboarding marked
// finished in ~/.claude.json first, as docs/agents.md says.
func TestAgentsInteractive(t *testing.T) {
	embed := "POST llm.example.com/v1/embeddings" // the approval-gated action
	for _, tc := range []struct {
		name         string
		subscription bool
		onboarded    bool
		firstRun     []string // the onboarding screens answered with Enter, in order
		mayRefuse    []string // the refused requests allowed besides embed
		// place is the one header the stand-in gets the key in. Claude Code
		// sends an apiKeyHelper's value as x-api-key and Authorization:
		// Bearer; Aileron puts the key in x-api-key and drops the other.
		place string
	}{
		{name: "key", onboarded: true, place: "x-api-key"},
		{name: "key_first_run", firstRun: []string{"Choose the text style", "Security notes", "Yes, I trust this folder"}, place: "x-api-key"},
		// Signed in with a subscription token, Claude Code asks for its
		// managed settings whatever its switches say. Its first run needs
		// the onboarding marked finished, as docs/agents.md says; then it
		// asks only to trust the folder.
		{name: "subscription", subscription: true, place: "authorization", firstRun: []string{"Yes, I trust this folder"},
			mayRefuse: []string{"GET api.anthropic.com/api/claude_code/policy_limits", "GET api.anthropic.com/api/claude_code/settings"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startAgentEnv(t)
			if tc.subscription {
				tok := newSecret("subscription token", "sk-ant-oat01-", "")
				if out, errOut, err := e.d.runInput(t.Context(), tok, "provider", "add", "anthropic", "--subscription"); err != nil {
					t.Fatalf("provider add anthropic --subscription: %v\n%s%s", err, out, errOut)
				}
				e.keys["anthropic"] = tok
			}
			switch {
			case tc.onboarded:
				onboard(t, e.user, e.user)
			case tc.subscription:
				onboard(t, e.user, "")
			}
			refused := e.interactiveTurn(t, tc.firstRun)
			if !slices.Contains(refused, embed) {
				t.Errorf("the approval-gated action was not refused: %q", refused)
			}
			for _, r := range refused {
				if r != embed && !slices.Contains(tc.mayRefuse, r) {
					t.Errorf("the launched Claude Code tried %s", r)
				}
			}
			for _, r := range e.st.Requests() {
				if want := map[string]string{tc.place: e.keys["anthropic"]}; r.Host == standinAnthropicHost && !maps.Equal(r.Keys, want) {
					t.Errorf("%s %s carried keys %v, want %v", r.Method, r.Path, r.Keys, want)
				}
			}
		})
	}
}

// interactiveTurn starts `aileron launch claude` in a terminal, answers
// the firstRun screens with Enter, types the scripted prompt, checks the
// turn, ends Claude Code with ^C ^C, and returns the refused requests.
func (e *agentEnv) interactiveTurn(t *testing.T, firstRun []string) []string {
	t.Helper()
	// The user's own key and base URL are in the environment: launch keeps
	// them from Claude Code.
	env := append(cleanEnv(e.d.home), "HOME="+e.user, "PATH="+e.npmPB+":/usr/local/bin:/usr/bin:/bin",
		"TERM=xterm-256color", "TMPDIR="+e.tmp, "ANTHROPIC_API_KEY=sk-ant-user-own", "ANTHROPIC_BASE_URL=https://elsewhere.example")
	e.agentTurns()
	keys, screen, alive := nsPane(t, e.ns, env, "sh", "-c", `cd "$HOME" && exec "$0" launch claude`, theSuite.bin)
	p := &paneWatch{screen: screen}
	t.Cleanup(func() {
		if t.Failed() {
			for i, s := range p.seen {
				t.Logf("screen %d:\n%s", i, s)
			}
		}
	})
	// What Claude Code shows when it would not use the key, or when it
	// tries its login's connectivity check.
	bad := []string{"custom API key", "Not logged in", "Unable to connect", "Run /login"}
	for _, s := range firstRun {
		if got := p.wait(t, append([]string{s}, bad...)...); got != s {
			t.Fatalf("Claude Code showed %q, not its onboarding screen %q", got, s)
		}
		keys("Enter")
	}
	if got := p.wait(t, append([]string{"? for shortcuts"}, bad...)...); got != "? for shortcuts" {
		t.Fatalf("Claude Code showed %q, not its prompt", got)
	}
	keys("Look up model gpt-test, then embed hello.")
	p.wait(t, "Look up model gpt-test, then embed hello.")
	// An Enter that follows typed text closely is taken as part of a paste:
	// press it until the turn starts (the stand-in plays its first turn);
	// an Enter on an empty prompt does nothing.
	pending := e.st.Pending()
	for i := 0; e.st.Pending() == pending; i++ {
		if i == 20 {
			t.Fatalf("Enter did not send the prompt:\n%s", screen())
		}
		keys("Enter")
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && e.st.Pending() == pending; {
			time.Sleep(100 * time.Millisecond)
		}
	}
	p.wait(t, append([]string{"AGENT DONE"}, bad...)...)
	p.never(t, bad...)
	refused := e.checkTurn(t, "anthropic", "api.anthropic.com", 0)
	keys("C-c")
	keys("C-c")
	for deadline := time.Now().Add(30 * time.Second); alive(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Claude Code did not exit on ^C ^C:\n%s", screen())
		}
	}
	if left, _ := filepath.Glob(filepath.Join(e.tmp, "aileron-*")); len(left) > 0 {
		t.Errorf("aileron launch claude left %q behind", left)
	}
	// Claude Code writes ~/.claude.json itself; launch never does.
	if b, err := os.ReadFile(filepath.Join(e.user, ".claude.json")); err != nil || strings.Contains(string(b), "aileron") {
		t.Errorf("the user's ~/.claude.json (%v) names aileron or is missing:\n%s", err, b)
	}
	return refused
}
