package sandbox

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

const notesFQN = "github://acme/notes"

// notesSpec has an operation with a whole input_schema and an output
// schema, one with per-input descriptions only, an internal operation, and
// a tool whose only operation is internal.
func notesSpec() *policy.Spec {
	input := `{"type":"object","properties":{
	  "to":{"type":"string","format":"email","pattern":"@example\\.com$","description":"Recipient"},
	  "count":{"type":"integer","minimum":1,"maximum":5},
	  "model":{"type":"string","enum":["a","b\u001b[31m"],"description":"Model \u202eto use"},
	  "tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":3},
	  "reply":{"type":["string","null"],"const":"x"}},
	 "required":["to","model"],"additionalProperties":false}`
	maxQ, one, fifty := int64(100), json.Number("1"), json.Number("50")
	return &policy.Spec{
		SchemaVersion: policy.SchemaVersion,
		Connector:     policy.Connector{FQN: notesFQN, Version: "1.0.0"},
		Tools: []policy.Tool{
			{Name: "notes", Operations: []policy.OperationSpec{
				{Name: "send", Summary: "Send a note", Method: "POST", Path: "/v1/notes", Hosts: []string{"api.example.com"},
					InputSchema:  json.RawMessage(input),
					OutputSchema: json.RawMessage(`{"type":"object","properties":{"thread":{"type":"string"},"id":{"type":"integer"}}}`)},
				{Name: "purge", Summary: "Purge everything", Method: "DELETE", Path: "/v1/notes", Hosts: []string{"api.example.com"},
					Visibility: policy.VisibilityInternal},
				{Name: "list", Summary: "List notes", Method: "GET", Path: "/v1/notes", Hosts: []string{"api.example.com"}},
				{Name: "search", Summary: "Search notes", Method: "GET", Path: "/v1/search", Hosts: []string{"api.example.com"},
					Inputs: []policy.Input{
						{Name: "q", Required: true, Description: "Query", Pattern: "^[a-z ]+$", MaxLength: &maxQ},
						{Name: "limit", Type: "integer", In: policy.InQuery, Minimum: &one, Maximum: &fifty},
						{Name: "sort", Enum: []json.RawMessage{json.RawMessage(`"new"`), json.RawMessage(`"old"`)}},
						{Name: "filter", In: policy.InBody},
					}},
			}},
			{Name: "vault", Operations: []policy.OperationSpec{
				{Name: "wipe", Method: "DELETE", Path: "/v1/vault", Hosts: []string{"api.example.com"}, Visibility: policy.VisibilityInternal},
			}},
		},
	}
}

// TestRenderLeavesOutInternalOperations: internal operations appear in no
// line, shim or help, and a tool with only internal ones has no command.
func TestRenderLeavesOutInternalOperations(t *testing.T) {
	r, err := Render(RenderInput{Specs: []*policy.Spec{notesSpec()}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.ToolsTxt), "notes "+notesFQN+" -- Aileron connector operations: send, list, search\n"; got != want {
		t.Errorf("tools.txt %q, want %q", got, want)
	}
	if len(r.Shims) != 1 || r.Shims[0].Name != "notes" {
		t.Fatalf("shims %v", r.Shims)
	}
	for _, s := range []string{"purge", "Purge", "wipe", "vault"} {
		if strings.Contains(string(r.Shims[0].Script), s) {
			t.Errorf("the shim mentions %q", s)
		}
	}
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{notesSpec()}})
	_, errOut, code := e.run("notes", "purge")
	if code != ShimExitUsage || !strings.Contains(errOut, `unknown operation "purge"`) || strings.Contains(strings.SplitN(errOut, "\n", 2)[1], "purge") {
		t.Errorf("notes purge: exit %d: %s", code, errOut)
	}
	if n := len(e.daemon.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestSpecShimSchemaHelp: OP --help shows each input's constraints from the
// effective schema and the output fields, escaped like all spec text.
func TestSpecShimSchemaHelp(t *testing.T) {
	e := newShimEnv(t, RenderInput{Specs: []*policy.Spec{notesSpec()}})
	out, errOut, code := e.run("notes", "send", "--help")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := `send: Send a note
  Request:  POST https://api.example.com/v1/notes
  Approval: not required
  Inputs (sent as a JSON body; {name} in the path takes the input of that name):
    to (string, required, format email, pattern @example\.com$): Recipient
    count (integer, optional, >= 1, <= 5)
    model (string, required, one of "a" | "b\u001b[31m"): Model to use
    tags (array of string, optional, at most 3 items, each at most 10 characters)
    reply (string or null, optional, exactly "x")
    (no other input is accepted)
  Output:   id (integer), thread (string)
  Run:      notes send --args '{"model":"a","to":"…"}' [--json]
`
	if out != want {
		t.Errorf("notes send --help:\n%s\nwant:\n%s", out, want)
	}
	out, _, _ = e.run("notes", "search", "--help")
	want = `search: Search notes
  Request:  GET https://api.example.com/v1/search
  Approval: not required
  Inputs (sent as query parameters; {name} in the path takes the input of that name):
    q (string, required, pattern ^[a-z ]+$, at most 100 characters): Query
    limit (integer, optional, >= 1, <= 50)
    sort (string, optional, one of "new" | "old")
    filter (string, optional)
    (filter is sent in a JSON body)
  Run:      notes search --args '{"q":"…"}' [--json]
`
	if out != want {
		t.Errorf("notes search --help:\n%s\nwant:\n%s", out, want)
	}
	out, _, _ = e.run("notes", "list", "--help")
	if !strings.Contains(out, "  Inputs:   none\n") || strings.Contains(out, "Output:") {
		t.Errorf("notes list --help:\n%s", out)
	}
	out, _, _ = e.run("notes", "--help")
	if !strings.Contains(out, "count (integer, optional, >= 1, <= 5)") || strings.Contains(out, "purge") {
		t.Errorf("notes --help:\n%s", out)
	}
}

// TestExampleFromSchemaWithinLowerBound checks that the Run line's example
// does not propose a number below the property's lower bound.
func TestExampleFromSchemaWithinLowerBound(t *testing.T) {
	tests := []struct{ schema, want string }{
		{`{"properties":{"n":{"type":"integer"}},"required":["n"]}`, `{"n":0}`},
		{`{"properties":{"n":{"type":"integer","minimum":1,"maximum":4096}},"required":["n"]}`, `{"n":1}`},
		{`{"properties":{"n":{"type":"integer","exclusiveMinimum":0}},"required":["n"]}`, `{"n":1}`},
		{`{"properties":{"r":{"type":"number","minimum":0.5}},"required":["r"]}`, `{"r":0.5}`},
		{`{"properties":{"m":{"enum":[3,4]}},"required":["m"]}`, `{"m":3}`},
	}
	for _, tc := range tests {
		if got := exampleFromSchema(decodeSchema(json.RawMessage(tc.schema))); got != tc.want {
			t.Errorf("exampleFromSchema(%s) = %s, want %s", tc.schema, got, tc.want)
		}
	}
}
