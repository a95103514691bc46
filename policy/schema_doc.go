package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Limits on the JSON Schemas of a spec, so that every check of an argument
// against them runs in time bounded by the argument's size.
const (
	// maxSchemaDepth bounds the nesting of subschemas in one document.
	maxSchemaDepth = 32
	// maxSchemaNodes bounds a schema's subschemas counted with every $ref
	// expanded: a check visits each at most once per argument value.
	maxSchemaNodes = 10000
	// maxUniqueItems is the largest maxItems allowed beside uniqueItems,
	// whose check compares every pair of items.
	maxUniqueItems = 1024
)

// draft2020 is the only $schema a spec's JSON Schema may name.
const draft2020 = "https://json-schema.org/draft/2020-12/schema"

// kwKind says what value a JSON Schema keyword takes.
type kwKind uint8

const (
	kwAnnotation  kwKind = iota // any value, not checked
	kwSchema                    // one subschema
	kwSchemaArray               // a non-empty array of subschemas
	kwSchemaMap                 // an object of subschemas
	kwNumber                    // a number
	kwPositive                  // a number above zero
	kwCount                     // a non-negative integer
	kwBool                      // true or false
	kwArray                     // any array (enum)
	kwType                      // a type name or a list of them
	kwNames                     // a list of distinct strings (required)
	kwNamesMap                  // an object of lists of strings
	kwPattern                   // a regular expression
	kwFormat                    // a format name
	kwRef                       // a local reference
	kwSchemaURI                 // $schema
	kwRefused                   // a keyword spec schemas may not use
)

// schemaKeywords lists the JSON Schema 2020-12 keywords a spec's schemas
// may use, with the kind of value each takes.
func schemaKeywords() map[string]kwKind {
	return map[string]kwKind{
		"$schema": kwSchemaURI, "$ref": kwRef, "$defs": kwSchemaMap, "$comment": kwAnnotation,
		"$id": kwRefused, "$anchor": kwRefused, "$dynamicRef": kwRefused, "$dynamicAnchor": kwRefused,
		"$recursiveRef": kwRefused, "$recursiveAnchor": kwRefused, "$vocabulary": kwRefused,
		"title": kwAnnotation, "description": kwAnnotation, "examples": kwAnnotation, "default": kwAnnotation,
		"deprecated": kwAnnotation, "readOnly": kwAnnotation, "writeOnly": kwAnnotation,
		"contentEncoding": kwAnnotation, "contentMediaType": kwAnnotation,
		"type": kwType, "enum": kwArray, "const": kwAnnotation, "format": kwFormat,
		"multipleOf": kwPositive, "minimum": kwNumber, "maximum": kwNumber,
		"exclusiveMinimum": kwNumber, "exclusiveMaximum": kwNumber,
		"minLength": kwCount, "maxLength": kwCount, "pattern": kwPattern,
		"items": kwSchema, "prefixItems": kwSchemaArray, "contains": kwSchema, "minContains": kwCount,
		"maxContains": kwCount, "minItems": kwCount, "maxItems": kwCount, "uniqueItems": kwBool,
		"unevaluatedItems": kwSchema, "properties": kwSchemaMap, "patternProperties": kwSchemaMap,
		"additionalProperties": kwSchema, "unevaluatedProperties": kwSchema, "propertyNames": kwSchema,
		"required": kwNames, "dependentRequired": kwNamesMap, "dependentSchemas": kwSchemaMap,
		"minProperties": kwCount, "maxProperties": kwCount,
		"allOf": kwSchemaArray, "anyOf": kwSchemaArray, "oneOf": kwSchemaArray, "not": kwSchema,
		"if": kwSchema, "then": kwSchema, "else": kwSchema,
	}
}

// schemaFormats are the format names checked (asserted) on arguments.
// "regex" is not one: compiling a request's megabytes as a regular
// expression costs seconds and gigabytes.
func schemaFormats() []string {
	return []string{"date", "date-time", "duration", "email", "hostname", "ipv4", "ipv6", "iri", "iri-reference",
		"json-pointer", "relative-json-pointer", "time", "uri", "uri-reference", "uri-template", "uuid"}
}

