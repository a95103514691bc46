package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// TestDocsExamples keeps the examples of the docs installable as written:
// the manifest of docs/connectors.md parses and bounds the spec of
// docs/connector-spec.md.
func TestDocsExamples(t *testing.T) {
	block := func(file, start string) string {
		t.Helper()
		doc, err := os.ReadFile(filepath.Join("..", "docs", file))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(doc), start)
		body, _, closed := strings.Cut(rest, "```")
		if !ok || !closed {
			t.Fatalf("no %q example in docs/%s", start, file)
		}
		return body
	}
	m, err := Parse("docs/connectors.md", []byte(block("connectors.md", "```toml\n")))
	if err != nil {
		t.Fatalf("the manifest example of docs/connectors.md: %v", err)
	}
	spec, err := policy.ParseSpec("docs/connector-spec.md", []byte(block("connector-spec.md", "```json\n")))
	if err != nil {
		t.Fatalf("the spec example of docs/connector-spec.md: %v", err)
	}
	if err := m.Check(spec); err != nil {
		t.Fatalf("the docs' spec example reaches beyond their manifest example: %v", err)
	}
}
