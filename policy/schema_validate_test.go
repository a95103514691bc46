package policy

import (
	"fmt"
	"strings"
	"testing"
)

// schemaProblem is a spec operation and the problem it must be refused
// with: at path (or anywhere, when empty), rule, a message saying says.
type schemaProblem struct {
	name, opJSON, path, rule, says string
}

func schemaProblemCases() []schemaProblem {
	const op = "$.tools[0].operations[0]"
	deep := strings.Repeat(`{"items":`, maxSchemaDepth+1) + `{}` + strings.Repeat(`}`, maxSchemaDepth+1)
	// Each $def doubles the schema: d0 refers to d1 twice, d1 to d2 twice…
	var defs []string
	for i := 0; i < 16; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d16":{"type":"string"}`)
	blowup := `{"type":"object","properties":{"a":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
	return []schemaProblem{
		{"inputs and input_schema", `"method":"GET","path":"/a","inputs":[{"name":"q"}],"input_schema":{"type":"object"}`,
			op + ".input_schema", ruleInputsAndSchema, "keep input_schema"},
		{"in path without variable", `"method":"GET","path":"/a","inputs":[{"name":"q","in":"path"}]`,
			op + ".inputs[0].in", ruleInputIn, "has no {q}"},
		{"path variable in query", `"method":"GET","path":"/a/{q}","inputs":[{"name":"q","in":"query"}]`,
			op + ".inputs[0].in", ruleInputIn, "always travels in the path"},
		{"in unknown", `"method":"GET","path":"/a","inputs":[{"name":"q","in":"header"}]`,
			op + ".inputs[0].in", ruleInputIn, "unknown"},
		{"path variable object input", `"method":"GET","path":"/a/{q}","inputs":[{"name":"q","type":"object"}]`,
			op + ".inputs[0].type", rulePathVarSchema, "text in the path"},
		{"path variable not allowed by input_schema", `"method":"GET","path":"/a/{id}","input_schema":{"type":"object","additionalProperties":false}`,
			op + ".input_schema", rulePathVarSchema, "{id}"},
		{"path variable of array type", `"method":"GET","path":"/a/{id}","input_schema":{"type":"object","properties":{"id":{"type":"array"}}}`,
			op + `.input_schema.properties.id`, rulePathVarSchema, "{id}"},
		{"path variable false schema", `"method":"GET","path":"/a/{id}","input_schema":{"type":"object","properties":{"id":false}}`,
			op + `.input_schema.properties.id`, rulePathVarSchema, "{id}"},
		{"input_schema not an object type", `"method":"GET","path":"/a","input_schema":{"type":"array"}`,
			op + ".input_schema.type", ruleSchemaValue, "one JSON object"},
		{"input_schema boolean", `"method":"GET","path":"/a","input_schema":true`,
			op + ".input_schema", ruleSchemaValue, "one JSON object"},
		{"unknown keyword", `"method":"GET","path":"/a","input_schema":{"type":"object","propertes":{}}`,
			op + ".input_schema.propertes", ruleSchemaKeyword, `did you mean "properties"`},
		{"unknown nested keyword", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"maxLenght":3}}}`,
			op + ".input_schema.properties.a.maxLenght", ruleSchemaKeyword, `did you mean "maxLength"`},
		{"unknown keyword in input items", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"array","items":{"tpye":"string"}}]`,
			op + ".inputs[0].items.tpye", ruleSchemaKeyword, `did you mean "type"`},
		{"unknown keyword in output_schema", `"method":"GET","path":"/a","output_schema":{"type":"object","requred":["a"]}`,
			op + ".output_schema.requred", ruleSchemaKeyword, `did you mean "required"`},
		{"dynamicRef", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$dynamicRef":"#x"}}}`,
			op + `.input_schema.properties.a["$dynamicRef"]`, ruleSchemaKeyword, "not supported"},
		{"id", `"method":"GET","path":"/a","input_schema":{"$id":"https://example.com/s","type":"object"}`,
			op + `.input_schema["$id"]`, ruleSchemaKeyword, "not supported"},
		{"remote ref", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`,
			op + `.input_schema.properties.a["$ref"]`, ruleSchemaRef, "outside the document"},
		{"relative ref", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"other.json#/x"}}}`,
			op + `.input_schema.properties.a["$ref"]`, ruleSchemaRef, "outside the document"},
		{"dangling ref", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`,
			op + `.input_schema.properties.a["$ref"]`, ruleSchemaRef, "does not name"},
		{"recursive ref", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}}}`,
			op + ".input_schema", ruleSchemaRef, "refers back to itself"},
		{"ref to the root", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"#"}}}`,
			op + ".input_schema", ruleSchemaRef, "refers back to itself"},
		{"ref in an input", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"array","items":{"$ref":"#/x"}}]`,
			op + `.inputs[0].items["$ref"]`, ruleSchemaRef, "input_schema"},
		{"uniqueItems without maxItems", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
			op + ".input_schema.properties.a.uniqueItems", ruleSchemaLimit, "maxItems"},
		{"huge bound", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"maximum":1e999999}}}`,
			op + ".input_schema.properties.a.maximum", ruleSchemaValue, "too large"},
		{"huge input bound", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"number","minimum":-1e999999}]`,
			op + ".inputs[0].minimum", ruleSchemaValue, "too large"},
		{"count with a fraction", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"minLength":2.5}}}`,
			op + ".input_schema.properties.a.minLength", ruleSchemaValue, "non-negative integer"},
		{"negative count", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"maxItems":-1}}}`,
			op + ".input_schema.properties.a.maxItems", ruleSchemaValue, "non-negative integer"},
		{"uniqueItems with a large maxItems", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"uniqueItems":true,"maxItems":100000}}}`,
			op + ".input_schema.properties.a.uniqueItems", ruleSchemaLimit, "maxItems"},
		{"too deep", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":` + deep + `}}`,
			"", ruleSchemaLimit, "deeper than"},
		{"too many subschemas once expanded", `"method":"GET","path":"/a","input_schema":` + blowup,
			op + ".input_schema", ruleSchemaLimit, "subschemas"},
		{"pattern Go cannot compile", `"method":"GET","path":"/a","inputs":[{"name":"a","pattern":"(?<=x)y"}]`,
			op + ".inputs[0].pattern", ruleSchemaPattern, "RE2"},
		{"backreference", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"pattern":"(a)\\1"}}}`,
			op + ".input_schema.properties.a.pattern", ruleSchemaValue, "RE2"},
		{"patternProperties key", `"method":"GET","path":"/a","input_schema":{"type":"object","patternProperties":{"(?=a)":{}}}`,
			op + `.input_schema.patternProperties["(?=a)"]`, ruleSchemaPattern, "RE2"},
		{"unknown format", `"method":"GET","path":"/a","inputs":[{"name":"a","format":"e-mail"}]`,
			op + ".inputs[0].format", ruleSchemaValue, "email"},
		{"unknown format in schema", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"format":"phone"}}}`,
			op + ".input_schema.properties.a.format", ruleSchemaValue, "not one the proxy checks"},
		{"format regex", `"method":"GET","path":"/a","inputs":[{"name":"a","format":"regex"}]`,
			op + ".inputs[0].format", ruleSchemaValue, "not one the proxy checks"},
		{"pattern on an integer", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"integer","pattern":"x"}]`,
			op + ".inputs[0].pattern", ruleInputKeyword, "applies to a string input"},
		{"maximum on a string", `"method":"GET","path":"/a","inputs":[{"name":"a","maximum":3}]`,
			op + ".inputs[0].maximum", ruleInputKeyword, "applies to a number input"},
		{"items on an object", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"object","items":{}}]`,
			op + ".inputs[0].items", ruleInputKeyword, "applies to an array input"},
		{"required list on a string", `"method":"GET","path":"/a","inputs":[{"name":"a","required":["b"]}]`,
			op + ".inputs[0].required", ruleInputKeyword, "say true or false"},
		{"required of the wrong type", `"method":"GET","path":"/a","inputs":[{"name":"a","required":"yes"}]`,
			op + ".inputs[0].required", ruleJSONType, "true, false or a list"},
		{"negative maxLength", `"method":"GET","path":"/a","inputs":[{"name":"a","maxLength":-1}]`,
			op + ".inputs[0].maxLength", ruleJSONType, "non-negative integer"},
		{"minimum not a number", `"method":"GET","path":"/a","inputs":[{"name":"a","type":"integer","minimum":"1"}]`,
			op + ".inputs[0].minimum", ruleJSONType, "a number"},
		{"unknown input field", `"method":"GET","path":"/a","inputs":[{"name":"a","patern":"x"}]`,
			op + ".inputs[0].patern", ruleUnknownField, `did you mean "pattern"`},
		{"type list", `"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"type":["string","string"]}}}`,
			op + ".input_schema.properties.a.type", ruleSchemaValue, "distinct"},
		{"schema of another draft", `"method":"GET","path":"/a","input_schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`,
			op + `.input_schema["$schema"]`, ruleSchemaValue, "2020-12"},
		{"duplicate key in a schema", `"method":"GET","path":"/a","input_schema":{"type":"object","type":"object"}`,
			"$.tools[0].operations[0].input_schema.type", ruleJSONDuplicate, "twice"},
		{"annotation of the wrong type in input_schema", `"method":"GET","path":"/a","input_schema":{"type":"object","examples":5}`,
			op + ".input_schema", ruleSchemaCompile, "at /examples, as JSON Schema 2020-12 says: it must be of type array (type)"},
		{"annotation of the wrong type in output_schema", `"method":"GET","path":"/a","output_schema":{"type":"object","deprecated":"yes"}`,
			op + ".output_schema", ruleSchemaCompile, "does not compile"},
		{"visibility", `"method":"GET","path":"/a","visibility":"private"`,
			op + ".visibility", ruleVisibility, "internal"},
	}
}