// schemaWalk checks one JSON Schema document of a spec.
type schemaWalk struct {
	p    *problems
	kw   map[string]kwKind
	root any
	// refs allows $ref and $defs (whole documents only: inside an input's
	// constraints "#" would not name the document the owner wrote).
	refs bool
}

// parseSchemaDoc decodes a raw JSON Schema of a spec (numbers as
// json.Number, duplicate keys and excess depth refused).
func parseSchemaDoc(raw json.RawMessage, path string, p *problems) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readValue(dec, path, 0)
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			ve.File = p.file
			p.errs = append(p.errs, ve)
		} else {
			p.add(path, ruleJSON, "invalid JSON Schema: "+err.Error())
		}
		return nil, false
	}
	return v, true
}

// checkSchemaDoc reports every problem of the JSON Schema v at path: unknown
// or refused keywords, values of the wrong kind, patterns Go cannot
// compile, unknown formats, references outside the document or in a cycle,
// and schemas too deep or too large to check in bounded time.
func checkSchemaDoc(v any, path string, refs bool, p *problems) bool {
	w := &schemaWalk{p: p, kw: schemaKeywords(), root: v, refs: refs}
	before := len(p.errs)
	w.node(v, path, 0)
	if len(p.errs) > before {
		return false
	}
	if refs {
		n, msg := w.size(v, map[string]bool{}, map[string]int{})
		if msg != "" {
			p.add(path, ruleSchemaRef, msg)
			return false
		}
		if n > maxSchemaNodes {
			p.add(path, ruleSchemaLimit, fmt.Sprintf("the schema has more than %d subschemas with its $refs expanded; a check could not run in bounded time, so simplify it", maxSchemaNodes))
			return false
		}
	}
	return true
}

func (w *schemaWalk) node(v any, path string, depth int) {
	if depth > maxSchemaDepth {
		w.p.add(path, ruleSchemaLimit, fmt.Sprintf("subschemas nest deeper than %d levels; flatten the schema", maxSchemaDepth))
		return
	}
	switch t := v.(type) {
	case bool:
		return
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			w.keyword(t, k, keyPath(path, k), depth)
		}
		if u, _ := t["uniqueItems"].(bool); u {
			if n, ok := schemaCount(t["maxItems"]); !ok || n > maxUniqueItems {
				w.p.add(keyPath(path, "uniqueItems"), ruleSchemaLimit, fmt.Sprintf("uniqueItems compares every pair of items; give maxItems at most %d beside it", maxUniqueItems))
			}
		}
	default:
		w.p.add(path, ruleSchemaValue, fmt.Sprintf("a JSON Schema is an object or true/false, not %s", jsonTypeName(v)))
	}
}

// keyword checks one keyword of the schema object m.
func (w *schemaWalk) keyword(m map[string]any, k, kp string, depth int) {
	v := m[k]
	kind, known := w.kw[k]
	switch {
	case strings.HasPrefix(k, ExtensionPrefix):
		return
	case !known:
		w.unknown(k, kp)
		return
	case kind == kwRefused:
		w.p.add(kp, ruleSchemaKeyword, fmt.Sprintf("%s is not supported in a spec's schemas (only local \"#/...\" references are); remove it", k))
		return
	case !w.refs && (kind == kwRef || k == "$defs"):
		w.p.add(kp, ruleSchemaRef, fmt.Sprintf("%s is not allowed inside an input's constraints; give the operation an input_schema to use references", k))
		return
	}
	switch kind {
	case kwSchema:
		w.node(v, kp, depth+1)
	case kwSchemaArray:
		a, ok := v.([]any)
		if !ok || len(a) == 0 {
			w.p.add(kp, ruleSchemaValue, fmt.Sprintf("%s takes a non-empty array of schemas", k))
			return
		}
		for i, e := range a {
			w.node(e, idx(kp, i), depth+1)
		}
	case kwSchemaMap:
		o, ok := v.(map[string]any)
		if !ok {
			w.p.add(kp, ruleSchemaValue, fmt.Sprintf("%s takes an object of schemas", k))
			return
		}
		w.schemaMap(k, o, kp, depth)
	default:
		if msg := w.value(kind, k, v, depth); msg != "" {
			rule := ruleSchemaValue
			if kind == kwRef {
				rule = ruleSchemaRef
			}
			w.p.add(kp, rule, msg)
		}
	}
}

