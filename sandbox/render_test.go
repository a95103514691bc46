package sandbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/policy"
)

const googleFQN = "github://acme/aileron-connector-google"

// googleSpec is a two-operation connector spec, as ParseSpec would return it.
func googleSpec() *policy.Spec {
	return &policy.Spec{
		SchemaVersion: policy.SchemaVersion,
		Connector:     policy.Connector{FQN: googleFQN, Version: "1.2.3"},
		Tools: []policy.Tool{{
			Name:        "google",
			Description: "Google APIs",
			Operations: []policy.OperationSpec{
				{
					Name: "gmail.messages.search", Summary: "Search Gmail messages", Method: "GET",
					Path: "/gmail/v1/users/me/messages", Hosts: []string{"gmail.googleapis.com"},
					Inputs: []policy.Input{{Name: "q", Type: "string", Description: "Gmail search query"}},
				},
				{
					Name: "gmail.messages.send", Summary: "Send a message", Method: "POST",
					Path: "/gmail/v1/users/me/messages/send", Hosts: []string{"gmail.googleapis.com"},
					Approval: policy.ApprovalRequired, Description: "Sends the message as the user.\nIt cannot be unsent.",
					Inputs: []policy.Input{
						{Name: "raw", Type: "string", Required: true, Description: "RFC 2822 message, base64url"},
						{Name: "threadId", Description: "Thread to reply in"},
					},
				},
			},
		}},
	}
}

// toolSpec is a one-tool, one-operation spec.
func toolSpec(fqn, tool string) *policy.Spec {
	return &policy.Spec{
		SchemaVersion: policy.SchemaVersion,
		Connector:     policy.Connector{FQN: fqn, Version: "2.0.0"},
		Tools: []policy.Tool{{Name: tool, Operations: []policy.OperationSpec{{
			Name: "items.list", Summary: "List items", Method: "GET", Path: "/items", Hosts: []string{"api.example.com"},
		}}}},
	}
}

const linearFQN = "github://ALRubinger/aileron-connector-linear"

// issueCreate is an approval-gated action with two inputs.
func issueCreate() action.Installed {
	return testAction("issue-create", linearFQN)
}

func testAction(name, fqn string) action.Installed {
	return action.Installed{
		Manifest: &action.Manifest{
			Name: name, Version: "0.0.0-dev", Intent: "Creates a new issue.",
			Description: "# Create an issue\n\nCreates a Linear issue in the team's backlog.",
			Steps:       []action.Step{{ID: "issue", Connector: fqn, Op: "issue_create"}},
			Approval:    action.Approval{Required: true},
			Inputs: []action.Input{
				{Name: "title", Type: "String", Label: "Title", Required: true, Description: "The issue's title."},
				{Name: "body", Type: "String", Label: "Body", Multiline: true, Description: "Markdown description."},
				{Name: "labels", Type: "array", ItemsType: "String", Description: "Label ids."},
			},
			File: "/store/linear/actions/" + name + "/action.md",
		},
		Connector: fqn, ConnectorVersion: "0.0.0-dev", Hash: "sha256:bound-at-release",
	}
}

