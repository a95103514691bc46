package policy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// suiteCase is one case of a JSON Schema Test Suite file.
type suiteCase struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// TestJSONSchemaSuite runs the cases of testdata/jsonschema-suite through
// the install path: each schema is property v of an input_schema, each
// datum the body {"v": datum}.
func TestJSONSchemaSuite(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "jsonschema-suite", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no suite files: %v", err)
	}
	ran := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var cases []suiteCase
		if err := json.Unmarshal(data, &cases); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range cases {
			name := strings.TrimSuffix(filepath.Base(file), ".json") + "/" + c.Description
			t.Run(name, func(t *testing.T) {
				op := schemaOp(t, `"method":"POST","path":"/s","input_schema":{"type":"object","properties":{"v":`+string(c.Schema)+`}}`)
				for _, tc := range c.Tests {
					err := op.CheckArguments(ArgumentValues{ContentType: "application/json", Body: []byte(`{"v":` + string(tc.Data) + `}`)})
					if (err == nil) != tc.Valid {
						t.Errorf("%s: valid = %v, want %v (%v)", tc.Description, err == nil, tc.Valid, err)
					}
					ran++
				}
			})
		}
	}
	if ran < 100 {
		t.Fatalf("ran only %d suite tests", ran)
	}
}
