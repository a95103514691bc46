package policy

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectorSpecDocArguments keeps docs/connector-spec.md's Arguments
// section true: its inputs example installs, and the refusals it shows are
// the ones CheckArguments gives.
func TestConnectorSpecDocArguments(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "connector-spec.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	_, section, ok := strings.Cut(doc, "\n## Arguments\n")
	if !ok {
		t.Fatal("docs/connector-spec.md has no Arguments section")
	}
	_, example, ok := strings.Cut(section, "```json\n")
	example, _, ok2 := strings.Cut(example, "```")
	if !ok || !ok2 || !strings.HasPrefix(example, `"inputs": [`) {
		t.Fatalf("no inputs example in the Arguments section")
	}
	op := schemaOp(t, `"method":"POST","path":"/m",`+example)
	list := schemaOp(t, `"method":"POST","path":"/l","input_schema":{"type":"object","properties":{
 "items":{"type":"array","items":{"type":"object","required":["name"]}}},"additionalProperties":false}`)
	checks := []struct {
		op    *Operation
		query string
		body  string
	}{
		{op, "", `{"to":"x@evil.com"}`},
		{op, "limit=101", `{"to":"a@example.com"}`},
		{list, "", `{"items":[{"name":"a"},{"name":"b"},{}]}`},
		{list, "", `{"bcc":"x"}`},
	}
	for _, c := range checks {
		q, _ := url.ParseQuery(c.query)
		err := c.op.CheckArguments(ArgumentValues{Query: q, ContentType: "application/json", Body: []byte(c.body)})
		if err == nil {
			t.Fatalf("%s %s fits; the doc shows it refused", c.query, c.body)
		}
		if !strings.Contains(section, "\n"+err.Error()+"\n") {
			t.Errorf("the doc does not show the refusal %q", err.Error())
		}
	}
}