func TestRenderToolsTxt(t *testing.T) {
	noIntent := testAction("issue-archive", linearFQN)
	noIntent.Intent = ""
	noIntent.Description = "\n## Archive an issue\nMore."
	bare := testAction("zz-bare", linearFQN)
	bare.Intent, bare.Description = "", ""
	multi := testAction("comment-add", linearFQN)
	multi.Intent = "Adds a\n comment\t\x1b[31m."
	r, err := Render(RenderInput{
		Specs:        []*policy.Spec{googleSpec(), toolSpec("github://acme/zeta", "zeta"), toolSpec("github://acme/alpha", "alpha")},
		Actions:      []action.Installed{issueCreate(), noIntent, bare, multi},
		AgentCommand: "claude",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "alpha github://acme/alpha -- Aileron connector operations: items.list\n" +
		"comment-add " + linearFQN + " -- Aileron action: Adds a comment [31m.\n" +
		"google " + googleFQN + " -- Aileron connector operations: gmail.messages.search, gmail.messages.send\n" +
		"issue-archive " + linearFQN + " -- Aileron action: Archive an issue\n" +
		"issue-create " + linearFQN + " -- Aileron action: Creates a new issue.\n" +
		"zeta github://acme/zeta -- Aileron connector operations: items.list\n" +
		"zz-bare " + linearFQN + " -- Aileron action: (no description)\n"
	if got := string(r.ToolsTxt); got != want {
		t.Errorf("tools.txt =\n%s\nwant\n%s", got, want)
	}
	var names []string
	for _, s := range r.Shims {
		names = append(names, s.Name)
		if !bytes.HasPrefix(s.Script, []byte("#!/bin/sh\n"+shimMarker+"\n")) {
			t.Errorf("shim %s does not start with the interpreter line and marker", s.Name)
		}
	}
	if got := strings.Join(names, " "); got != "alpha comment-add google issue-archive issue-create zeta zz-bare" {
		t.Errorf("shims = %s", got)
	}
}

func TestRenderEmpty(t *testing.T) {
	r, err := Render(RenderInput{})
	if err != nil || len(r.ToolsTxt) != 0 || len(r.Shims) != 0 {
		t.Errorf("Render(empty) = %+v, %v", r, err)
	}
}

func TestRenderErrors(t *testing.T) {
	other := "github://other/google-fork"
	badFQN := toolSpec("github://acme/x y", "xy")
	noOps := toolSpec("github://acme/noops", "noops")
	noOps.Tools[0].Operations = nil
	badOp := toolSpec("github://acme/badop", "badop")
	badOp.Tools[0].Operations[0].Name = "-rf"
	noManifest := action.Installed{Connector: linearFQN, ConnectorVersion: "1.0.0"}
	tests := []struct {
		name string
		in   RenderInput
		is   error
		want []string // substrings of the error text
	}{
		{"two specs, one tool command", RenderInput{Specs: []*policy.Spec{googleSpec(), toolSpec(other, "google")}}, ErrToolConflict,
			[]string{`command "google"`, `tool "google" of connector ` + googleFQN + "@1.2.3", `tool "google" of connector ` + other + "@2.0.0", "aileron connector remove", "--connector"}},
		{"spec tool vs action", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/issues", "issue-create")}, Actions: []action.Installed{issueCreate()}}, ErrToolConflict,
			[]string{`tool "issue-create" of connector github://acme/issues@2.0.0`, `action "issue-create" of connector ` + linearFQN + "@0.0.0-dev (/store/linear/actions/issue-create/action.md)", "remove one of the connectors"}},
		{"tool and action of one connector", RenderInput{Specs: []*policy.Spec{toolSpec(linearFQN, "issue-create")}, Actions: []action.Installed{issueCreate()}}, ErrToolConflict,
			[]string{"connector " + linearFQN + " declares both", "rename"}},
		{"spec tool vs agent", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/claude", "claude")}, AgentCommand: "/usr/local/bin/claude"}, ErrToolConflict,
			[]string{`the agent command "claude"`, `tool "claude" of connector github://acme/claude@2.0.0`, "shadow the agent", "launch a different agent"}},
		{"action vs agent", RenderInput{Actions: []action.Installed{testAction("codex", linearFQN)}, AgentCommand: "codex"}, ErrToolConflict,
			[]string{`the agent command "codex"`, `action "codex"`}},
		{"default reserved curl", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/curl", "curl")}}, ErrToolConflict,
			[]string{`the system command "curl"`, "shadow that command", "rename"}},
		{"default reserved aileron (action)", RenderInput{Actions: []action.Installed{testAction("aileron", linearFQN)}}, ErrToolConflict,
			[]string{`the system command "aileron"`}},
		{"caller reserved", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/kubectl", "kubectl")}, Reserved: []string{"kubectl"}}, ErrToolConflict,
			[]string{`the system command "kubectl"`}},
		{"differs only in case", RenderInput{Specs: []*policy.Spec{googleSpec(), toolSpec(other, "Google")}}, ErrToolConflict,
			[]string{`"google" and "Google" differ only in case`}},
		{"reserved, other case", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/env", "ENV")}}, ErrToolConflict,
			[]string{`the system command "env"`}},
		{"tool name with a slash", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/x", "../x")}}, ErrUnsafeName,
			[]string{`tool name "../x" cannot be a command name`, "contains '/'"}},
		{"tool name with a newline", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/x", "x\ntouch")}}, ErrUnsafeName,
			[]string{"byte 0x0a"}},
		{"tool name ..", RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/x", "..")}}, ErrUnsafeName, []string{"names a directory"}},
		{"action name -rf", RenderInput{Actions: []action.Installed{testAction("-rf", linearFQN)}}, ErrUnsafeName,
			[]string{`action name "-rf"`, "starts with '-'"}},
		{"empty action name", RenderInput{Actions: []action.Installed{testAction("", linearFQN)}}, ErrUnsafeName, []string{"it is empty"}},
		{"FQN with a space", RenderInput{Specs: []*policy.Spec{badFQN}}, ErrUnsafeName, []string{`connector FQN "github://acme/x y"`, "white space"}},
		{"tool without operations", RenderInput{Specs: []*policy.Spec{noOps}}, ErrUnsafeName, []string{"declares no operation"}},
		{"operation name -rf", RenderInput{Specs: []*policy.Spec{badOp}}, ErrUnsafeName, []string{`operation name "-rf"`}},
		{"action without manifest", RenderInput{Actions: []action.Installed{noManifest}}, ErrUnsafeName, []string{"has no manifest"}},
		{"nil spec", RenderInput{Specs: []*policy.Spec{nil}}, ErrUnsafeName, []string{"nil connector spec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Render(tt.in)
			if !errors.Is(err, tt.is) || r != nil {
				t.Fatalf("Render = %v, %v; want an error wrapping %v", r, err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestRenderJoinsAllErrors: every problem is reported at once, not only the
// first one.
func TestRenderJoinsAllErrors(t *testing.T) {
	_, err := Render(RenderInput{
		Specs:        []*policy.Spec{googleSpec(), toolSpec("github://b/google", "google"), toolSpec("github://acme/sh", "sh")},
		Actions:      []action.Installed{testAction("claude", linearFQN), testAction("bad name", linearFQN)},
		AgentCommand: "claude",
	})
	if !errors.Is(err, ErrToolConflict) || !errors.Is(err, ErrUnsafeName) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{`command "google"`, `command "sh"`, `command "claude"`, `action name "bad name"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %s:\n%v", w, err)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 4 {
		t.Errorf("%d errors, want 4:\n%v", n, err)
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r, err := Render(RenderInput{Specs: []*policy.Spec{googleSpec(), toolSpec("github://acme/old", "old")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
		data []byte
	}{
		{"tools.txt", 0o644, r.ToolsTxt},
		{"bin/google", 0o755, r.Shims[0].Script},
		{"bin/old", 0o755, r.Shims[1].Script},
	} {
		st, err := os.Stat(filepath.Join(dir, f.path))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != f.mode {
			t.Errorf("%s mode %v, want %v", f.path, st.Mode().Perm(), f.mode)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, f.path)); !bytes.Equal(data, f.data) {
			t.Errorf("%s content differs", f.path)
		}
	}
	// A user's own file in bin stays; a stale shim goes.
	mine := filepath.Join(dir, "bin", "mine")
	if err := os.WriteFile(mine, []byte("#!/bin/sh\necho mine\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r2, err := Render(RenderInput{Specs: []*policy.Spec{googleSpec()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "bin"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "google mine" {
		t.Errorf("bin after the second render = %s, want google mine", got)
	}
	// A foreign file where a shim goes is not overwritten.
	r3, err := Render(RenderInput{Specs: []*policy.Spec{toolSpec("github://acme/mine", "mine")}})
	if err != nil {
		t.Fatal(err)
	}
	err = r3.WriteDir(dir)
	if !errors.Is(err, ErrWriteDir) || !strings.Contains(err.Error(), mine) || !strings.Contains(err.Error(), "not an Aileron shim") {
		t.Errorf("WriteDir over a foreign file: %v", err)
	}
	if data, _ := os.ReadFile(mine); string(data) != "#!/bin/sh\necho mine\n" {
		t.Errorf("foreign file changed: %q", data)
	}
}