func TestSchemaSpecProblems(t *testing.T) {
	for _, c := range schemaProblemCases() {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec("schema.json", schemaSpec(c.opJSON))
			if c.path == "" {
				found := false
				for _, ve := range validationErrors(t, err) {
					found = found || ve.Rule == c.rule && strings.Contains(ve.Message, c.says)
				}
				if !found {
					t.Fatalf("want a %s problem saying %q, got %v", c.rule, c.says, err)
				}
				return
			}
			ve := requireProblem(t, err, c.path, c.rule)
			if !strings.Contains(ve.Message, c.says) {
				t.Fatalf("message %q does not say %q", ve.Message, c.says)
			}
			if ve.File != "schema.json" {
				t.Fatalf("problem names file %q", ve.File)
			}
		})
	}
}

// TestUnknownInputTypeIsOneProblem checks that a misspelt input type is
// one problem with a suggestion, not also one for each of its keywords.
func TestUnknownInputTypeIsOneProblem(t *testing.T) {
	_, err := ParseSpec("schema.json", schemaSpec(`"method":"GET","path":"/a","inputs":[{"name":"a","type":"str","maxLength":3,"pattern":"x"}]`))
	ves := validationErrors(t, err)
	if len(ves) != 1 {
		t.Fatalf("want one problem, got %d: %v", len(ves), err)
	}
	if ves[0].Path != "$.tools[0].operations[0].inputs[0].type" || !strings.Contains(ves[0].Message, `did you mean "string"?`) {
		t.Fatalf("problem %s: %s", ves[0].Path, ves[0].Message)
	}
}

