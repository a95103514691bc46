package action

import (
	"strings"
	"testing"
)

func TestShapeLimits(t *testing.T) {
	deep := func(open string, n int) string { return strings.Repeat(open, n) }
	tests := []struct {
		name  string
		extra string // appended to minimal
		msg   string // "" = accepted
	}{
		{"brackets in strings", "[execute.inputs]\na = \"" + deep("[{", 100) + "\"\nb = '" + deep("[", 100) + "'\n" +
			"c = \"\"\"\n" + deep("{", 100) + "\n\\\"\"\"\"\"\nd = '''" + deep("[", 100) + "'''\n", ""},
		{"brackets in comments", "# " + deep("[", 100) + "\n", ""},
		{"dots in values and quoted keys", "[execute.inputs]\nf = [" + strings.Repeat("1.5, ", 100) + "]\n\"" + strings.Repeat("a.", 100) + "\" = 1\n", ""},
		{"nesting at the limit", "[execute.inputs]\na = " + deep("[", maxNesting) + strings.Repeat("]", maxNesting) + "\n", ""},
		{"dotted key at the limit", "[execute.inputs]\n" + strings.Repeat("a.", maxKeyParts-1) + "b = 1\n", ""},
		{"nested arrays", "[execute.inputs]\na = " + deep("[", maxNesting+1) + "\n", "nest more than 32 levels deep on line 15"},
		{"nested inline tables", "[execute.inputs]\na = " + deep("{b=", maxNesting+1) + "\n", "nest more than 32"},
		{"long dotted key", "[execute.inputs]\n" + strings.Repeat("a.", maxKeyParts) + "b = 1\n", "more than 32 parts"},
		{"long dotted header", "[" + strings.Repeat("a.", maxKeyParts) + "b]\n", "more than 32 parts"},
		{"long dotted key in inline table", "[execute.inputs]\nx = [{a = 1}, {" + strings.Repeat("a.", maxKeyParts) + "b = 1}]\n", "more than 32 parts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("a.md", doc(minimal+tt.extra, ""))
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			ves := validationErrors(t, err)
			if len(ves) != 1 || ves[0].Rule != ruleTOML || !strings.Contains(ves[0].Message, tt.msg) {
				t.Fatalf("got %v, want one %s problem containing %q", err, ruleTOML, tt.msg)
			}
		})
	}
}

func TestProblemsAreBounded(t *testing.T) {
	_, err := Parse("a.md", doc(minimal+strings.Repeat("[[inputs]]\nname = \"x\"\n", 500), ""))
	ves := validationErrors(t, err)
	if len(ves) != maxProblems+1 || !strings.Contains(ves[maxProblems].Message, "more than 100 problems") {
		t.Fatalf("%d problems, last %v", len(ves), ves[len(ves)-1])
	}
}
