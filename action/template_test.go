package action

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	args := map[string]any{
		"to": "a@example.com", "n": float64(3), "obj": map[string]any{"k": []any{"x", "y"}},
		"a.b": "dotted", "flag": true, "none": nil, "big": json.Number("12345678901234567890"),
	}
	steps := map[string]map[string]any{
		"issue": {"data": map[string]any{"id": "ENG-1", "n": float64(7), "labels": []any{map[string]any{"name": "bug"}}}},
	}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{"plain string", "hello", "hello"},
		{"dollar without brace", "costs $5 and $", "costs $5 and $"},
		{"escape", "literal $${args.to}", "literal ${args.to}"},
		{"whole string arg", "${args.to}", "a@example.com"},
		{"whole keeps number", "${args.n}", float64(3)},
		{"whole keeps object", "${args.obj}", map[string]any{"k": []any{"x", "y"}}},
		{"whole keeps bool", "${args.flag}", true},
		{"whole keeps null", "${args.none}", nil},
		{"field of arg", "${args.obj.k.1}", "y"},
		{"dotted arg name", "${args.a.b}", "dotted"},
		{"all args", "${args}", args},
		{"step field", "${issue.data.id}", "ENG-1"},
		{"step array index", "${issue.data.labels.0.name}", "bug"},
		{"whole step", "${issue}", steps["issue"]},
		{"inside string number", "n=${args.n}", "n=3"},
		{"inside string object", "o=${args.obj}", `o={"k":["x","y"]}`},
		{"inside string null and bool", "${args.none}/${args.flag}", "null/true"},
		{"inside string json.Number", "#${args.big}", "#12345678901234567890"},
		{"two refs", "${issue.data.id}: ${args.to}", "ENG-1: a@example.com"},
		{"non-string scalar", int64(4), int64(4)},
		{"nested", map[string]any{"a": []any{"${args.n}", map[string]any{"b": "x${issue.data.n}"}}, "c": 1.5},
			map[string]any{"a": []any{float64(3), map[string]any{"b": "x7"}}, "c": 1.5}},
		{"absent optional arg dropped from map", map[string]any{"to": "${args.to}", "cc": "${args.cc}"}, map[string]any{"to": "a@example.com"}},
		{"absent optional arg dropped from array", []any{"${args.cc}", "${args.to}"}, []any{"a@example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(tt.in, args, steps)
			if err != nil {
				t.Fatalf("Expand: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestExpandDoesNotModifyInput(t *testing.T) {
	in := map[string]any{"a": []any{"${args.x}"}, "b": "${args.missing}"}
	if _, err := Expand(in, map[string]any{"x": "y"}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{"${args.x}"}, "b": "${args.missing}"}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("input changed to %v", in)
	}
}

func TestExpandErrors(t *testing.T) {
	args := map[string]any{"s": "str", "arr": []any{1.0}}
	steps := map[string]map[string]any{"issue": {"id": "ENG-1", "title": "t"}}
	tests := []struct {
		name string
		in   any
		msg  []string
	}{
		{"unknown arg", "${args.nope}", []string{"${args.nope}", `without "nope"`}},
		{"unknown arg inside string", map[string]any{"k": "x ${args.nope}"}, []string{"${args.nope}", "at k"}},
		{"unknown step", "${other.id}", []string{"${other.id}", `step "other" has no output`}},
		{"missing field", map[string]any{"q": []any{"${issue.data.id}"}}, []string{"${issue.data.id}", "at q[0]", `issue has no field "data"`, `"id", "title"`}},
		{"field of a string", "${args.s.x}", []string{`args.s is a string, which has no field "x"`}},
		{"bad index", "${args.arr.1}", []string{"array of 1 elements", `"1" is not an index`}},
		{"unclosed", "${args.s", []string{"not closed"}},
		{"empty", "a${}", []string{"empty template"}},
		{"bad chars", "${args.s|x}", []string{`contains "|"`}},
		{"too long", "${" + strings.Repeat("a", maxRefLen+1) + "}", []string{"longer than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Expand(tt.in, args, steps)
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("error %v does not wrap ErrTemplate", err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestStepArgs(t *testing.T) {
	args := map[string]any{"id": "ENG-1", "body": "hi"}
	pass := Step{ID: "s"}
	got, err := pass.Args(args, nil)
	if err != nil || !reflect.DeepEqual(got, args) {
		t.Fatalf("pass-through: %v, %v", got, err)
	}
	got["id"] = "changed"
	if args["id"] != "ENG-1" {
		t.Fatal("pass-through returned the caller's map, not a copy")
	}
	empty := Step{ID: "s", Inputs: map[string]any{}}
	if got, err := empty.Args(args, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty inputs table: %v, %v", got, err)
	}
	tmpl := Step{ID: "s", Inputs: map[string]any{"id": "${prev.id}", "text": "${args.body}!"}}
	got, err = tmpl.Args(args, map[string]map[string]any{"prev": {"id": 9.0}})
	if want := map[string]any{"id": 9.0, "text": "hi!"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("templated: %v, %v; want %v", got, err, want)
	}
	if _, err := tmpl.Args(args, nil); !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), `step "s"`) {
		t.Fatalf("missing step output: %v", err)
	}
}

func TestPreviewText(t *testing.T) {
	m := mustParse(t, []byte(sendEmailManifest))
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"to": "a@example.com", "subject": "Hi"}, "Send Hi to a@example.com"},
		{map[string]any{"to": "a@example.com"}, "Send  to a@example.com"},
		{map[string]any{"to": 3.0, "subject": map[string]any{"x": 1.0}}, `Send {"x":1} to 3`},
	}
	for _, tt := range tests {
		got, err := m.PreviewText(tt.args)
		if err != nil || got != tt.want {
			t.Errorf("PreviewText(%v) = %q, %v; want %q", tt.args, got, err, tt.want)
		}
	}
	whole := &Manifest{Approval: Approval{Preview: "${args.n}"}}
	if got, err := whole.PreviewText(map[string]any{"n": 2.0}); err != nil || got != "2" {
		t.Errorf("whole-template preview = %q, %v", got, err)
	}
	if got, err := whole.PreviewText(nil); err != nil || got != "" {
		t.Errorf("whole-template preview of an absent arg = %q, %v", got, err)
	}
	if got, err := (&Manifest{}).PreviewText(nil); err != nil || got != "" {
		t.Errorf("no preview = %q, %v", got, err)
	}
}