func TestSchemaSpecAccepted(t *testing.T) {
	for _, opJSON := range []string{
		`"method":"GET","path":"/a","input_schema":{"type":"object","title":"t","description":"d","examples":[{}],"default":{},"$comment":"c","x-owner":"me","properties":{"a":{"type":"string","deprecated":true,"x-ui":{"any":"thing"}}}}`,
		`"method":"GET","path":"/a","inputs":[{"name":"a","required":true},{"name":"b","required":false},{"name":"c","type":"object","required":["d"]},{"name":"e","x-note":"n"}]`,
		`"method":"GET","path":"/a/{id}","input_schema":{"type":"object","properties":{"id":{"type":["integer","null"]}},"additionalProperties":false}`,
		`"method":"GET","path":"/a/{id}","input_schema":{"type":"object"}`,
		`"method":"POST","path":"/a","input_schema":{"type":"object","properties":{"a":{"$ref":"#/$defs/x"},"b":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"array","uniqueItems":true,"maxItems":1024}}}`,
		`"method":"GET","path":"/a","output_schema":{"type":"object","properties":{"id":{"type":"string"}}},"visibility":"internal"`,
		`"method":"GET","path":"/a","input_schema":null,"output_schema":null`,
		`"method":"GET","path":"/a","input_schema":{"type":"object","properties":{"a":{"minLength":2.0,"maxItems":3e0,"uniqueItems":true}}}`,
	} {
		if _, err := ParseSpec("ok.json", schemaSpec(opJSON)); err != nil {
			t.Errorf("%s: %v", opJSON, err)
		}
	}
}

