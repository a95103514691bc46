package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// schemaSpec returns a spec document with one operation whose fields are
// opJSON (a JSON object's members, without braces).
func schemaSpec(opJSON string) []byte {
	return []byte(`{"schema_version":"aileron.connector.v1","connector":{"fqn":"github://acme/schema-test","version":"1.0.0"},
"tools":[{"name":"t","operations":[{"name":"op","hosts":["api.example.com"],` + opJSON + `}]}]}`)
}

// schemaOp parses and compiles a one-operation spec and returns its
// operation.
func schemaOp(t testing.TB, opJSON string) *Operation {
	t.Helper()
	s, err := ParseSpec("schema.json", schemaSpec(opJSON))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	p, errs := Compile([]Source{{Spec: s, Origin: "schema.json"}}, nil)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	op, ok := p.Lookup("github://acme/schema-test", "t", "op")
	if !ok {
		t.Fatal("operation not found")
	}
	return op
}

// argCase is one request checked against one schema: Field and Rule are
// the expected ArgumentError's, both empty when the request fits.
type argCase struct {
	name  string
	path  map[string]string
	query string
	ctype string
	body  string
	field string
	rule  string
}

func runArgCases(t *testing.T, op *Operation, cases []argCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			ct := c.ctype
			if ct == "" && c.body != "" {
				ct = "application/json"
			}
			err = op.CheckArguments(ArgumentValues{Path: c.path, Query: q, ContentType: ct, Body: []byte(c.body)})
			checkArgErr(t, err, c.field, c.rule)
		})
	}
}

func checkArgErr(t testing.TB, err error, field, rule string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("want the arguments to fit, got %v", err)
		}
		return
	}
	var ae *ArgumentError
	if !errors.As(err, &ae) {
		t.Fatalf("want an *ArgumentError at %s (%s), got %v", field, rule, err)
	}
	if ae.Field != field || ae.Rule != rule {
		t.Fatalf("want %s (%s), got %s (%s): %s", field, rule, ae.Field, ae.Rule, ae.Message)
	}
	if !strings.Contains(ae.Message, field) || !strings.HasSuffix(ae.Message, "("+rule+")") {
		t.Fatalf("message %q does not name the field %s and end with the rule (%s)", ae.Message, field, rule)
	}
}

