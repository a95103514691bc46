package main

import (
	"strings"
	"testing"
)

// TestProposalsShowJustification: `proposals show` prints what the agent
// said when it asked, on one line, with the characters that could hide or
// reorder text escaped.
func TestProposalsShowJustification(t *testing.T) {
	home := t.TempDir()
	store := startProposalsAPI(t, home, nil)
	p, err := store.Ask(t.Context(), "s_one", "GET", "api.example.com", 443, "/v1/reports/42", "to read\nreport \u202e42")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runProposals(t, home, "show", p.ID)
	if code != 0 || !strings.Contains(out, "asked      to read\\nreport \\u202e42\n") || strings.Contains(out, "\u202e") {
		t.Fatalf("proposals show: exit %d\n%s%s", code, out, errOut)
	}
}