func (w *schemaWalk) schemaMap(k string, o map[string]any, kp string, depth int) {
	names := make([]string, 0, len(o))
	for n := range o {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if k == "patternProperties" {
			if _, err := regexp.Compile(n); err != nil {
				w.p.add(keyPath(kp, n), ruleSchemaPattern, fmt.Sprintf("pattern %s is not a Go (RE2) regular expression: %v", quote(n), err))
				continue
			}
		}
		w.node(o[n], keyPath(kp, n), depth+1)
	}
}

// value checks a keyword whose value is not a subschema; "" when it is fine.
func (w *schemaWalk) value(kind kwKind, k string, v any, depth int) string {
	switch kind {
	case kwNumber, kwPositive:
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Sprintf("%s takes a number, not %s", k, jsonTypeName(v))
		}
		if !checkableNumber(string(n)) {
			return fmt.Sprintf("%s is too long or too large a number (at most %d characters, exponent at most %d)", k, maxNumberLen, maxNumberExp)
		}
		if f, err := n.Float64(); kind == kwPositive && (err != nil || f <= 0) {
			return fmt.Sprintf("%s takes a number above zero", k)
		}
	case kwCount:
		if _, ok := schemaCount(v); !ok {
			return fmt.Sprintf("%s takes a non-negative integer", k)
		}
	case kwBool:
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%s takes true or false", k)
		}
	case kwArray:
		if _, ok := v.([]any); !ok {
			return fmt.Sprintf("%s takes an array of values", k)
		}
	case kwType:
		return typeProblem(v)
	case kwNames:
		return namesProblem(k, v)
	case kwNamesMap:
		o, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s takes an object of name lists", k)
		}
		for _, l := range o {
			if msg := namesProblem(k, l); msg != "" {
				return msg
			}
		}
	case kwPattern:
		s, ok := v.(string)
		if !ok {
			return "pattern takes a regular expression string"
		}
		if _, err := regexp.Compile(s); err != nil {
			return fmt.Sprintf("pattern %s is not a Go (RE2) regular expression, which is what checks it (in linear time): %v", quote(s), err)
		}
	case kwFormat:
		return formatNameProblem(v)
	case kwRef:
		return w.refProblem(v)
	case kwSchemaURI:
		if s, _ := v.(string); depth != 0 || strings.TrimSuffix(s, "#") != draft2020 {
			return fmt.Sprintf("$schema may appear only at the top of the schema, as %s", quote(draft2020))
		}
	}
	return ""
}