func TestCheckArgumentsInputs(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/v1/mail/{box}",
"inputs":[
 {"name":"box","type":"integer","minimum":1,"maximum":9},
 {"name":"to","required":true,"pattern":"^[^@]+@example\\.com$"},
 {"name":"cc","format":"email"},
 {"name":"subject","minLength":1,"maxLength":10},
 {"name":"model","enum":["small","large"]},
 {"name":"kind","const":"mail"},
 {"name":"max_tokens","type":"integer","in":"query","exclusiveMinimum":0,"exclusiveMaximum":4097},
 {"name":"ratio","type":"number","in":"query"},
 {"name":"dry","type":"boolean","in":"query"},
 {"name":"tags","type":"array","in":"query","items":{"type":"string","maxLength":3},"maxItems":2},
 {"name":"attachments","type":"array","minItems":1,"items":{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]+$"}},"required":["name"]}},
 {"name":"meta","type":"object","properties":{"lang":{"enum":["en","de"]}},"required":["lang"],"additionalProperties":false},
 {"name":"when","format":"date-time"},
 {"name":"id","format":"uuid"}
]`)
	if !op.ChecksBody() {
		t.Fatal("ChecksBody is false for an operation with body inputs")
	}
	ok := `{"to":"a@example.com"}`
	cases := []argCase{
		{name: "fits", path: map[string]string{"box": "3"}, body: ok},
		{name: "fits all", path: map[string]string{"box": "3"}, query: "max_tokens=4096&ratio=0.5&dry=true&tags=a&tags=bc",
			body: `{"to":"a@example.com","cc":"b@x.org","subject":"hi","model":"large","kind":"mail","attachments":[{"name":"x"}],"meta":{"lang":"en"},"when":"2024-01-02T03:04:05Z","id":"123e4567-e89b-12d3-a456-426614174000"}`},
		{name: "undeclared fields allowed", body: `{"to":"a@example.com","other":{"x":1}}`, query: "free=1"},
		{name: "path integer type", path: map[string]string{"box": "x"}, body: ok, field: "path.box", rule: "type"},
		{name: "path maximum", path: map[string]string{"box": "10"}, body: ok, field: "path.box", rule: "maximum"},
		{name: "path minimum", path: map[string]string{"box": "0"}, body: ok, field: "path.box", rule: "minimum"},
		{name: "required", body: `{}`, field: "body.to", rule: "required"},
		{name: "required no body", field: "body.to", rule: "required"},
		{name: "pattern", body: `{"to":"a@evil.com"}`, field: "body.to", rule: "pattern"},
		{name: "type of body field", body: `{"to":5}`, field: "body.to", rule: "type"},
		{name: "format email", body: `{"to":"a@example.com","cc":"nope"}`, field: "body.cc", rule: "format"},
		{name: "format date-time", body: `{"to":"a@example.com","when":"yesterday"}`, field: "body.when", rule: "format"},
		{name: "format uuid", body: `{"to":"a@example.com","id":"123"}`, field: "body.id", rule: "format"},
		{name: "minLength", body: `{"to":"a@example.com","subject":""}`, field: "body.subject", rule: "minLength"},
		{name: "maxLength", body: `{"to":"a@example.com","subject":"01234567890"}`, field: "body.subject", rule: "maxLength"},
		{name: "enum", body: `{"to":"a@example.com","model":"huge"}`, field: "body.model", rule: "enum"},
		{name: "const", body: `{"to":"a@example.com","kind":"memo"}`, field: "body.kind", rule: "const"},
		{name: "exclusiveMaximum", query: "max_tokens=4097", body: ok, field: "query.max_tokens", rule: "exclusiveMaximum"},
		{name: "exclusiveMinimum", query: "max_tokens=0", body: ok, field: "query.max_tokens", rule: "exclusiveMinimum"},
		{name: "query integer text", query: "max_tokens=many", body: ok, field: "query.max_tokens", rule: "type"},
		{name: "query integer fraction", query: "max_tokens=1.5", body: ok, field: "query.max_tokens", rule: "type"},
		{name: "query number", query: "ratio=x", body: ok, field: "query.ratio", rule: "type"},
		{name: "query boolean", query: "dry=yes", body: ok, field: "query.dry", rule: "type"},
		{name: "query repeated scalar", query: "dry=true&dry=false", body: ok, field: "query.dry", rule: "type"},
		{name: "query repeated array fits", query: "tags=a&tags=b", body: ok},
		{name: "query array maxItems", query: "tags=a&tags=b&tags=c", body: ok, field: "query.tags", rule: "maxItems"},
		{name: "query array item", query: "tags=abcd", body: ok, field: "query.tags[0]", rule: "maxLength"},
		{name: "nested array item", body: `{"to":"a@example.com","attachments":[{"name":"a"},{"name":"b"},{"name":"C"}]}`, field: "body.attachments[2].name", rule: "pattern"},
		{name: "nested required", body: `{"to":"a@example.com","attachments":[{}]}`, field: "body.attachments[0].name", rule: "required"},
		{name: "minItems", body: `{"to":"a@example.com","attachments":[]}`, field: "body.attachments", rule: "minItems"},
		{name: "object additionalProperties", body: `{"to":"a@example.com","meta":{"lang":"en","x":1}}`, field: "body.meta.x", rule: "additionalProperties"},
		{name: "object required", body: `{"to":"a@example.com","meta":{}}`, field: "body.meta.lang", rule: "required"},
		{name: "object enum", body: `{"to":"a@example.com","meta":{"lang":"fr"}}`, field: "body.meta.lang", rule: "enum"},
		{name: "in: query field sent in body", body: `{"to":"a@example.com","max_tokens":5}`, field: "body.max_tokens", rule: "in"},
		{name: "same name twice", query: "to=a@example.com", body: ok, field: "body.to", rule: "duplicate"},
		{name: "query name equal but for case to a declared one", query: "MAX_TOKENS=99999", body: ok, field: "query.MAX_TOKENS", rule: "name"},
		{name: "query name and its case variant", query: "max_tokens=1&MAX_TOKENS=99999", body: ok, field: "query.MAX_TOKENS", rule: "name"},
		{name: "query name with brackets", query: "max_tokens[]=99999", body: ok, field: `query["max_tokens[]"]`, rule: "name"},
		{name: "query name with an index", query: "max_tokens%5B0%5D=99999", body: ok, field: `query["max_tokens[0]"]`, rule: "name"},
		{name: "query name with a dot for an underscore", query: "max.tokens=99999", body: ok, field: `query["max.tokens"]`, rule: "name"},
		{name: "undeclared query names equal but for case", query: "free=1&FREE=2", body: ok, field: "query.free", rule: "duplicate"},
		{name: "query name a case variant of a body field", query: "TO=b%40evil.com", body: ok, field: "query.TO", rule: "name"},
		{name: "json key equal but for case to a declared one", body: `{"to":"a@example.com","CC":"nope"}`, field: "body.CC", rule: "name"},
		{name: "nested json key equal but for case to a declared one", body: `{"to":"a@example.com","attachments":[{"NAME":"B"}]}`, field: "body.attachments[0].NAME", rule: "name"},
		{name: "form name with brackets", ctype: "application/x-www-form-urlencoded", body: "to=a%40example.com&cc[]=nope", field: `body["cc[]"]`, rule: "name"},
		{name: "form body", ctype: "application/x-www-form-urlencoded", body: "to=a%40example.com&subject=hi"},
		{name: "form body pattern", ctype: "application/x-www-form-urlencoded", body: "to=a%40evil.com", field: "body.to", rule: "pattern"},
		{name: "form that is JSON", ctype: "application/x-www-form-urlencoded", body: `{"x":"&to=a%40example.com&","to":"b@evil.com"}`, field: "body", rule: "content_type"},
		{name: "form that is JSON after a BOM and space", ctype: "application/x-www-form-urlencoded", body: "\xef\xbb\xbf \n{\"x\":\"&to=a%40example.com&\",\"to\":\"b@evil.com\"}", field: "body", rule: "content_type"},
		{name: "json labelled as a form (curl -d)", ctype: "application/x-www-form-urlencoded", body: `{"to":"a@example.com"}`, field: "body", rule: "content_type"},
		{name: "json array labelled as a form", ctype: "application/x-www-form-urlencoded", body: " [1]\n", field: "body", rule: "content_type"},
		{name: "form repeated scalar", ctype: "application/x-www-form-urlencoded", body: "to=a%40example.com&to=b%40example.com", field: "body.to", rule: "type"},
		{name: "json charset", ctype: "application/json; charset=utf-8", body: ok},
		{name: "form charset", ctype: "application/x-www-form-urlencoded; charset=UTF-8", body: "to=a%40example.com"},
		{name: "json other charset", ctype: "application/json; charset=iso-8859-1", body: ok, field: "body", rule: "content_type"},
		{name: "other media type", ctype: "text/plain", body: ok, field: "body", rule: "content_type"},
		{name: "no media type", ctype: "-", body: ok, field: "body", rule: "content_type"},
		{name: "invalid json", body: `{"to":`, field: "body", rule: "json"},
		{name: "trailing data", body: ok + ok, field: "body", rule: "json"},
		{name: "not an object", body: `["to"]`, field: "body", rule: "type"},
		{name: "duplicate json key", body: `{"to":"a@example.com","to":"b@evil.com"}`, field: "body.to", rule: "duplicate"},
		{name: "json keys equal but for case", body: `{"to":"a@example.com","TO":"b@evil.com"}`, field: "body.TO", rule: "duplicate"},
		{name: "json keys equal under Unicode folding", body: `{"to":"a@example.com","meta":{"lang":"en","Kind":1,"kind":2}}`, field: "body.meta.kind", rule: "duplicate"},
		{name: "huge exponent", body: `{"to":"a@example.com","n":1e999999}`, field: "body.n", rule: "number"},
		{name: "json not utf-8", body: "{\"to\":\"a\xff@example.com\"}", field: "body", rule: "json"},
		{name: "path not utf-8", path: map[string]string{"box": "\xff"}, body: ok, field: "path.box", rule: "encoding"},
		{name: "query not utf-8", query: "free=%ff", body: ok, field: "query.free", rule: "encoding"},
		{name: "form not utf-8", ctype: "application/x-www-form-urlencoded", body: "to=a%40example.com&x=%C3", field: "body.x", rule: "encoding"},
	}
	for i := range cases {
		if cases[i].path == nil { // a matched request always has its path variable
			cases[i].path = map[string]string{"box": "3"}
		}
	}
	runArgCases(t, op, cases)
}

func TestCheckArgumentsMessageNeverQuotesValue(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/m","inputs":[{"name":"to","pattern":"^[^@]+@example\\.com$"},{"name":"n","type":"integer","maximum":5},{"name":"m","enum":["a"]},{"name":"e","format":"email"}]`)
	const secret = "SECRET-VALUE-7f3a"
	for _, body := range []string{
		`{"to":"` + secret + `@evil.com"}`, `{"n":"` + secret + `"}`, `{"m":"` + secret + `"}`, `{"e":"` + secret + `"}`, `{"to":"` + secret,
	} {
		err := op.CheckArguments(ArgumentValues{ContentType: "application/json", Body: []byte(body)})
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("body %s: error %v is nil or quotes the value", body, err)
		}
	}
	err := op.CheckArguments(ArgumentValues{ContentType: "application/json", Body: []byte(`{"to":"x@evil.com"}`)})
	want := `argument body.to does not fit its schema: it must match the pattern ^[^@]+@example\.com$ (pattern)`
	if err == nil || err.Error() != want {
		t.Errorf("message = %v, want %s", err, want)
	}
}

