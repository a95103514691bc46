package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// agentEnv is a network namespace of the test's own in which only loopback
// exists, and in it the stand-in provider and a daemon with the model
// providers installed and bound and a small test connector with two actions
// (get-model, create-embedding, which needs approval). Every agent runs in
// that namespace: an agent that ignored the proxy for some call would find
// no network at all, never the machine's.
type agentEnv struct {
	ns    netns.NsHandle
	st    *standin
	d     *daemon
	keys  map[string]string // provider name → real key
	user  string            // the HOME the agent runs with
	tmp   string            // the TMPDIR aileron runs with
	npmPB string            // the npm clients' bin directory
}

// loopbackNS creates a network namespace whose only link is lo, up.
func loopbackNS(t *testing.T) netns.NsHandle {
	t.Helper()
	type res struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the new namespace with the goroutine
		ns, err := netns.New()
		if err == nil {
			var lo netlink.Link
			if lo, err = netlink.LinkByName("lo"); err == nil {
				err = netlink.LinkSetUp(lo)
			}
		}
		c <- res{ns, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatalf("a network namespace with only loopback: %v", r.err)
	}
	t.Cleanup(func() { _ = r.ns.Close() })
	return r.ns
}

func startAgentEnv(t *testing.T) *agentEnv {
	t.Helper()
	e := &agentEnv{ns: loopbackNS(t), keys: map[string]string{}, user: t.TempDir(), tmp: t.TempDir()}
	e.npmPB = filepath.Dir(npmBin(t, "claude"))
	if err := inNetns(e.ns, func() error { e.st = startStandin(t, "127.0.0.2"); return nil }); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"proxy": map[string]any{"listen": "127.0.0.1:0"},
		"admin": map[string]any{"web_listen": "127.0.0.1:0"},
		"log":   map[string]any{"level": "debug"},
	}
	e.st.Configure(cfg)
	d, err := theSuite.startDaemonWith(cfg, func(cmd *exec.Cmd) error { return inNetns(e.ns, cmd.Start) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("daemon did not exit cleanly on SIGTERM: %v", err)
		}
	})
	d.logOnFailure(t)
	e.d = d
	for _, p := range []struct{ name, fqn, kind, env, prefix string }{
		{"anthropic", "hub://aileron/anthropic", "api_key", "ANTHROPIC_API_KEY", "sk-ant-api03-"},
		{"openai", "hub://aileron/openai", "api_key", "OPENAI_API_KEY,CODEX_API_KEY", "sk-proj-"},
		{"gemini", "hub://aileron/gemini", "api_key", "GEMINI_API_KEY,GOOGLE_API_KEY", "AIza"},
	} {
		d.cli(t, "connector", "install", filepath.Join(theSuite.root, "providers", "packages", p.name))
		e.keys[p.name] = newSecret(p.name+" key", p.prefix, "")
		if out, errOut, err := d.runInput(t.Context(), e.keys[p.name], "credential", "set", p.name, "--kind", p.kind); err != nil {
			t.Fatalf("credential set %s: %v\n%s%s", p.name, err, out, errOut)
		}
		d.cli(t, "credential", "bind", p.fqn, "--credential", p.name, "--env", p.env)
	}
	d.cli(t, "connector", "install", filepath.Join("testdata", "agents", "models"))
	modelsKey := newSecret("models key", "mk-", "")
	if out, errOut, err := d.runInput(t.Context(), modelsKey, "credential", "set", "models", "--kind", "bearer"); err != nil {
		t.Fatalf("credential set models: %v\n%s%s", err, out, errOut)
	}
	d.cli(t, "credential", "bind", "github://acme/aileron-connector-models", "--credential", "models")
	return e
}

