package main

import (
	"strings"
	"testing"
)

// TestLaunchRefusals: launch's mistakes are caught before the daemon is
// asked, each saying what to write: an agent's own flag before --, a word
// that is no known agent, and an agent that is not installed.
func TestLaunchRefusals(t *testing.T) {
	home := t.TempDir()
	t.Setenv("PATH", t.TempDir()) // no agent installed
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"launch", "claude", "-p", "hi"}, 2, "the agent's own arguments go after --, e.g. aileron launch claude -- -p hi"},
		{[]string{"launch", "--new", "codex", "--full-auto", "x"}, 2, "aileron launch --new codex -- --full-auto x"},
		{[]string{"launch", "foo"}, 2, "unknown agent foo; known: claude, codex, gemini; to run a command, put it after --"},
		{[]string{"launch", "claude"}, 1, "Claude Code (claude) is not on PATH; install it with `npm install -g @anthropic-ai/claude-code`"},
		{[]string{"launch", "codex", "--", "exec", "hi"}, 1, "npm install -g @openai/codex"},
		{[]string{"sandbox", "run", "--agent", "gemini"}, 1, "npm install -g @google/gemini-cli"},
	} {
		code, out, errOut := runCLI(t, home, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("aileron %v: exit %d, output %q; want exit %d mentioning %q", c.args, code, out+errOut, c.code, c.want)
		}
	}
	if code, _, errOut := runCLI(t, home, "launch", "claude", "--help"); code != 0 || !strings.Contains(errOut, "Usage: aileron launch") {
		t.Errorf("launch claude --help: exit %d, %q", code, errOut)
	}
}