func TestCheckArgumentsInputSchema(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/v1/{id}","input_schema":{
 "$schema":"https://json-schema.org/draft/2020-12/schema",
 "type":"object",
 "properties":{
  "id":{"type":"integer"},
  "limit":{"type":"integer","maximum":100},
  "to":{"$ref":"#/$defs/addr"},
  "items":{"type":"array","maxItems":3,"uniqueItems":true,"items":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}
 },
 "required":["to"],
 "additionalProperties":false,
 "$defs":{"addr":{"type":"string","pattern":"@example\\.com$"}}
}`)
	if !op.ChecksBody() {
		t.Fatal("ChecksBody is false for an input_schema of a POST")
	}
	cases := []argCase{
		{name: "fits", path: map[string]string{"id": "7"}, query: "limit=100", body: `{"to":"a@example.com","items":[{"name":"a"}]}`},
		{name: "undeclared refused", body: `{"to":"a@example.com","bcc":"x"}`, field: "body.bcc", rule: "additionalProperties"},
		{name: "undeclared query refused", query: "debug=1", body: `{"to":"a@example.com"}`, field: "query.debug", rule: "additionalProperties"},
		{name: "ref pattern", body: `{"to":"a@evil.com"}`, field: "body.to", rule: "pattern"},
		{name: "query maximum", query: "limit=101", body: `{"to":"a@example.com"}`, field: "query.limit", rule: "maximum"},
		{name: "path type", path: map[string]string{"id": "x"}, body: `{"to":"a@example.com"}`, field: "path.id", rule: "type"},
		{name: "uniqueItems", body: `{"to":"a@example.com","items":[{"name":"a"},{"name":"a"}]}`, field: "body.items", rule: "uniqueItems"},
		{name: "deep required", body: `{"to":"a@example.com","items":[{"name":"a"},{}]}`, field: "body.items[1].name", rule: "required"},
		{name: "missing", body: `{}`, field: "body.to", rule: "required"},
	}
	runArgCases(t, op, cases)
	var schema map[string]any
	if err := json.Unmarshal(op.InputSchema(), &schema); err != nil || schema["additionalProperties"] != false {
		t.Fatalf("InputSchema is not the input_schema as given: %s", op.InputSchema())
	}
}

func TestCheckArgumentsCredentialQueryIsNoArgument(t *testing.T) {
	op := schemaOp(t, `"method":"GET","path":"/v1","credential":{"kind":"api_key","query":"key"},
