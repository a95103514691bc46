package policy

import (
	"bytes"
	"strings"
	"testing"
)

// The bodies below are large or hostile; each check must finish (no time
// is asserted) and give the right answer.

func TestCheckArgumentsHugeBody(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a","input_schema":{"type":"object","properties":{
 "items":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"}},
 "blob":{"type":"string","maxLength":16777216}}}`)
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for b.Len() < 8<<20 {
		b.WriteString(`"abcdefgh",`)
	}
	b.WriteString(`"ok"]}`)
	runArgCases(t, op, []argCase{
		{name: "8 MiB that fits", body: b.String()},
		{name: "8 MiB whose last item breaks the pattern", body: strings.TrimSuffix(b.String(), `"ok"]}`) + `"NO"]}`, field: "body.items[762600]", rule: "pattern"},
		{name: "8 MiB string", body: `{"blob":"` + strings.Repeat("x", 8<<20) + `"}`},
	})
}

func TestCheckArgumentsDeepBody(t *testing.T) {
	op := schemaOp(t, `"method":"POST","path":"/a","inputs":[{"name":"a","type":"object"}]`)
	const n = 100000
	runArgCases(t, op, []argCase{
		{name: "deep arrays", body: `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`, field: "body.a" + strings.Repeat("[0]", maxBodyDepth), rule: "json"},
		{name: "deep objects", body: strings.Repeat(`{"a":`, n) + `1` + strings.Repeat("}", n), field: "body" + strings.Repeat(".a", maxBodyDepth+1), rule: "json"},
		{name: "deep unclosed", body: `{"a":` + strings.Repeat("[", n), field: "body.a" + strings.Repeat("[0]", maxBodyDepth), rule: "json"},
		{name: "as deep as allowed", body: `{"a":{"b":` + strings.Repeat("[", maxBodyDepth-2) + strings.Repeat("]", maxBodyDepth-2) + `}}`},
	})
}

func TestCheckArgumentsPathologicalPattern(t *testing.T) {
	// (a+)+$ takes exponential time in a backtracking engine on "aaa…ab";
	// Go's RE2 runs it in linear time.
	op := schemaOp(t, `"method":"POST","path":"/a","inputs":[{"name":"s","pattern":"^(a+)+$"},{"name":"q","in":"query","pattern":"^(a|aa)+$"}]`)
	long := strings.Repeat("a", 1<<20)
	runArgCases(t, op, []argCase{
		{name: "long match", body: `{"s":"` + long + `"}`},
		{name: "long miss", body: `{"s":"` + long + `b"}`, field: "body.s", rule: "pattern"},
		{name: "long query miss", query: "q=" + long + "b", field: "query.q", rule: "pattern"},
	})
}

func TestCheckArgumentsManyNumbers(t *testing.T) {
	// Numbers are compared exactly; a huge exponent would cost a big
	// number per value, so it is refused before any check.
	op := schemaOp(t, `"method":"POST","path":"/a","input_schema":{"type":"object","properties":{"n":{"type":"array","items":{"type":"integer","maximum":10}}}}`)
	var b strings.Builder
	b.WriteString(`{"n":[`)
	for i := 0; i < 100000; i++ {
		b.WriteString(`1e400,`)
	}
	b.WriteString(`1]}`)
	long := `{"n":[` + strings.Repeat("1", maxNumberLen+1) + `]}`
	runArgCases(t, op, []argCase{
		{name: "exponent at the bound", body: `{"n":[1e400]}`, field: "body.n[0]", rule: "maximum"},
		{name: "exponent over the bound", body: `{"n":[1e401]}`, field: "body.n[0]", rule: "number"},
		{name: "negative exponent over the bound", body: `{"n":[1e-401]}`, field: "body.n[0]", rule: "number"},
		{name: "many large numbers", body: b.String(), field: "body.n[0]", rule: "maximum"},
		{name: "too many digits", body: long, field: "body.n[0]", rule: "number"},
	})
}
