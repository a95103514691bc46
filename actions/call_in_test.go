package actions

import (
	"encoding/json"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// inSpec has a POST whose "dry_run" travels in the query and a GET whose
// "filter" travels in the body.
const inSpec = `{"schema_version":"aileron.connector.v1",
 "connector":{"fqn":"local://acme/in","version":"1.0.0"},
 "tools":[{"name":"t","operations":[
  {"name":"send","method":"POST","path":"/v1/send","hosts":["api.example.com"],
   "inputs":[{"name":"to","type":"string"},{"name":"dry_run","type":"boolean","in":"query"}]},
  {"name":"search","method":"GET","path":"/v1/search","hosts":["api.example.com"],
   "inputs":[{"name":"q","type":"string"},{"name":"filter","type":"object","in":"body"}]}]}]}`

// TestOperationCallHonoursIn checks a call puts each argument where its
// input's "in" says, so the check on the wire accepts the call it built.
func TestOperationCallHonoursIn(t *testing.T) {
	pol := opcallPolicy(t, inSpec)
	tests := []struct {
		op, args, url, body string
	}{
		{"send", `{"to":"a@example.com","dry_run":true}`, "https://api.example.com:443/v1/send?dry_run=true", `{"to":"a@example.com"}`},
		{"search", `{"q":"x","filter":{"k":1}}`, "https://api.example.com:443/v1/search?q=x", `{"filter":{"k":1}}`},
		{"search", `{"q":"x"}`, "https://api.example.com:443/v1/search?q=x", ``},
	}
	for _, tt := range tests {
		var args map[string]any
		if err := json.Unmarshal([]byte(tt.args), &args); err != nil {
			t.Fatal(err)
		}
		c, o, err := OperationCall(pol, "local://acme/in", "t", tt.op, args)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.op, tt.args, err)
		}
		if got := c.URL.String(); got != tt.url {
			t.Errorf("%s %s: URL %s, want %s", tt.op, tt.args, got, tt.url)
		}
		if string(c.Body) != tt.body {
			t.Errorf("%s %s: body %q, want %q", tt.op, tt.args, c.Body, tt.body)
		}
		v := policy.ArgumentValues{Query: c.URL.Query(), ContentType: c.Header.Get("Content-Type"), Body: c.Body}
		if err := o.CheckArguments(v); err != nil {
			t.Errorf("%s %s: the call built does not pass the check on the wire: %v", tt.op, tt.args, err)
		}
	}
}
