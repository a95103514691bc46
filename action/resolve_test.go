package action

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// multiSpec has operation "get" in two tools and "only" in one.
func multiSpec() *policy.Spec {
	return &policy.Spec{
		SchemaVersion: policy.SchemaVersion,
		Connector:     policy.Connector{FQN: linearFQN, Version: "1.0.0"},
		Tools: []policy.Tool{
			{Name: "issues", Operations: []policy.OperationSpec{{Name: "get"}, {Name: "only"}}},
			{Name: "users", Operations: []policy.OperationSpec{{Name: "get"}, {Name: "list"}}},
		},
	}
}

func TestResolveStep(t *testing.T) {
	spec := multiSpec()
	tests := []struct {
		name     string
		spec     *policy.Spec
		step     Step
		wantTool string
		wantOp   *policy.OperationSpec
		msg      []string
	}{
		{"unique op", spec, Step{ID: "s", Connector: linearFQN, Op: "only"}, "issues", &spec.Tools[0].Operations[1], nil},
		{"unique op in other tool", spec, Step{ID: "s", Connector: linearFQN, Op: "list"}, "users", &spec.Tools[1].Operations[1], nil},
		{"ambiguous op with tool", spec, Step{ID: "s", Connector: linearFQN, Op: "get", Tool: "users"}, "users", &spec.Tools[1].Operations[0], nil},
		{"ambiguous op", spec, Step{ID: "s", Connector: linearFQN, Op: "get"}, "", nil,
			[]string{`step "s"`, `operation "get" exists in several tools ("issues", "users")`, `add tool = "issues"`}},
		{"wrong connector", spec, Step{ID: "s", Connector: googleFQN, Op: "get"}, "", nil,
			[]string{`connector "` + googleFQN + `"`, `"` + linearFQN + `"`}},
		{"unknown op", spec, Step{ID: "s", Connector: linearFQN, Op: "gett"}, "", nil,
			[]string{`no operation "gett"`, `available operations: "get", "list", "only"`}},
		{"no case folding", spec, Step{ID: "s", Connector: linearFQN, Op: "Only"}, "", nil, []string{`no operation "Only"`}},
		{"op not in named tool", spec, Step{ID: "s", Connector: linearFQN, Op: "list", Tool: "issues"}, "", nil,
			[]string{`tool "issues" has no operation "list"`, `available operations: "get", "only"`}},
		{"unknown tool", spec, Step{ID: "s", Connector: linearFQN, Op: "get", Tool: "repos"}, "", nil,
			[]string{`no tool "repos"`, `"issues", "users"`}},
		{"nil spec", nil, Step{ID: "s", Connector: linearFQN, Op: "get"}, "", nil, []string{"no connector spec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, op, err := ResolveStep(tt.spec, tt.step)
			if tt.msg == nil {
				if err != nil || tool != tt.wantTool || op != tt.wantOp {
					t.Fatalf("got %q %p %v, want %q %p", tool, op, err, tt.wantTool, tt.wantOp)
				}
				return
			}
			if !errors.Is(err, ErrUnresolved) || tool != "" || op != nil {
				t.Fatalf("got %q %v %v, want an ErrUnresolved", tool, op, err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

// writePackage creates dir/actions/<name>/action.md for each entry.
func writePackage(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadPackage(t *testing.T) {
	spec := loadSpec(t, filepath.Join("testdata", "linear"))
	good := string(doc(pinned, "Gets an issue.\n"))
	named := func(name, op string) string {
		return strings.Replace(strings.Replace(good, `"get-issue"`, `"`+name+`"`, 1), `op = "get-issue"`, `op = "`+op+`"`, 1)
	}
	tests := []struct {
		name  string
		files map[string]string
		want  []string // action names, when no error
		errs  []string // substrings, one per expected problem
	}{
		{"no actions dir", map[string]string{"README.md": "x"}, nil, nil},
		{"empty actions dir", map[string]string{"actions/.keep": ""}, nil, nil},
		{"two actions sorted", map[string]string{
			"actions/get-issue/action.md": good,
			"actions/comment/action.md":   named("comment", "comment-create"),
			"actions/notes.txt":           "ignored",
		}, []string{"comment", "get-issue"}, nil},
		{"all problems at once", map[string]string{
			"actions/get-issue/action.md": good,
			"actions/wrong-dir/action.md": good,
			"actions/bad-op/action.md":    named("bad-op", "nope"),
			"actions/broken/action.md":    "no front matter",
			"actions/empty/README.md":     "",
			"actions/stray.md":            good,
		}, nil, []string{
			`bad-op/action.md: execute[0]: step "issue": connector "` + linearFQN + `" has no operation "nope"; available operations: "comment-create", "get-issue"`,
			`broken/action.md: the first line is "no front matter"`,
			"empty/action.md: missing",
			"stray.md: action manifests live in actions/<name>/action.md; move it to actions/stray/action.md",
			`wrong-dir/action.md: name: name "get-issue" differs from its directory "wrong-dir"`,
		}},
		{"actions is a file", map[string]string{"actions": "x"}, nil, []string{"actions is not a directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePackage(t, tt.files)
			ms, err := LoadPackage(dir, spec)
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("LoadPackage: %v", err)
				}
				var names []string
				for _, m := range ms {
					names = append(names, m.Name)
				}
				if strings.Join(names, ",") != strings.Join(tt.want, ",") {
					t.Fatalf("actions %v, want %v", names, tt.want)
				}
				return
			}
			if ms != nil {
				t.Fatalf("manifests returned with an error: %v", ms)
			}
			ves := validationErrors(t, err)
			if len(ves) != len(tt.errs) {
				t.Fatalf("%d problems, want %d:\n%v", len(ves), len(tt.errs), err)
			}
			for i, want := range tt.errs {
				if !strings.Contains(ves[i].Error(), want) {
					t.Errorf("problem %d = %q, want it to contain %q", i, ves[i], want)
				}
			}
		})
	}
}

func TestLoadPackageUnresolvedWrapsErrUnresolved(t *testing.T) {
	spec := loadSpec(t, filepath.Join("testdata", "linear"))
	good := string(doc(pinned, ""))
	dir := writePackage(t, map[string]string{"actions/get-issue/action.md": strings.Replace(good, `op = "get-issue"`, `op = "x"`, 1)})
	_, err := LoadPackage(dir, spec)
	if !errors.Is(err, ErrUnresolved) || !errors.Is(err, ErrInvalidAction) {
		t.Fatalf("error %v does not wrap ErrUnresolved and ErrInvalidAction", err)
	}
}

func TestLoadPackageRefusesSymlinks(t *testing.T) {
	spec := loadSpec(t, filepath.Join("testdata", "linear"))
	dir := writePackage(t, map[string]string{"elsewhere/get-issue/action.md": string(doc(pinned, "")), "actions/real/x": ""})
	if err := os.Symlink(filepath.Join(dir, "elsewhere", "get-issue"), filepath.Join(dir, "actions", "get-issue")); err != nil {
		t.Skipf("symlinks unsupported: %v", err)
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere", "get-issue", "action.md"), filepath.Join(dir, "actions", "real", "action.md")); err != nil {
		t.Fatal(err)
	}
	_, err := LoadPackage(dir, spec)
	ves := validationErrors(t, err)
	if len(ves) != 2 || !strings.Contains(ves[0].Error(), "symbolic link") || !strings.Contains(ves[1].Error(), "symbolic links are refused") {
		t.Fatalf("want both symlinks refused, got %v", err)
	}
}
