package main

import (
	"slices"
	"strings"
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
		{[]string{"python3", "x.py"}, -1, "", nil, false},   // without --, as today
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
		err := sessionServes(sessions.Info{ID: "s_x", Connectors: tc.conns}, claude)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "--connector hub://aileron/anthropic") {
			t.Errorf("sessionServes(%q) = %v, want ok %v", tc.conns, err, tc.ok)
		}
	}
}
