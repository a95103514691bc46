package policy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// inputTypes are the types an input may have.
func inputTypes() []string {
	return []string{"string", "integer", "number", "boolean", "array", "object"}
}

// withArticle is "a string", "an integer", "an array", "an object".
func withArticle(t string) string {
	if strings.ContainsRune("aeiou", rune(t[0])) {
		return "an " + t
	}
	return "a " + t
}

// inputSchema checks an input's JSON Schema keywords and returns its
// schema as a property of the effective argument schema.
func inputSchema(in *Input, ip string, p *problems) (json.RawMessage, bool) {
	before := len(p.errs)
	t := in.Type
	if t == "" {
		t = "string"
	}
	if !slices.Contains(inputTypes(), t) {
		return nil, false // validateInput reports it; its keywords cannot be judged
	}
	m := map[string]any{"type": t}
	if in.Description != "" {
		m["description"] = in.Description
	}
	applies := func(key string, set bool, types ...string) bool {
		if !set {
			return false
		}
		for _, want := range types {
			if t == want {
				return true
			}
		}
		if key == "required" {
			p.add(ip+".required", ruleInputKeyword, fmt.Sprintf("a list of required fields applies to an object input, and this one's type is %s; say true or false: must the argument be present?", t))
			return false
		}
		p.add(ip+"."+key, ruleInputKeyword, fmt.Sprintf("%s applies to %s input, and this one's type is %s; change the type or drop %s", key, withArticle(types[0]), t, key))
		return false
	}
	if in.Enum != nil {
		m["enum"] = in.Enum
	}
	if in.Const != nil {
		m["const"] = in.Const
	}
	if applies("pattern", in.Pattern != "", "string") {
		if _, err := regexp.Compile(in.Pattern); err != nil {
			p.add(ip+".pattern", ruleSchemaPattern, fmt.Sprintf("pattern %s is not a Go (RE2) regular expression, which is what checks it (in linear time): %v", quote(in.Pattern), err))
		}
		m["pattern"] = in.Pattern
	}
	if applies("format", in.Format != "", "string") {
		if msg := formatNameProblem(in.Format); msg != "" {
			p.add(ip+".format", ruleSchemaValue, msg)
		}
		m["format"] = in.Format
	}
	numbers := []struct {
		key string
		v   *json.Number
	}{{"minimum", in.Minimum}, {"maximum", in.Maximum}, {"exclusiveMinimum", in.ExclusiveMinimum}, {"exclusiveMaximum", in.ExclusiveMaximum}}
	for _, n := range numbers {
		if applies(n.key, n.v != nil, "number", "integer") {
			if !checkableNumber(string(*n.v)) {
				p.add(ip+"."+n.key, ruleSchemaValue, fmt.Sprintf("%s is too long or too large a number (at most %d characters, exponent at most %d)", n.key, maxNumberLen, maxNumberExp))
			}
			m[n.key] = *n.v
		}
	}
	counts := []struct {
		key string
		v   *int64
		typ string
	}{{"minLength", in.MinLength, "string"}, {"maxLength", in.MaxLength, "string"},
		{"minItems", in.MinItems, "array"}, {"maxItems", in.MaxItems, "array"}}
	for _, c := range counts {
		if applies(c.key, c.v != nil, c.typ) {
			if *c.v < 0 {
				p.add(ip+"."+c.key, ruleSchemaValue, fmt.Sprintf("%s takes a non-negative integer", c.key))
			}
			m[c.key] = *c.v
		}
	}
	inputNested(in, t, ip, m, applies, p)
	if len(p.errs) > before {
		return nil, false
	}
	raw, err := json.Marshal(m)
	if err != nil {
		p.add(ip, ruleSchemaCompile, "cannot encode the input's schema: "+err.Error())
		return nil, false
	}
	return raw, true
}

// inputNested checks and adds an input's nested schemas: items,
// properties, additionalProperties and the required property list.
func inputNested(in *Input, t, ip string, m map[string]any, applies func(string, bool, ...string) bool, p *problems) {
	nested := func(raw json.RawMessage, path string) {
		if tree, ok := parseSchemaDoc(raw, path, p); ok {
			checkSchemaDoc(tree, path, false, p)
		}
	}
	if applies("items", in.Items != nil, "array") {
		nested(in.Items, ip+".items")
		m["items"] = in.Items
	}
	if applies("properties", in.Properties != nil, "object") {
		names := make([]string, 0, len(in.Properties))
		for k := range in.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			nested(in.Properties[k], keyPath(ip+".properties", k))
		}
		m["properties"] = in.Properties
	}
	if applies("additionalProperties", in.AdditionalProperties != nil, "object") {
		nested(in.AdditionalProperties, ip+".additionalProperties")
		m["additionalProperties"] = in.AdditionalProperties
	}
	if applies("required", in.RequiredProperties != nil, "object") {
		seen := map[string]bool{}
		for _, r := range in.RequiredProperties {
			if seen[r] {
				p.add(ip+".required", ruleSchemaValue, fmt.Sprintf("required lists %s twice", quote(r)))
			}
			seen[r] = true
		}
		m["required"] = in.RequiredProperties
	}
}