"input_schema":{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`)
	runArgCases(t, op, []argCase{
		{name: "credential parameter", query: "key=placeholder&q=x"},
		{name: "other parameter", query: "key=placeholder&z=x", field: "query.z", rule: "additionalProperties"},
	})
	if op.ChecksBody() {
		t.Fatal("ChecksBody is true for a GET")
	}
}

func TestNoArgumentsChecksNothing(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/v1"`)
	if op.ChecksBody() || op.InputSchema() != nil {
		t.Fatal("an operation without inputs checks its body or has an input schema")
	}
	v := ArgumentValues{Query: url.Values{"a": {"1", "2"}}, ContentType: "text/plain", Body: []byte("{")}
	if err := op.CheckArguments(v); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = op.CheckArguments(v) }); n != 0 {
		t.Fatalf("CheckArguments of an operation without inputs allocates %v times", n)
	}
}

func TestInputSchemaFromInputs(t *testing.T) {
	op := schemaOp(t, `"method":"GET","path":"/v1/{id}","inputs":[{"name":"id","required":true},{"name":"limit","type":"integer","maximum":5,"description":"at most"}]`)
	want := `{"properties":{"id":{"type":"string"},"limit":{"description":"at most","maximum":5,"type":"integer"}},"required":["id"],"type":"object"}`
	if got := string(op.InputSchema()); got != want {
		t.Fatalf("InputSchema =\n%s\nwant\n%s", got, want)
	}
	if op.ChecksBody() {
		t.Fatal("ChecksBody is true for a GET with query inputs")
	}
}

