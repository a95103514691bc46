package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// argSchema is an operation's compiled argument schema, built once by
// Compile. It is immutable and shared by every request.
type argSchema struct {
	schema *jsonschema.Schema
	// doc is the effective JSON Schema (InputSchema).
	doc json.RawMessage
	// fields describes the schema's top-level properties by name.
	fields map[string]argField
	// body: the schema describes body fields (ChecksBody).
	body bool
	// carries: the method carries a body, so an argument whose place is
	// not declared is a body field.
	carries bool
	// vars are the path template variables.
	vars map[string]bool
	// credQuery are query parameters that carry a credential: never
	// arguments.
	credQuery map[string]bool
}

// argField is what the schema says of one top-level argument.
type argField struct {
	// in is the declared place ("in"), or "" when the input does not say.
	in string
	// types are the declared JSON types, used to convert wire strings.
	types []string
	// items are the declared types of an array's items.
	items []string
}

// methodCarriesBody reports the methods whose undeclared arguments are
// body fields (as actions.OperationCall sends them).
func methodCarriesBody(m string) bool { return m == "POST" || m == "PUT" || m == "PATCH" }

// validateArgs checks an operation's inputs, input_schema and
// output_schema, and compiles the argument schema; nil when the operation
// declares no arguments or has a problem (reported to p).
func validateArgs(op *OperationSpec, path string, pat *pattern, p *problems) *argSchema {
	if !absent(op.OutputSchema) {
		if tree, ok := parseSchemaDoc(op.OutputSchema, path+".output_schema", p); ok && checkSchemaDoc(tree, path+".output_schema", true, p) {
			if _, err := compileSchema(tree); err != nil {
				p.add(path+".output_schema", ruleSchemaCompile, "the output schema does not compile: "+compileProblem(err))
			}
		}
	}
	if len(op.Inputs) == 0 && absent(op.InputSchema) {
		return nil
	}
	if len(op.Inputs) > 0 && !absent(op.InputSchema) {
		p.add(path+".input_schema", ruleInputsAndSchema, "the operation has both inputs and input_schema; keep input_schema (one JSON Schema for all arguments) or inputs (constraints per argument), not both")
		return nil
	}
	a := &argSchema{carries: methodCarriesBody(op.Method), vars: map[string]bool{}, fields: map[string]argField{}}
	if pat != nil {
		for _, v := range pat.vars {
			a.vars[v] = true
		}
	}
	before := len(p.errs)
	var tree any
	where := path + ".inputs"
	if !absent(op.InputSchema) {
		where = path + ".input_schema"
		tree = a.fromDocument(op.InputSchema, where, p)
	} else {
		tree = a.fromInputs(op.Inputs, where, p)
	}
	if tree == nil || len(p.errs) > before {
		return nil
	}
	sch, err := compileSchema(tree)
	if err != nil {
		p.add(where, ruleSchemaCompile, "the argument schema does not compile: "+compileProblem(err))
		return nil
	}
	a.schema = sch
	a.credQuery = map[string]bool{}
	for _, q := range append([]CredentialPlace{{Query: op.Credential.Query}}, op.Credential.Alternatives...) {
		if q.Query != "" {
			a.credQuery[q.Query] = true
		}
	}
	return a
}

// absent reports a schema not given (missing or JSON null).
func absent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// fromDocument reads a whole input_schema; it returns the decoded tree.
func (a *argSchema) fromDocument(raw json.RawMessage, path string, p *problems) any {
	tree, ok := parseSchemaDoc(raw, path, p)
	if !ok || !checkSchemaDoc(tree, path, true, p) {
		return nil
	}
	root, ok := tree.(map[string]any)
	if !ok {
		p.add(path, ruleSchemaValue, "input_schema describes the arguments as one JSON object: write {\"type\": \"object\", \"properties\": {...}}")
		return nil
	}
	if t, has := root["type"]; has && t != "object" {
		p.add(path+".type", ruleSchemaValue, "input_schema describes the arguments as one JSON object: its type must be \"object\"")
		return nil
	}
	a.doc = raw
	a.body = a.carries
	props, _ := root["properties"].(map[string]any)
	for name, ps := range props {
		f := argField{}
		if m, ok := deref(tree, ps).(map[string]any); ok {
			f.types = schemaTypes(m["type"])
			if it, ok := deref(tree, m["items"]).(map[string]any); ok {
				f.items = schemaTypes(it["type"])
			}
		}
		a.fields[name] = f
	}
	for v := range a.vars {
		ps, declared := props[v]
		if !declared {
			if root["additionalProperties"] == false {
				p.add(path, rulePathVarSchema, fmt.Sprintf("path variable {%s} is not a property of input_schema, which allows no others; add %s to its properties", v, quote(v)))
			}
			continue
		}
		m, _ := deref(tree, ps).(map[string]any)
		if ps == false || (m != nil && !wireConvertible(schemaTypes(m["type"]))) {
			p.add(keyPath(path+".properties", v), rulePathVarSchema, fmt.Sprintf("path variable {%s} is text in the path; its schema must allow a string, integer, number or boolean", v))
		}
	}
	return tree
}

