package action

import (
	"go/doc/comment"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// TestPackageDocExampleParses keeps the manifest in the package comment
// valid.
func TestPackageDocExampleParses(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, l := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(l, "//"); ok {
			text.WriteString(strings.TrimPrefix(rest, " ") + "\n")
		}
	}
	d := new(comment.Parser).Parse(text.String())
	for _, b := range d.Content {
		if code, ok := b.(*comment.Code); ok && strings.HasPrefix(code.Text, "+++") {
			if _, err := Parse("doc.go", []byte(code.Text)); err != nil {
				t.Fatalf("package doc example: %v", err)
			}
			return
		}
	}
	t.Fatal("no manifest example in the package comment")
}

// TestToolsDocExampleLoads keeps the action example of docs/tools.md
// installable as written: in the Gmail test package at its version, it
// parses and every step resolves within its capabilities.
func TestToolsDocExampleLoads(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```toml\n+++\nname = \"send-email\"")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("no send-email action example in docs/tools.md")
	}
	specFile := filepath.Join("..", "policy", "testdata", "specs", "gmail.json")
	data, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := policy.ParseSpec(specFile, []byte(strings.Replace(string(data), `"version": "1.2.3"`, `"version": "1.0.0"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	file := filepath.Join(pkg, "actions", "send-email", ManifestFile)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("+++\nname = \"send-email\""+example), 0o644); err != nil {
		t.Fatal(err)
	}
	if ms, err := LoadPackage(pkg, spec); err != nil || len(ms) != 1 {
		t.Fatalf("docs/tools.md's action example: %d actions, %v", len(ms), err)
	}
}
