package policy

import (
	"errors"
	"net/url"
	"testing"
	"unicode/utf8"
)

// FuzzCheckArguments checks random queries and bodies against a few
// schemas: CheckArguments never panics and answers nil or an
// *ArgumentError naming a field and a rule in bounded text.
func FuzzCheckArguments(f *testing.F) {
	ops := []*Operation{
		schemaOp(f, `"method":"POST","path":"/a/{id}","inputs":[{"name":"id","type":"integer","maximum":9},{"name":"to","required":true,"pattern":"^[^@]+@example\\.com$"},
{"name":"tags","type":"array","in":"query","items":{"type":"string","maxLength":3},"maxItems":2},{"name":"meta","type":"object","properties":{"lang":{"enum":["en"]}},"required":["lang"]}]`),
		schemaOp(f, `"method":"PUT","path":"/b","input_schema":{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0},
"list":{"type":"array","maxItems":4,"uniqueItems":true,"items":{"$ref":"#/$defs/item"}},"when":{"format":"date-time"}},"required":["n"],"additionalProperties":false,
"$defs":{"item":{"type":"object","properties":{"k":{"type":"string"}},"additionalProperties":{"type":"integer"}}}}`),
		schemaOp(f, `"method":"GET","path":"/c","input_schema":{"type":"object","properties":{"q":{"type":["integer","boolean"]},"e":{"format":"email"}},"additionalProperties":false}`),
	}
	f.Add(uint8(0), "tags=a&tags=b", "application/json", []byte(`{"to":"a@example.com","meta":{"lang":"en"}}`))
	f.Add(uint8(1), "", "application/json", []byte(`{"n":1,"list":[{"k":"a","x":1},{"k":"a","x":1}]}`))
	f.Add(uint8(1), "", "application/x-www-form-urlencoded", []byte(`n=1&n=2&list=x`))
	f.Add(uint8(2), "q=true&e=a%40b.c", "", []byte(nil))
	f.Add(uint8(0), "", "application/json", []byte(`{"to":[[[[[[{"a":1e999}]]]]]]}`))
	f.Fuzz(func(t *testing.T, which uint8, query, ctype string, body []byte) {
		op := ops[int(which)%len(ops)]
		q, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		v := ArgumentValues{Path: map[string]string{"id": query}, Query: q, ContentType: ctype}
		if op.ChecksBody() {
			v.Body = body
		}
		err = op.CheckArguments(v)
		if err == nil {
			return
		}
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Field == "" || ae.Rule == "" {
			t.Fatalf("error %#v is not an *ArgumentError naming a field and a rule", err)
		}
		if !utf8.ValidString(ae.Message) || len(ae.Message) > 2*len(ae.Field)+600 {
			t.Fatalf("message %q is not bounded UTF-8 text", ae.Message)
		}
	})
}