func (w *schemaWalk) unknown(k, kp string) {
	names := make([]string, 0, len(w.kw))
	for n, kind := range w.kw {
		if kind != kwRefused {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	msg := fmt.Sprintf("unknown JSON Schema keyword %s", quote(k))
	if near, ok := Closest(k, names); ok {
		msg += fmt.Sprintf("; did you mean %s?", quote(near))
	}
	w.p.add(kp, ruleSchemaKeyword, msg+fmt.Sprintf(" (an extension keyword needs the prefix %q; annotations such as title, description, examples and default are allowed)", ExtensionPrefix))
}

// schemaCount returns a JSON Schema count: a non-negative integer, which
// JSON Schema also lets be written with a zero fraction (2.0).
func schemaCount(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, ok := count(n); ok {
		return i, true
	}
	if !checkableNumber(string(n)) {
		return 0, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() || r.Sign() < 0 || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// count returns v, written as a plain integer, as a non-negative one.
func count(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil && i >= 0
}

func typeProblem(v any) string {
	one := func(s any) bool {
		switch s {
		case "string", "integer", "number", "boolean", "array", "object", "null":
			return true
		}
		return false
	}
	if one(v) {
		return ""
	}
	if a, ok := v.([]any); ok && len(a) > 0 {
		seen := map[any]bool{}
		for _, e := range a {
			if !one(e) || seen[e] {
				return "type lists distinct names among string, integer, number, boolean, array, object and null"
			}
			seen[e] = true
		}
		return ""
	}
	return "type is one of string, integer, number, boolean, array, object and null, or a list of them"
}

func namesProblem(k string, v any) string {
	a, ok := v.([]any)
	if !ok {
		return fmt.Sprintf("%s takes a list of property names", k)
	}
	seen := map[string]bool{}
	for _, e := range a {
		s, ok := e.(string)
		if !ok || seen[s] {
			return fmt.Sprintf("%s takes a list of distinct property names", k)
		}
		seen[s] = true
	}
	return ""
}

func formatNameProblem(v any) string {
	s, _ := v.(string)
	for _, f := range schemaFormats() {
		if s == f {
			return ""
		}
	}
	return fmt.Sprintf("format %s is not one the proxy checks; use one of %s, or a pattern", quote(s), strings.Join(schemaFormats(), ", "))
}

// refProblem checks a $ref: a JSON pointer into the same document.
func (w *schemaWalk) refProblem(v any) string {
	s, ok := v.(string)
	if !ok {
		return "$ref takes a string"
	}
	if !strings.HasPrefix(s, "#") {
		return fmt.Sprintf("$ref %s points outside the document; only local references such as \"#/$defs/name\" are allowed (nothing is ever fetched)", quote(s))
	}
	if _, ok := resolvePointer(w.root, s); !ok {
		return fmt.Sprintf("$ref %s does not name a schema of this document; write \"#/$defs/name\"", quote(s))
	}
	return ""
}

// resolvePointer follows a "#/a/b" URI-fragment JSON pointer from root.
func resolvePointer(root any, ref string) (any, bool) {
	frag, err := url.PathUnescape(strings.TrimPrefix(ref, "#"))
	if err != nil || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return nil, false
	}
	cur := root
	if frag == "" {
		return cur, true
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := cur.(type) {
		case map[string]any:
			next, ok := t[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, false
			}
			cur = t[i]
		default:
			return nil, false
		}
	}
	switch cur.(type) {
	case bool, map[string]any:
		return cur, true
	}
	return nil, false
}

// size counts the subschemas of v with every $ref expanded, stopping early
// past maxSchemaNodes; it reports a reference cycle. stack holds the
// references being expanded; memo the sizes of those done.
func (w *schemaWalk) size(v any, stack map[string]bool, memo map[string]int) (int, string) {
	m, ok := v.(map[string]any)
	if !ok {
		return 1, ""
	}
	n := 1
	add := func(c any) string {
		k, msg := w.size(c, stack, memo)
		n += k
		return msg
	}
	for k, c := range m {
		var msg string
		switch w.kw[k] {
		case kwSchema:
			msg = add(c)
		case kwSchemaArray:
			for _, e := range c.([]any) {
				if msg = add(e); msg != "" {
					break
				}
			}
		case kwSchemaMap:
			if k == "$defs" {
				continue // counted where referenced
			}
			for _, e := range c.(map[string]any) {
				if msg = add(e); msg != "" {
					break
				}
			}
		case kwRef:
			msg = w.refSize(c.(string), stack, memo, &n)
		}
		if msg != "" {
			return n, msg
		}
		if n > maxSchemaNodes {
			return n, ""
		}
	}
	return n, ""
}

func (w *schemaWalk) refSize(ref string, stack map[string]bool, memo map[string]int, n *int) string {
	if k, done := memo[ref]; done {
		*n += k
		return ""
	}
	if stack[ref] {
		return fmt.Sprintf("$ref %s refers back to itself; recursive schemas are not supported, since their check would not be bounded", quote(ref))
	}
	target, _ := resolvePointer(w.root, ref)
	stack[ref] = true
	k, msg := w.size(target, stack, memo)
	delete(stack, ref)
	memo[ref] = k
	*n += k
	return msg
}
