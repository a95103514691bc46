package action

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadPackageOutputFields(t *testing.T) {
	spec := loadSpec(t, filepath.Join("testdata", "linear"))
	spec.Tools[0].Operations[0].OutputSchema = json.RawMessage(`{"type":"object","properties":{
 "id":{"type":"string"},"title":{"type":"string"},
 "team":{"type":"object","properties":{"key":{"type":"string"}},"additionalProperties":true},
 "labels":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}`)
	// Two steps: get the issue, then comment on it using its output.
	twoSteps := func(ref string) string {
		return pinned + `inputs = { id = "${args.id}" }

[[execute]]
id = "comment"
connector = "` + linearFQN + `"
op = "comment-create"
inputs = { id = "${issue.id}", body = "Re: ` + ref + `" }

[[inputs]]
name = "id"
type = "string"
`
	}
	tests := []struct {
		name, ref string
		err       string // "" when the package loads
	}{
		{"listed field", "${issue.title}", ""},
		{"nested field", "${issue.team.key}", ""},
		{"array item field", "${issue.labels.0.name}", ""},
		{"whole output", "${issue}", ""},
		{"unlisted field", "${issue.titel}", `execute[1].inputs.body: action "get-issue", step "comment": ${issue.titel} names field "titel" of step "issue", which the output_schema of operation "get-issue" does not list`},
		{"additionalProperties does not list a field", "${issue.team.name}", `names field "team.name"`},
		{"unlisted item field", "${issue.labels.0.color}", `names field "labels.0.color"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePackage(t, map[string]string{"actions/get-issue/action.md": string(doc(twoSteps(tt.ref), ""))})
			ms, err := LoadPackage(dir, spec)
			if tt.err == "" {
				if err != nil || len(ms) != 1 {
					t.Fatalf("LoadPackage: %v", err)
				}
				return
			}
			ves := validationErrors(t, err)
			if len(ves) != 1 || ves[0].Rule != ruleOutputField || !strings.Contains(ves[0].Error(), tt.err) {
				t.Fatalf("want one %s problem containing %q, got %v", ruleOutputField, tt.err, err)
			}
		})
	}
	// Without an output_schema nothing is checked.
	spec.Tools[0].Operations[0].OutputSchema = nil
	dir := writePackage(t, map[string]string{"actions/get-issue/action.md": string(doc(twoSteps("${issue.titel}"), ""))})
	if _, err := LoadPackage(dir, spec); err != nil {
		t.Fatalf("LoadPackage without output_schema: %v", err)
	}
}
