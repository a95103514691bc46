package main

import (
	"slices"
	"testing"
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
