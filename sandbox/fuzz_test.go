package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aileronhq/aileron/policy"
)

// FuzzShellQuote: for any string a shell can hold (no NUL), the quoted form
// is one word that a real sh reads back byte for byte, running nothing.
func FuzzShellQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "it's", "''", `'\''`, "$(touch pwned)", "`touch pwned`", "a\nb\r\n", "\\", `"`,
		"${x}", "*", "~", "-n", "%s", "\xff\xfe", "'; touch pwned; '", "\t \v\f", "\u202e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			t.Skip("a shell cannot hold NUL; callers never quote it")
		}
		dir := t.TempDir()
		cmd := exec.Command("sh", "-c", "printf '%s' "+shellQuote(s)+"; cd .")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh failed on %q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("read back %q, want %q", out, s)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("quoting %q ran a command", s)
		}
	})
}

// FuzzRenderShim renders a spec tool from arbitrary names and texts. Render
// either refuses (with one of its sentinel errors) or produces a shim that
// is valid sh, prints help containing the cleaned summary, and runs nothing.
func FuzzRenderShim(f *testing.F) {
	f.Add("google", "gmail.messages.search", "Search Gmail messages", "github://acme/google", "q")
	f.Add("x", "op", "'; touch pwned; '", "github://a/b'$(touch.pwned)", "$(touch pwned)")
	f.Add("evil", "op", "`touch pwned`\n\x1b[2J", "github://a/b", "in\x00put")
	f.Add("a b", "op", "s", "github://a/b", "i")
	f.Add("t", "-op", "s", "github://a b", "i")
	f.Add("curl", "op", "s", "github://a/b", "i")
	f.Fuzz(func(t *testing.T, tool, op, summary, fqn, input string) {
		spec := &policy.Spec{
			Connector: policy.Connector{FQN: fqn, Version: "1.0.0"},
			Tools: []policy.Tool{{Name: tool, Description: summary, Operations: []policy.OperationSpec{{
				Name: op, Summary: summary, Description: summary, Method: "GET", Path: "/" + summary,
				Inputs: []policy.Input{{Name: input, Description: summary}},
			}}}},
		}
		r, err := Render(RenderInput{Specs: []*policy.Spec{spec}})
		if err != nil {
			if !errors.Is(err, ErrUnsafeName) && !errors.Is(err, ErrToolConflict) {
				t.Fatalf("error without a sentinel: %v", err)
			}
			return
		}
		if nameProblem(tool) != "" || nameProblem(op) != "" || fieldProblem(fqn) != "" {
			t.Fatalf("rendered unsafe names tool %q op %q fqn %q", tool, op, fqn)
		}
		dir := t.TempDir()
		shim := filepath.Join(dir, "shim")
		if err := os.WriteFile(shim, r.Shims[0].Script, 0o700); err != nil {
			t.Fatal(err)
		}
		cwd := t.TempDir()
		for _, args := range [][]string{{"--help"}, {op, "--help"}} {
			cmd := exec.Command("sh", append([]string{shim}, args...)...)
			cmd.Dir, cmd.Env = cwd, []string{"PATH=" + os.Getenv("PATH")}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%q: %v\n%s", args, err, r.Shims[0].Script)
			}
			if want := oneLine(summary); !strings.Contains(string(out), want) {
				t.Errorf("%q output lacks the summary %q:\n%s", args, want, out)
			}
			if !utf8.Valid(out) || strings.ContainsAny(string(out), "\x00\x1b\r") {
				t.Errorf("%q output holds invalid UTF-8 or control characters: %q", args, out)
			}
		}
		if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
			t.Errorf("the shim ran injected code: %s exists", entries[0].Name())
		}
	})
}
