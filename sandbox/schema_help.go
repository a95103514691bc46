package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// maxHelpValues bounds how many enum values a help line lists.
const maxHelpValues = 8

// maxHelpLiteral bounds a value (pattern, enum value) quoted in help.
const maxHelpLiteral = 80

// schemaInputs are the help lines of an operation's inputs, from its
// effective input schema: one per property, in the order of the spec's
// inputs, else of the properties as raw writes them, then by name. A
// property's description is the schema's, else the input's. strict reports
// additionalProperties: false.
func schemaInputs(schema map[string]any, raw json.RawMessage, inputs []policy.Input) (lines []string, strict bool) {
	props, _ := schema["properties"].(map[string]any)
	required := stringSet(schema["required"])
	descs := map[string]string{}
	var order []string
	for _, in := range inputs {
		descs[in.Name] = in.Description
		order = append(order, in.Name)
	}
	order = append(order, propertyOrder(raw)...)
	seen := map[string]bool{}
	order = slices.DeleteFunc(order, func(name string) bool {
		_, ok := props[name]
		dup := seen[name]
		seen[name] = true
		return !ok || dup
	})
	var rest []string
	for name := range props {
		if !slices.Contains(order, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	for _, name := range append(order, rest...) {
		p, _ := props[name].(map[string]any)
		req := "optional"
		if required[name] {
			req = "required"
		}
		line := fmt.Sprintf("%s (%s)", oneLine(name), strings.Join(append([]string{typeOf(p), req}, constraints(p)...), ", "))
		d, _ := p["description"].(string)
		if d == "" {
			d = descs[name]
		}
		if d = oneLine(d); d != "" {
			line += ": " + d
		}
		lines = append(lines, line)
	}
	return lines, schema["additionalProperties"] == false
}

// schemaFields is a one-line summary of an object schema's properties:
// "name (type), …"; "" when it has none.
func schemaFields(schema map[string]any) string {
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		p, _ := props[name].(map[string]any)
		parts[i] = oneLine(name) + " (" + typeOf(p) + ")"
	}
	return strings.Join(parts, ", ")
}

// typeOf names a property's type: "string", "integer or null", "array of
// string"; "any" when the schema does not say.
func typeOf(p map[string]any) string {
	var names []string
	switch t := p["type"].(type) {
	case string:
		names = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				names = append(names, s)
			}
		}
	}
	if len(names) == 0 {
		return "any"
	}
	typ := oneLine(strings.Join(names, " or "))
	if items, ok := p["items"].(map[string]any); ok && slices.Contains(names, "array") {
		typ += " of " + typeOf(items)
	}
	return typ
}

// constraints are a property's keywords as short phrases, in a fixed order.
func constraints(p map[string]any) []string {
	var out []string
	if vs, ok := p["enum"].([]any); ok {
		out = append(out, "one of "+valueList(vs))
	}
	if v, ok := p["const"]; ok {
		out = append(out, "exactly "+literal(v))
	}
	if s, ok := p["format"].(string); ok {
		out = append(out, "format "+clipLiteral(oneLine(s)))
	}
	if s, ok := p["pattern"].(string); ok {
		out = append(out, "pattern "+clipLiteral(oneLine(s)))
	}
	bounds := []struct{ key, phrase string }{
		{"minimum", ">= %s"}, {"exclusiveMinimum", "> %s"}, {"maximum", "<= %s"}, {"exclusiveMaximum", "< %s"},
		{"minLength", "at least %s characters"}, {"maxLength", "at most %s characters"},
		{"minItems", "at least %s items"}, {"maxItems", "at most %s items"},
	}
	for _, b := range bounds {
		if n, ok := p[b.key].(json.Number); ok {
			out = append(out, fmt.Sprintf(b.phrase, clipLiteral(n.String())))
		}
	}
	if items, ok := p["items"].(map[string]any); ok {
		if c := constraints(items); len(c) > 0 {
			out = append(out, "each "+strings.Join(c, ", "))
		}
	}
	if props, ok := p["properties"].(map[string]any); ok && len(props) > 0 {
		out = append(out, "fields "+schemaFields(p))
	}
	return out
}

// valueList renders enum values as JSON literals, at most maxHelpValues.
func valueList(vs []any) string {
	parts := make([]string, 0, len(vs))
	for i, v := range vs {
		if i == maxHelpValues {
			parts = append(parts, fmt.Sprintf("… (%d in all)", len(vs)))
			break
		}
		parts = append(parts, literal(v))
	}
	return strings.Join(parts, " | ")
}

// literal is v as compact JSON, on one line and bounded.
func literal(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return "?"
	}
	return clipLiteral(oneLine(string(data)))
}

func clipLiteral(s string) string {
	if len(s) <= maxHelpLiteral {
		return s
	}
	cut := maxHelpLiteral
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// stringSet is a JSON array of strings as a set.
func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	vs, _ := v.([]any)
	for _, x := range vs {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

// decodeSchema reads a JSON Schema object, numbers kept as written; nil when
// raw is empty or not an object.
func decodeSchema(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// compiledOps compiles spec on its own to reach each operation's effective
// schemas (policy.Operation.InputSchema), keyed by tool and operation name.
// A spec that does not compile gives none: help then shows the spec's
// inputs as written.
func compiledOps(spec *policy.Spec) map[[2]string]*policy.Operation {
	out := map[[2]string]*policy.Operation{}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec}}, nil)
	if len(errs) > 0 {
		return out
	}
	for _, o := range pol.Operations() {
		out[[2]string{o.Tool, o.Spec.Name}] = o
	}
	return out
}

// exampleFromSchema is exampleArgs for a schema: its required properties
// (or else its first), each with its first enum value, its const, or a
// placeholder of its type.
func exampleFromSchema(schema map[string]any) string {
	props, _ := schema["properties"].(map[string]any)
	required := stringSet(schema["required"])
	var names []string
	for name := range props {
		if required[name] {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		names = names[:min(1, len(names))]
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		p, _ := props[name].(map[string]any)
		v := placeholder(strings.SplitN(typeOf(p), " ", 2)[0])
		if vs, ok := p["enum"].([]any); ok && len(vs) > 0 {
			v = literal(vs[0])
		} else if c, ok := p["const"]; ok {
			v = literal(c)
		} else if v == "0" {
			v = numberExample(p)
		}
		parts[i] = jsonString(oneLine(name)) + ":" + v
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// numberExample is an example number within a property's lower bound:
// its minimum, one above its exclusiveMinimum, else 0.
func numberExample(p map[string]any) string {
	if m, ok := p["minimum"].(json.Number); ok {
		return m.String()
	}
	if m, ok := p["exclusiveMinimum"].(json.Number); ok {
		if f, err := m.Float64(); err == nil && f >= 0 && f < 1e15 {
			return strconv.FormatInt(int64(math.Floor(f))+1, 10)
		}
	}
	return "0"
}

// propertyOrder lists the names of a schema's top-level properties in the
// order raw writes them; nil when it cannot tell.
func propertyOrder(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "properties" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil
		}
		var names []string
		for dec.More() {
			name, err := dec.Token()
			var skip json.RawMessage
			if err != nil || dec.Decode(&skip) != nil {
				return nil
			}
			if s, ok := name.(string); ok {
				names = append(names, s)
			}
		}
		return names
	}
	return nil
}