// fromInputs builds the effective schema of an operation's inputs.
func (a *argSchema) fromInputs(inputs []Input, path string, p *problems) any {
	props := map[string]json.RawMessage{}
	required := []string{}
	for k := range inputs {
		in := &inputs[k]
		ip := idx(path, k)
		s, ok := inputSchema(in, ip, p)
		if !ok {
			continue
		}
		props[in.Name] = s
		if in.Required || a.vars[in.Name] { // a path variable is always there
			required = append(required, in.Name)
		}
		t := in.Type
		if t == "" {
			t = "string"
		}
		a.fields[in.Name] = argField{in: in.In, types: []string{t}, items: itemTypes(in.Items)}
		a.checkPlace(in, t, ip, p)
	}
	root := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		root["required"] = required
	}
	doc, err := json.Marshal(root)
	if err != nil {
		p.add(path, ruleSchemaCompile, "cannot encode the inputs' schema: "+err.Error())
		return nil
	}
	a.doc = doc
	tree, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		p.add(path, ruleSchemaCompile, "cannot decode the inputs' schema: "+err.Error())
		return nil
	}
	return tree
}

// checkPlace checks an input's "in" against the path template and notes a
// body field.
func (a *argSchema) checkPlace(in *Input, typ, ip string, p *problems) {
	where := in.In
	switch where {
	case "":
		switch {
		case a.vars[in.Name]:
			where = InPath
		case a.carries:
			where = InBody
		default:
			where = InQuery
		}
	case InPath, InQuery, InBody:
	default:
		p.add(ip+".in", ruleInputIn, fmt.Sprintf("in %s is unknown; use \"path\", \"query\" or \"body\"", quote(in.In)))
		return
	}
	switch {
	case where == InPath && !a.vars[in.Name]:
		p.add(ip+".in", ruleInputIn, fmt.Sprintf("input %s is in the path, but the path has no {%s}; add it to the path or say \"in\": \"query\" or \"body\"", quote(in.Name), in.Name))
	case where != InPath && a.vars[in.Name]:
		p.add(ip+".in", ruleInputIn, fmt.Sprintf("input %s names the path variable {%s}, which always travels in the path; drop \"in\" or rename the input", quote(in.Name), in.Name))
	case where == InPath && !wireConvertible([]string{typ}):
		p.add(ip+".type", rulePathVarSchema, fmt.Sprintf("input %s is a path variable, text in the path; its type must be string, integer, number or boolean", quote(in.Name)))
	case where == InBody:
		a.body = true
	}
}

// wireConvertible reports whether a value of one of types can come from
// text on the wire (no types: any value, so a string too).
func wireConvertible(types []string) bool {
	for _, t := range types {
		switch t {
		case "string", "integer", "number", "boolean":
			return true
		}
	}
	return len(types) == 0
}

// schemaTypes reads a "type" keyword's value.
func schemaTypes(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// itemTypes reads the "type" of an input's items schema.
func itemTypes(raw json.RawMessage) []string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return schemaTypes(m["type"])
}

// compileSchema compiles an effective argument schema: draft 2020-12,
// formats asserted, patterns by Go's regexp (RE2, linear time), nothing
// ever loaded from outside the document.
func compileSchema(tree any) (*jsonschema.Schema, error) {
	const loc = "https://aileron.invalid/arguments.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(goRegexp)
	if err := c.AddResource(loc, tree); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// compileProblem says why a schema does not compile: for one that breaks
// the JSON Schema metaschema, where and which rule.
func compileProblem(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		leaf, _ := deepest(ve)
		rule, msg, name := describeKind(leaf.ErrorKind)
		loc := leaf.InstanceLocation
		if name != "" {
			loc = append(loc[:len(loc):len(loc)], name)
		}
		return boundedText(fmt.Sprintf("at %s, as JSON Schema 2020-12 says: %s (%s)", "/"+strings.Join(loc, "/"), msg, rule))
	}
	return boundedText(err.Error())
}

// refuseLoader loads nothing: a spec's schemas are whole documents.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, errors.New("a spec's schema may not load " + quote(url) + ": only local references are allowed")
}

func goRegexp(s string) (jsonschema.Regexp, error) { return regexp.Compile(s) }

// boundedText cuts a library message to a bounded length.
func boundedText(s string) string {
	const max = 300
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