func TestInputRequiredRoundTrip(t *testing.T) {
	s, err := ParseSpec("rt.json", schemaSpec(`"inputs":[{"name":"a","required":true},{"name":"c","type":"object","required":["d"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	in := s.Tools[0].Operations[0].Inputs
	if !in[0].Required || in[0].RequiredProperties != nil || in[1].Required || len(in[1].RequiredProperties) != 1 {
		t.Fatalf("required read wrong: %+v", in)
	}
	out := string(mustJSON(t, s))
	if !strings.Contains(out, `"name":"a","required":true`) || !strings.Contains(out, `"required":["d"]`) {
		t.Fatalf("required written wrong: %s", out)
	}
}

func TestOutputHasField(t *testing.T) {
	out := []byte(`{"type":"object","properties":{
 "id":{"type":"string"},
 "message":{"type":"object","properties":{"thread":{"$ref":"#/$defs/thread"}},"additionalProperties":true},
 "labels":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}},
 "pair":{"type":"array","prefixItems":[{"type":"object","properties":{"a":{}}}]},
 "gone":false},
 "$defs":{"thread":{"type":"object","properties":{"id":{"type":"string"}}}}}`)
	cases := []struct {
		path string
		want bool
	}{
		{"id", true}, {"message", true}, {"message.thread.id", true}, {"labels.0.name", true}, {"pair.0.a", true},
		{"idd", false}, {"message.other", false}, {"message.thread.name", false}, {"labels.name", false},
		{"labels.0.other", false}, {"id.x", false}, {"gone", false},
	}
	for _, c := range cases {
		if got := OutputHasField(out, strings.Split(c.path, ".")); got != c.want {
			t.Errorf("%s: got %v, want %v", c.path, got, c.want)
		}
	}
	if !OutputHasField(nil, []string{"anything"}) || !OutputHasField([]byte("null"), []string{"x"}) {
		t.Error("an absent output_schema does not know every field")
	}
}

func TestCompileRefusesABadSchemaNamingTheSource(t *testing.T) {
	s, err := ParseSpec("ok.json", schemaSpec(`"method":"POST","path":"/a","inputs":[{"name":"a"}]`))
	if err != nil {
		t.Fatal(err)
	}
	s.Tools[0].Operations[0].Inputs[0].Pattern = "(?!x)"
	p, errs := Compile([]Source{{Spec: s, Origin: "pkg/aileron.connector.v1.json"}}, nil)
	if len(errs) != 1 {
		t.Fatalf("want one error, got %v", errs)
	}
	ve := requireProblem(t, errs[0], "$.tools[0].operations[0].inputs[0].pattern", ruleSchemaPattern)
	if ve.File != "pkg/aileron.connector.v1.json" {
		t.Fatalf("error names file %q", ve.File)
	}
	if _, ok := p.Lookup("github://acme/schema-test", "t", "op"); ok {
		t.Fatal("a spec with a bad schema was installed")
	}
}