// TestInputSchemaRequiresPathVariables checks that an input naming a path
// variable is required in the effective schema (what discovery, MCP and
// --help show), whatever its own "required" says: the path cannot match
// without it, and the run endpoint refuses a call that lacks it.
func TestInputSchemaRequiresPathVariables(t *testing.T) {
	op := schemaOp(t, `"method":"GET","path":"/v1/{folder}/{rest...}","inputs":[{"name":"folder","enum":["inbox","sent"]},{"name":"rest"},{"name":"limit","type":"integer"}]`)
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(op.InputSchema(), &schema); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(schema.Required, ","); got != "folder,rest" {
		t.Fatalf("required = %q, want the path variables folder,rest: %s", got, op.InputSchema())
	}
}

func TestArgumentIn(t *testing.T) {
	post := schemaOp(t, `"method":"POST","path":"/a/{id}","inputs":[{"name":"limit","type":"integer","in":"query"},{"name":"to"}]`)
	get := schemaOp(t, `"method":"GET","path":"/a/{id}"`)
	cases := []struct {
		op         *Operation
		name, want string
	}{
		{post, "id", InPath}, {post, "limit", InQuery}, {post, "to", InBody}, {post, "undeclared", InBody},
		{get, "id", InPath}, {get, "q", InQuery},
	}
	for _, c := range cases {
		if got := c.op.ArgumentIn(c.name); got != c.want {
			t.Errorf("%s %s: ArgumentIn = %s, want %s", c.op.Spec.Method, c.name, got, c.want)
		}
	}
}

