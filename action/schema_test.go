package action

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// typesManifest declares one input per interesting type.
const typesManifest = minimal + `
[[inputs]]
name = "to"
type = "Email"
label = "To"
description = "Recipient."

[[inputs]]
name = "body"
label = "Message body"
multiline = true

[[inputs]]
name = "when"
type = "DateTime"
required = false

[[inputs]]
name = "id"
type = "ID!"

[[inputs]]
name = "count"
type = "Int"
required = false

[[inputs]]
name = "ratio"
type = "Float"
required = false

[[inputs]]
name = "dry_run"
type = "Boolean"
required = false

[[inputs]]
name = "variables"
type = "JSON"
required = false

[[inputs]]
name = "labels"
type = "[String!]"
required = false

[[inputs]]
name = "ids"
type = "array"
items_type = "integer"
required = false

[[inputs]]
name = "filter"
type = "IssueFilter"
description = "Linear filter."
required = false

[[inputs]]
name = "things"
type = "array"
items_type = "Thing"
required = false
`

func TestInputSchemaGolden(t *testing.T) {
	m := mustParse(t, doc(typesManifest, ""))
	got, err := json.MarshalIndent(m.InputSchema(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "schema.golden.json")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(want)) != string(got) {
		t.Fatalf("InputSchema differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", golden, got)
	}
}

func TestInputSchemaNoRequired(t *testing.T) {
	m := mustParse(t, doc(minimal+"[[inputs]]\nname = \"q\"\nrequired = false\n", ""))
	s := m.InputSchema()
	if _, ok := s["required"]; ok {
		t.Fatalf("schema has a required list with no required input: %v", s)
	}
	if s["additionalProperties"] != false || s["type"] != "object" {
		t.Fatalf("schema %v", s)
	}
	empty := mustParse(t, doc(minimal, "")).InputSchema()
	if props, ok := empty["properties"].(map[string]any); !ok || len(props) != 0 {
		t.Fatalf("no inputs: properties %v", empty["properties"])
	}
}

func TestInputSchemaSendEmail(t *testing.T) {
	m := mustParse(t, []byte(sendEmailManifest))
	s := m.InputSchema()
	body := s["properties"].(map[string]any)["body"].(map[string]any)
	if body["title"] != "Message body" || body["x-multiline"] != true || body["type"] != "string" {
		t.Fatalf("body property %v", body)
	}
	req, _ := json.Marshal(s["required"])
	if string(req) != `["to","subject","body"]` {
		t.Fatalf("required %s", req)
	}
}

func TestCheckArgs(t *testing.T) {
	m := mustParse(t, doc(typesManifest, ""))
	base := func(extra map[string]any) map[string]any {
		a := map[string]any{"to": "a@example.com", "body": "hi", "id": "X-1"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	tests := []struct {
		name string
		args map[string]any
		errs []string
	}{
		{"required only", base(nil), nil},
		{"all types", base(map[string]any{"when": "2024-01-01T00:00:00Z", "count": 3.0, "ratio": 0.5, "dry_run": false,
			"variables": map[string]any{"a": 1.0}, "labels": []any{"a", "b"}, "ids": []any{1.0, json.Number("2")},
			"filter": []any{"anything"}, "things": []any{1.0, "x"}}), nil},
		{"integer as json.Number", base(map[string]any{"count": json.Number("4")}), nil},
		{"null optional", base(map[string]any{"count": nil}), nil},
		{"missing required", map[string]any{"to": "a@example.com"}, []string{`missing required input "body"`, `missing required input "id"`}},
		{"null required", base(map[string]any{"body": nil}), []string{`missing required input "body"`}},
		{"missing required with description", map[string]any{"body": "b", "id": "i"}, []string{`missing required input "to" (Recipient.)`}},
		{"unknown", base(map[string]any{"bdy": "x"}), []string{`unknown input "bdy"; accepted inputs: "to", "body", "when", "id"`}},
		{"string mismatch", base(map[string]any{"to": 3.0}), []string{`input "to" must be a string (type "Email"), got a number`}},
		{"fractional integer", base(map[string]any{"count": 3.5}), []string{`input "count" must be an integer (type "Int"), got a number`}},
		{"number as string", base(map[string]any{"ratio": "0.5"}), []string{`input "ratio" must be a number`}},
		{"boolean", base(map[string]any{"dry_run": "true"}), []string{`must be a boolean`}},
		{"object", base(map[string]any{"variables": []any{}}), []string{`must be an object (type "JSON"), got an array`}},
		{"array", base(map[string]any{"labels": "a"}), []string{`must be an array (type "[String!]"), got a string`}},
		{"array element", base(map[string]any{"ids": []any{1.0, "2"}}), []string{`input "ids" element 1 must be an integer (items "integer"), got a string`}},
		{"bracket element", base(map[string]any{"labels": []any{"a", true}}), []string{`element 1 must be a string (items "String")`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.CheckArgs(tt.args)
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("CheckArgs: %v", err)
				}
				return
			}
			leaves := flatten(err)
			if len(leaves) != len(tt.errs) {
				t.Fatalf("%d errors, want %d: %v", len(leaves), len(tt.errs), err)
			}
			for i, want := range tt.errs {
				if !errors.Is(leaves[i], ErrInvalidArgs) || !strings.Contains(leaves[i].Error(), want) ||
					!strings.Contains(leaves[i].Error(), `action "get-issue"`) {
					t.Errorf("error %q: want ErrInvalidArgs naming the action and containing %q", leaves[i], want)
				}
			}
		})
	}
}

func TestJSONType(t *testing.T) {
	tests := []struct{ in, typ, format, elem string }{
		{"string", "string", "", ""}, {"String", "string", "", ""}, {"ID", "string", "", ""}, {"String!", "string", "", ""},
		{"DateTime", "string", "date-time", ""}, {"Date", "string", "date", ""}, {"URI", "string", "uri", ""},
		{"Email", "string", "email", ""}, {"integer", "integer", "", ""}, {"Int", "integer", "", ""},
		{"Integer", "integer", "", ""}, {"number", "number", "", ""}, {"Float", "number", "", ""},
		{"boolean", "boolean", "", ""}, {"Boolean", "boolean", "", ""}, {"object", "object", "", ""},
		{"JSON", "object", "", ""}, {"JSONObject", "object", "", ""}, {"array", "array", "", ""},
		{"[String]", "array", "", "String"}, {"[ID!]!", "array", "", "ID"}, {"IssueFilter", "", "", ""}, {"[", "", "", ""},
	}
	for _, tt := range tests {
		typ, format, elem := jsonType(tt.in)
		if typ != tt.typ || format != tt.format || elem != tt.elem {
			t.Errorf("jsonType(%q) = %q %q %q, want %q %q %q", tt.in, typ, format, elem, tt.typ, tt.format, tt.elem)
		}
	}
}