// launch runs `aileron ARGS…` (launch or sandbox run) in the namespace,
// with HOME the test's user home and the npm clients first in PATH.
func (e *agentEnv) launch(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, theSuite.bin, args...)
	// The user's own keys and base URLs are in the caller's environment:
	// launch must keep them from the agent (the stand-in would see them).
	cmd.Env = append(cleanEnv(e.d.home), "HOME="+e.user, "PATH="+e.npmPB+":/usr/local/bin:/usr/bin:/bin",
		"ANTHROPIC_API_KEY=sk-ant-user-own", "ANTHROPIC_AUTH_TOKEN=user-own-token", "OPENAI_API_KEY=sk-user-own",
		"CODEX_API_KEY=sk-user-own", "GEMINI_API_KEY=AIza-user-own", "GOOGLE_API_KEY=AIza-user-own",
		"ANTHROPIC_BASE_URL=https://elsewhere.example", "OPENAI_BASE_URL=https://elsewhere.example/v1", "GOOGLE_GEMINI_BASE_URL=https://elsewhere.example",
		"TMPDIR="+e.tmp)
	cmd.Dir = e.user
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := inNetns(e.ns, cmd.Start); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("aileron %v: %v\n%s", args, err, errOut.String())
	}
	// What launch wrote (the agent's registration, the CA bundle) is gone.
	if left, _ := filepath.Glob(filepath.Join(e.tmp, "aileron-*")); len(left) > 0 {
		t.Errorf("aileron %v left %q behind", args, left)
	}
	return out.String(), errOut.String(), code
}

// agentTurns queues the script every agent plays in one run: call
// get_model, after its result call create_embedding, after that one's
// result answer.
func (e *agentEnv) agentTurns() {
	e.st.Queue(
		turn{Tool: "get_model", Input: map[string]any{"id": "gpt-test"}},
		turn{Tool: "create_embedding", Input: map[string]any{"model": "gpt-test", "input": "hello"}, When: afterToolResult},
		turn{Text: "AGENT DONE: the embedding waits for approval.", When: afterToolResult},
	)
}

// checkTurn checks what the stand-in and the daemon saw of one agent run:
// the provider got the real key and never the placeholder, both tools ran
// (the second one's result pending approval), and every request the agent
// made that went out went to its provider (or to Aileron's own API and the
// action's host on its behalf). It returns the refused requests, for the
// record.
func (e *agentEnv) checkTurn(t *testing.T, provider, host string, from int) []string {
	t.Helper()
	if e.st.Pending() != 0 {
		t.Errorf("%d scripted turns were not played", e.st.Pending())
	}
	var sawKey bool
	var results []string
	for _, r := range e.st.Requests() {
		if r.Host != host {
			continue
		}
		for _, k := range r.Keys {
			sawKey = sawKey || k == e.keys[provider]
			if strings.HasPrefix(k, "aileron-placeholder") || (k != e.keys[provider] && k != "") {
				t.Errorf("the stand-in saw key %q on %s %s, not the real key", k, r.Method, r.Path)
			}
		}
		results = append(results, r.ToolResults...)
	}
	if !sawKey {
		t.Errorf("the stand-in never saw the real %s key", provider)
	}
	all := strings.Join(results, "\n")
	if !strings.Contains(all, "gpt-test") || !strings.Contains(all, "pending_approval") {
		t.Errorf("the tool results the agent sent back lack the model lookup or the pending approval:\n%s", all)
	}
	lines := readAudit(t, e.d)[from:]
	for _, l := range lines {
		if h := l.str("host"); h != "" && l.str("decision") != "deny" && !slices.Contains([]string{host, "aileron.internal", "llm.example.com"}, h) {
			t.Errorf("a request left for %s: %s", h, l.Raw)
		}
	}
	refused := refusedPaths(lines)
	slices.Sort(refused)
	return slices.Compact(refused)
}

// userConfig are the user's own agent configuration files (under HOME)
// with what they hold before any launch.
func userConfig() map[string]string {
	return map[string]string{
		".claude.json":          `{"mcpServers":{}}`,
		".claude/settings.json": `{"permissions":{"deny":["WebFetch"]}}`,
		".codex/config.toml":    "model_reasoning_effort = \"low\"\n",
		".gemini/settings.json": `{"general":{"vimMode":true}}`,
	}
}

