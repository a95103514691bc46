package sandbox

import (
	"strings"
	"testing"

	"github.com/aileronhq/aileron/action"
)

// TestRenderShowsUnpinnedAction: tools.txt marks an action that requires a
// connector by a placeholder hash, and only that one.
func TestRenderShowsUnpinnedAction(t *testing.T) {
	unpinned := testAction("issue-create", linearFQN)
	unpinned.Requires = []action.Requirement{{Name: linearFQN, Version: "0.0.0-dev", Hash: action.SelfHash},
		{Name: "github://acme/other", Version: "1.0.0", Hash: "sha256:bound-at-release"}}
	pinned := testAction("issue-archive", linearFQN)
	pinned.Requires = []action.Requirement{{Name: linearFQN, Version: "0.0.0-dev", Hash: action.SelfHash}}
	r, err := Render(RenderInput{Actions: []action.Installed{unpinned, pinned}, AgentCommand: "claude"})
	if err != nil {
		t.Fatal(err)
	}
	want := "issue-archive " + linearFQN + " -- Aileron action: Creates a new issue.\n" +
		"issue-create " + linearFQN + " -- Aileron action: Creates a new issue. (UNPINNED: requires github://acme/other@1.0.0 by a placeholder hash)\n"
	if got := string(r.ToolsTxt); got != want {
		t.Fatalf("tools.txt =\n%s\nwant\n%s", got, want)
	}
	if strings.Count(string(r.ToolsTxt), "UNPINNED") != 1 {
		t.Fatal("a pinned action is marked")
	}
}
