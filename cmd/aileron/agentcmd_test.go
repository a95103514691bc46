package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/aileronhq/aileron/agents"
	"github.com/aileronhq/aileron/sessions"
)

// TestAgentArgs: a known agent's name first, not after --, starts that
// agent with the rest appended; anything else launches as a command.
func TestAgentArgs(t *testing.T) {
	for _, tc := range []struct {
		pos       []string
		dashAt    int
		wantAgent string
		wantArgs  []string
		wantErr   bool
	}{
		{[]string{"claude"}, -1, "claude", []string{}, false},
		{[]string{"codex", "exec", "hi"}, 1, "codex", []string{"exec", "hi"}, false},
		{[]string{"claude", "-p", "hi"}, 0, "", nil, false}, // aileron launch -- claude -p hi: as today
		{[]string{"curl", "https://x/"}, 0, "", nil, false}, // any other command
		{[]string{"python3", "x.py"}, -1, "", nil, true},    // not an agent: a command goes after --
		{[]string{"claud", "--", "-p"}, 1, "", nil, true},   // a mistyped agent
		{[]string{"gemini", "x", "-p"}, 2, "", nil, true},   // the agent's arguments go after --
	} {
		a, args, ok, err := agentArgs(tc.pos, tc.dashAt)
		if (err != nil) != tc.wantErr || ok != (tc.wantAgent != "") || a.Name != tc.wantAgent || ok && !slices.Equal(args, tc.wantArgs) {
			t.Errorf("agentArgs(%q, %d) = %q %q %v %v, want %q %q", tc.pos, tc.dashAt, a.Name, args, ok, err, tc.wantAgent, tc.wantArgs)
		}
	}
}

// TestSessionServes: a session whose connector scope leaves out the
// agent's provider cannot serve it; an unscoped one can.
func TestSessionServes(t *testing.T) {
	claude, _ := agents.Lookup("claude")
	for _, tc := range []struct {
		conns []string
		ok    bool
	}{
		{nil, true},
		{[]string{"hub://aileron/anthropic"}, true},
		{[]string{"github://acme/aileron-connector-models", "hub://aileron/anthropic"}, true},
		{[]string{"github://acme/aileron-connector-models"}, false},
	} {
		for _, fresh := range []bool{false, true} {
			err := sessionServes(sessions.Info{ID: "s_x", Connectors: tc.conns}, claude, fresh)
			if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "--connector hub://aileron/anthropic") {
				t.Errorf("sessionServes(%q, %v) = %v, want ok %v", tc.conns, fresh, err, tc.ok)
			}
			// A session launch created is already new: the advice is
			// the --connector flag, not --new.
			if err != nil && strings.Contains(err.Error(), "--new") == fresh {
				t.Errorf("sessionServes(%q, %v) = %v; want --new advised only for an existing session", tc.conns, fresh, err)
			}
		}
	}
}

// TestChownTree: a fenced agent that runs as another user owns what
// launch wrote for it, directories and files.
func TestChownTree(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("TestChownTree gives files to another user, which needs root; run the tests as root")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "codex-home"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "codex-home", "config.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chownTree(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "codex-home"), filepath.Join(dir, "codex-home", "config.toml")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65534 || sys.Gid != 65534 {
			t.Errorf("%s is owned by %d:%d, want 65534:65534", p, sys.Uid, sys.Gid)
		}
	}
}

// TestPrepareAgentWithholds: the session Claude Code is launched with lacks
// the API key placeholder its key helper prints, and the caller's session
// is left as it was.
func TestPrepareAgentWithholds(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	claude, _ := agents.Lookup("claude")
	info := sessions.Info{ID: "s_1", Placeholders: map[string]string{"ANTHROPIC_API_KEY": "aileron-placeholder-1", "LINEAR_API_KEY": "aileron-placeholder-2"}}
	al, err := prepareAgent(claude, info, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer al.cleanup()
	if _, ok := al.info.Placeholders["ANTHROPIC_API_KEY"]; ok || al.info.Placeholders["LINEAR_API_KEY"] == "" {
		t.Errorf("the agent's placeholders %v: want LINEAR_API_KEY and no ANTHROPIC_API_KEY", al.info.Placeholders)
	}
	if len(info.Placeholders) != 2 {
		t.Errorf("the caller's session changed: %v", info.Placeholders)
	}
}