func (e *agentEnv) writeUserConfig(t *testing.T) {
	t.Helper()
	for p, v := range userConfig() {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(e.user, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.user, p), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// untouched fails t when launch changed the user's own configuration
// files. Claude Code rewrites ~/.claude.json itself on every run (its
// start count, its caches): that one must only not name Aileron.
func (e *agentEnv) untouched(t *testing.T) {
	t.Helper()
	for p, v := range userConfig() {
		b, err := os.ReadFile(filepath.Join(e.user, p))
		switch {
		case err != nil:
			t.Errorf("the user's %s: %v", p, err)
		case p == ".claude.json" && bytes.Contains(b, []byte("aileron")):
			t.Errorf("the user's %s names aileron:\n%s", p, b)
		case p != ".claude.json" && string(b) != v:
			t.Errorf("the user's %s changed:\n%s", p, b)
		}
	}
}

// TestAgentsLaunch runs the real Claude Code, Codex and Gemini CLI with
// `aileron launch NAME` against the stand-in provider, in a namespace with
// nothing but loopback.
func TestAgentsLaunch(t *testing.T) {
	e := startAgentEnv(t)
	e.writeUserConfig(t)
	t.Run("claude", func(t *testing.T) {
		e.agentTurns()
		out, errOut, code := e.launch(t, "launch", "claude", "--", "-p", "Look up model gpt-test, then embed hello.")
		if code != 0 || !strings.Contains(out, "AGENT DONE") {
			t.Fatalf("aileron launch claude: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		refused := e.checkTurn(t, "anthropic", "api.anthropic.com", 0)
		// With its key from the key helper, Claude Code asks for none of
		// its /api/claude_code/ settings (with a subscription token it does:
		// TestAgentsInteractive).
		want := []string{"POST llm.example.com/v1/embeddings"}
		if !slices.Equal(refused, want) {
			t.Errorf("refused requests of the launched Claude Code: %q, want %q", refused, want)
		}
		e.untouched(t)
	})
	t.Run("codex", func(t *testing.T) {
		// Codex defers MCP tools behind its tool_search for the models its
		// catalogue knows; a model it does not know sees them at once.
		e.agentTurns()
		n := len(readAudit(t, e.d))
		out, errOut, code := e.launch(t, "launch", "codex", "--", "exec", "--skip-git-repo-check", "-m", "gpt-test",
			"Look up model gpt-test, then embed hello.")
		if code != 0 || !strings.Contains(out, "AGENT DONE") {
			t.Fatalf("aileron launch codex: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		refused := e.checkTurn(t, "openai", "api.openai.com", n)
		if want := []string{"POST llm.example.com/v1/embeddings"}; !slices.Equal(refused, want) {
			t.Errorf("refused requests of the launched Codex: %q, want %q", refused, want)
		}
		e.untouched(t)
	})
	t.Run("gemini", func(t *testing.T) {
		// --skip-trust: Gemini CLI runs headless only in a trusted folder,
		// which is the user's call. -m: with no model named, it first asks
		// a small model to route the prompt, which the stand-in does not
		// play.
		e.agentTurns()
		n := len(readAudit(t, e.d))
		out, errOut, code := e.launch(t, "launch", "gemini", "--", "--skip-trust", "-m", "gemini-test", "-p", "Look up model gpt-test, then embed hello.")
		if code != 0 || !strings.Contains(out, "AGENT DONE") {
			t.Fatalf("aileron launch gemini: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		refused := e.checkTurn(t, "gemini", "generativelanguage.googleapis.com", n)
		if want := []string{"POST llm.example.com/v1/embeddings"}; !slices.Equal(refused, want) {
			t.Errorf("refused requests of the launched Gemini CLI: %q, want %q", refused, want)
		}
		e.untouched(t)
	})
	t.Run("gemini_switches", func(t *testing.T) {
		// Gemini CLI started bare sends usage statistics to
		// play.googleapis.com; launched, it does not.
		n := len(readAudit(t, e.d))
		if out, errOut, code := e.launch(t, "launch", "--", "env", "-u", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME="+t.TempDir(),
			"gemini", "--skip-trust", "-m", "gemini-test", "-p", "hi"); code != 0 {
			t.Fatalf("aileron launch -- gemini: exit %d\n%s%s", code, out, errOut)
		}
		waitAudit(t, e.d, "bare Gemini CLI's usage statistics", func(ls []auditLine) bool {
			return slices.Contains(refusedPaths(ls[n:]), "CONNECT play.googleapis.com")
		})
	})
	t.Run("codex_switches", func(t *testing.T) {
		// Codex started bare reaches for chatgpt.com and github.com (apps,
		// plugins, update and model checks); launched, it does not.
		n := len(readAudit(t, e.d))
		if out, errOut, code := e.launch(t, "launch", "--", "env", "-u", "OPENAI_BASE_URL", "codex", "exec", "--skip-git-repo-check",
			"-m", "gpt-test", "hi"); code != 0 {
			t.Fatalf("aileron launch -- codex: exit %d\n%s%s", code, out, errOut)
		}
		bare := refusedPaths(readAudit(t, e.d)[n:])
		for _, h := range []string{"CONNECT chatgpt.com", "CONNECT github.com"} {
			if !slices.Contains(bare, h) {
				t.Errorf("bare Codex did not try %s (refused: %q): the check of the switches sees nothing", h, bare)
			}
		}
	})
	t.Run("provider_not_ready", func(t *testing.T) {
		// Unbound, the provider is not ready: launch says what to run and
		// starts nothing; --list says the same.
		e.d.cli(t, "credential", "unbind", "hub://aileron/gemini")
		defer e.d.cli(t, "credential", "bind", "hub://aileron/gemini", "--credential", "gemini", "--env", "GEMINI_API_KEY,GOOGLE_API_KEY")
		before := len(e.st.Requests())
		out, errOut, code := e.launch(t, "launch", "gemini", "--", "-p", "hi")
		if code == 0 || !strings.Contains(errOut, "run `aileron provider add gemini`") {
			t.Errorf("launch gemini with its provider unbound: exit %d\n%s%s", code, out, errOut)
		}
		out, errOut, code = e.launch(t, "sandbox", "run", "--agent", "gemini", "--user", "root", "--", "-p", "hi")
		if code == 0 || !strings.Contains(errOut, "run `aileron provider add gemini`") {
			t.Errorf("sandbox run --agent gemini with its provider unbound: exit %d\n%s%s", code, out, errOut)
		}
		// A session that may not use the provider cannot serve the agent.
		out, errOut, code = e.launch(t, "launch", "claude", "--new", "--connector", "github://acme/aileron-connector-models", "--", "-p", "hi")
		if code == 0 || !strings.Contains(errOut, "Claude Code calls the anthropic provider, which session s_") {
			t.Errorf("launch claude in a session without anthropic: exit %d\n%s%s", code, out, errOut)
		}
		if got := len(e.st.Requests()) - before; got != 0 {
			t.Errorf("the refused launches reached the provider %d times", got)
		}
		out, errOut, code = e.launch(t, "launch", "--list")
		want := []string{
			"claude  Claude Code  " + filepath.Join(e.npmPB, "claude") + "  anthropic (ready)",
			"codex   Codex        " + filepath.Join(e.npmPB, "codex") + "   openai (ready)",
			"gemini  Gemini CLI   " + filepath.Join(e.npmPB, "gemini") + "  gemini (not ready: provider gemini is installed but has no key bound; run `aileron provider add gemini` (the key on stdin))",
		}
		for _, w := range want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("launch --list lacks %q: exit %d\n%s%s", w, code, out, errOut)
			}
		}
	})
	t.Run("claude_switches", func(t *testing.T) {
		// The same agent started bare (aileron launch -- claude) calls
		// telemetry, bootstrap and registry endpoints; launched, it does not.
		n := len(readAudit(t, e.d))
		if out, errOut, code := e.launch(t, "launch", "--", "env", "-u", "ANTHROPIC_BASE_URL", "-u", "ANTHROPIC_AUTH_TOKEN", "claude", "-p", "hi"); code != 0 {
			t.Fatalf("aileron launch -- claude: exit %d\n%s%s", code, out, errOut)
		}
		bare := refusedPaths(waitAudit(t, e.d, "the bare run's event logging", func(ls []auditLine) bool {
			return slices.ContainsFunc(refusedPaths(ls[n:]), func(p string) bool { return strings.Contains(p, "/api/event_logging/") })
		})[n:])
		for _, p := range []string{"/api/eval/", "/api/claude_cli/bootstrap", "/mcp-registry/", "/api/event_logging/"} {
			if !slices.ContainsFunc(bare, func(r string) bool { return strings.Contains(r, p) }) {
				t.Errorf("bare Claude Code did not try %s (refused: %q): the check of the switches sees nothing", p, bare)
			}
		}
	})
}

// TestAgentsFenced runs the real agents with `aileron sandbox run --agent
// NAME` in a fenced sandbox whose daemon sits in a namespace with nothing
// but loopback.
func TestAgentsFenced(t *testing.T) {
	e := startAgentEnv(t)
	for _, tc := range []struct {
		agent, provider, host string
		args                  []string
	}{
		{"claude", "anthropic", "api.anthropic.com", []string{"-p"}},
		{"codex", "openai", "api.openai.com", []string{"exec", "--skip-git-repo-check", "-m", "gpt-test"}},
		{"gemini", "gemini", "generativelanguage.googleapis.com", []string{"--skip-trust", "-m", "gemini-test", "-p"}},
	} {
		t.Run(tc.agent, func(t *testing.T) {
			e.agentTurns()
			n := len(readAudit(t, e.d))
			// As root: the npm clients sit under root's home, which no
			// other user may enter.
			args := append([]string{"sandbox", "run", "--agent", tc.agent, "--user", "root", "--"}, tc.args...)
			out, errOut, code := e.launch(t, append(args, "Look up model gpt-test, then embed hello.")...)
			if code != 0 || !strings.Contains(out, "AGENT DONE") {
				t.Fatalf("aileron sandbox run --agent %s: exit %d\nstdout:\n%s\nstderr:\n%s", tc.agent, code, out, errOut)
			}
			lines := readAudit(t, e.d)[n:]
			if !slices.ContainsFunc(lines, func(l auditLine) bool { return l.str("event") == "sandbox.started" }) {
				t.Errorf("no sandbox.started line: the agent did not run fenced")
			}
			refused := e.checkTurn(t, tc.provider, tc.host, n)
			for _, r := range refused {
				if !strings.Contains(r, " "+tc.host+"/") && r != "POST llm.example.com/v1/embeddings" {
					t.Errorf("fenced %s tried %s", tc.agent, r)
				}
			}
			t.Logf("fenced %s: refused %q", tc.agent, refused)
		})
	}
}

// refusedPaths are "METHOD host/path" of the refused requests among ls.
func refusedPaths(ls []auditLine) []string {
	var out []string
	for _, l := range ls {
		if l.str("host") != "" && l.str("decision") == "deny" {
			out = append(out, l.str("method")+" "+l.str("host")+l.str("path"))
		}
	}
	return out
}

// startDaemonWith is startDaemon with start in place of cmd.Start.
func (s *suite) startDaemonWith(cfg map[string]any, start func(*exec.Cmd) error) (*daemon, error) {
	home, err := os.MkdirTemp(s.work, "home-")
	if err != nil {
		return nil, err
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		return nil, err
	}
	return s.launchWith(home, cfgPath, "daemon.stderr.log", nil, start)
}