func TestCompileCopiesInputs(t *testing.T) {
	s, err := ParseSpec("c.json", schemaSpec(`"method":"GET","path":"/a","inputs":[{"name":"o","type":"object","properties":{"k":{"type":"string"}},"required":["k"],"enum":[{"k":"a"}]},{"name":"n","type":"integer","maximum":5}]`))
	if err != nil {
		t.Fatal(err)
	}
	p, errs := Compile([]Source{{Spec: s}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	in := s.Tools[0].Operations[0].Inputs
	in[0].Properties["k"][1] = 'X'
	in[0].RequiredProperties[0] = "z"
	in[0].Enum[0][1] = 'X'
	*in[1].Maximum = "9"
	op, _ := p.Lookup("github://acme/schema-test", "t", "op")
	got := string(mustJSON(t, op.Spec.Inputs))
	want := `[{"name":"o","type":"object","enum":[{"k":"a"}],"properties":{"k":{"type":"string"}},"required":["k"]},{"name":"n","type":"integer","maximum":5}]`
	if got != want {
		t.Fatalf("the compiled operation shares its inputs with the source:\n%s\nwant\n%s", got, want)
	}
}

func TestCheckArgumentsCombinators(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a","input_schema":{"type":"object","properties":{
 "id":{"anyOf":[{"type":"string","pattern":"^[a-z]+$"},{"type":"integer"}]},
 "one":{"oneOf":[{"type":"integer"},{"type":"number"}]},
 "deep":{"anyOf":[{"type":"object","properties":{"k":{"type":"string","maxLength":2}}},{"type":"string"}]},
 "not":{"not":{"const":"admin"}},
 "cond":{"type":"object","if":{"properties":{"kind":{"const":"mail"}}},"then":{"required":["to"]}}}}`)
	runArgCases(t, op, []argCase{
		{name: "anyOf fits", body: `{"id":7}`},
		{name: "anyOf fails at its own place", body: `{"id":"ABC"}`, field: "body.id", rule: "anyOf"},
		{name: "oneOf matches two", body: `{"one":3}`, field: "body.one", rule: "oneOf"},
		{name: "anyOf fails deeper in a branch", body: `{"deep":{"k":"long"}}`, field: "body.deep.k", rule: "maxLength"},
		{name: "not", body: `{"not":"admin"}`, field: "body.not", rule: "not"},
		{name: "if then", body: `{"cond":{"kind":"mail"}}`, field: "body.cond.to", rule: "required"},
		{name: "if then fits", body: `{"cond":{"kind":"memo"}}`},
	})
}

func TestCheckArgumentsConvertsThroughRefs(t *testing.T) {
	op := schemaOp(t, `"method":"GET","path":"/a/{id}","input_schema":{"type":"object","properties":{
 "id":{"$ref":"#/$defs/n"},"ids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"type":"integer","maximum":9}}}`)
	runArgCases(t, op, []argCase{
		{name: "path through a ref", path: map[string]string{"id": "7"}, query: "ids=1&ids=2"},
		{name: "path bound through a ref", path: map[string]string{"id": "70"}, field: "path.id", rule: "maximum"},
		{name: "query items through a ref", path: map[string]string{"id": "7"}, query: "ids=1&ids=x", field: "query.ids[1]", rule: "type"},
	})
}

// TestCheckArgumentsNestedNames: a nested JSON key equal but for case to a
// property its schema declares (through $ref, allOf or items) is refused,
// since Go's encoding/json would bind it to that property unchecked.
func TestCheckArgumentsNestedNames(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a","input_schema":{"type":"object","properties":{
 "msg":{"$ref":"#/$defs/msg"},"list":{"type":"array","items":{"allOf":[{"$ref":"#/$defs/msg"}]}}},
 "$defs":{"msg":{"type":"object","properties":{"to":{"type":"string","pattern":"@example\\.com$"},"inner":{"$ref":"#/$defs/leaf"}}},
 "leaf":{"type":"object","properties":{"to":{"type":"string","pattern":"@example\\.com$"}}}}}`)
	runArgCases(t, op, []argCase{
		{name: "fits", body: `{"msg":{"to":"a@example.com","inner":{"to":"b@example.com"}},"list":[{"to":"c@example.com","x":1}]}`},
		{name: "through a ref", body: `{"msg":{"TO":"a@evil.com"}}`, field: "body.msg.TO", rule: "name"},
		{name: "through two refs", body: `{"msg":{"inner":{"To":"a@evil.com"}}}`, field: "body.msg.inner.To", rule: "name"},
		{name: "through items and allOf", body: `{"list":[{"to":"a@example.com"},{"tO":"a@evil.com"}]}`, field: "body.list[1].tO", rule: "name"},
		{name: "undeclared nested keys pass", body: `{"msg":{"to":"a@example.com","cc":"x","CCC":"y"}}`},
	})
}

func TestCheckArgumentsConcurrent(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a/{id}","inputs":[{"name":"id","type":"integer"},{"name":"to","pattern":"^a+$","required":true}]`)
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func(i int) {
			var err error
			for j := 0; j < 50 && err == nil; j++ {
				body := `{"to":"aaa"}`
				if i%2 == 1 {
					body = `{"to":"b"}`
				}
				got := op.CheckArguments(ArgumentValues{Path: map[string]string{"id": "1"}, ContentType: "application/json", Body: []byte(body)})
				if (got == nil) != (i%2 == 0) {
					err = fmt.Errorf("goroutine %d: got %v", i, got)
				}
			}
			done <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestCheckArgumentsNeverQuotesALongUndeclaredName: a name the schema does
// not declare is chosen by the sender, and a bare token (curl -d "$TOKEN"
// sends it as a form's one name) is a value; a long or unprintable one is
// shown by its length, in the message and the field.
func TestCheckArgumentsNeverQuotesALongUndeclaredName(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a","input_schema":{"type":"object","properties":{"to":{"type":"string"},
 "meta":{"type":"object","additionalProperties":false}},"additionalProperties":false}`)
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ0123456"
	form := "application/x-www-form-urlencoded"
	runArgCases(t, op, []argCase{
		{name: "short undeclared name shown", query: "bcc=1", field: "query.bcc", rule: "additionalProperties"},
		{name: "bare token in a form body", ctype: form, body: secret, field: "body[an undeclared name of 41 bytes]", rule: "additionalProperties"},
		{name: "bare token in the query", query: secret, field: "query[an undeclared name of 41 bytes]", rule: "additionalProperties"},
		{name: "unprintable name", query: "a%0Ab=1", field: "query[an undeclared name of 3 bytes]", rule: "additionalProperties"},
		{name: "long nested key", body: `{"meta":{"` + secret + `":1}}`, field: "body.meta[an undeclared name of 41 bytes]", rule: "additionalProperties"},
		{name: "long key given twice", body: `{"meta":{"` + secret + `":1,"` + secret + `":2}}`, field: "body.meta[an undeclared name of 41 bytes]", rule: "duplicate"},
	})
	for _, q := range []string{secret, "x=1&" + secret} {
		vals, _ := url.ParseQuery(q)
		err := op.CheckArguments(ArgumentValues{Query: vals})
		if err == nil || strings.Contains(err.Error(), secret[:8]) {
			t.Errorf("?%s: %v quotes the name", q, err)
		}
	}
}
