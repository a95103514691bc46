package action

import (
	"go/doc/comment"
	"os"
	"strings"
	"testing"
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
