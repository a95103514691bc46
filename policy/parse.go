package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// ExtensionPrefix starts the keys a spec may carry outside the schema
// (tooling metadata such as "x-owner"); ParseSpec ignores them. Any other
// unknown key is an error.
const ExtensionPrefix = "x-"

// MaxSpecSize is the largest spec document ParseSpec reads, in bytes.
const MaxSpecSize = 4 << 20

// maxJSONDepth bounds nesting so a hostile document cannot recurse deeply.
const maxJSONDepth = 64

// ParseSpec decodes and fully validates one aileron.connector.v1 document.
// file names the document in error messages. Unknown fields are errors
// naming the closest known one (a typo must never weaken policy: an
// "aproval" is not silently ignored); a field outside the schema on
// purpose needs the ExtensionPrefix ("x-"). Wrong JSON types, duplicate
// keys, keys that differ from a known field only in case, invalid UTF-8
// and documents over MaxSpecSize are errors too. On failure it returns every problem found, joined
// with errors.Join; each is a *ValidationError wrapping ErrInvalidSpec
// (use errors.As / errors.Is).
func ParseSpec(file string, data []byte) (*Spec, error) {
	p := &problems{file: file}
	if len(data) > MaxSpecSize {
		p.add("$", ruleSize, fmt.Sprintf("spec is %d bytes, larger than the %d-byte limit; split the connector or trim descriptions", len(data), MaxSpecSize))
		return nil, p.err()
	}
	if !utf8.Valid(data) {
		p.add("$", ruleJSON, "spec is not valid UTF-8; save the file as UTF-8")
		return nil, p.err()
	}
	tree, ok := readDocument(data, p)
	if !ok {
		return nil, p.err()
	}
	checkShape(tree, specShape(), "$", p)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		p.add("$", ruleJSON, "cannot decode spec: "+err.Error())
		return nil, p.err()
	}
	if err := s.Validate(file); err != nil {
		return nil, err
	}
	return &s, nil
}

// readDocument parses data into a generic tree (objects as map[string]any,
// numbers as json.Number), rejecting syntax errors, duplicate keys, excess
// depth and trailing data.
func readDocument(data []byte, p *problems) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, "$", 0)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = fmt.Errorf("unexpected data after the top-level JSON value at %s", position(data, dec.InputOffset()))
		}
	}
	if err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			ve.File = p.file
			p.errs = append(p.errs, ve)
			return nil, false
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			err = fmt.Errorf("%s at %s", se.Error(), position(data, se.Offset))
		} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("unexpected end of JSON input; the document is truncated")
		}
		p.add("$", ruleJSON, "invalid JSON: "+err.Error())
		return nil, false
	}
	if _, isObj := v.(map[string]any); !isObj {
		p.add("$", ruleJSONType, "the document must be a JSON object")
		return nil, false
	}
	return v, true
}

// position renders a byte offset as "line L, column C".
func position(data []byte, off int64) string {
	if off < 0 || off > int64(len(data)) {
		off = int64(len(data))
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("line %d, column %d", line, col)
}

func readValue(dec *json.Decoder, path string, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, &ValidationError{Path: path, Rule: ruleJSON, Message: fmt.Sprintf("JSON nesting is deeper than %d levels", maxJSONDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return tok, nil
	}
	switch d {
	case '{':
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			kp := keyPath(path, k)
			if _, dup := m[k]; dup {
				return nil, &ValidationError{Path: kp, Rule: ruleJSONDuplicate, Message: fmt.Sprintf("key %s appears twice in the same object; keep one", quote(k))}
			}
			v, err := readValue(dec, kp, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		_, err = dec.Token()
		return m, err
	case '[':
		var a []any
		for i := 0; dec.More(); i++ {
			v, err := readValue(dec, idx(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err = dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %q", rune(d))
}

type shapeKind uint8

const (
	shString shapeKind = iota
	shBool
	shArray
	shObject
	shStringOrObject
	shNumber      // a JSON number
	shCount       // a non-negative integer
	shAny         // any JSON value (checked later, e.g. a JSON Schema)
	shBoolOrNames // true|false, or a list of strings
)

// shape describes the JSON types the schema expects at one position.
type shape struct {
	kind   shapeKind
	fields map[string]*shape
	elem   *shape
}

func specShape() *shape {
	str := &shape{kind: shString}
	boolean := &shape{kind: shBool}
	obj := func(f map[string]*shape) *shape { return &shape{kind: shObject, fields: f} }
	arr := func(e *shape) *shape { return &shape{kind: shArray, elem: e} }
	num, cnt, anyv := &shape{kind: shNumber}, &shape{kind: shCount}, &shape{kind: shAny}
	input := obj(map[string]*shape{"name": str, "type": str, "required": {kind: shBoolOrNames}, "description": str,
		"in": str, "enum": arr(anyv), "const": anyv, "pattern": str, "format": str,
		"minimum": num, "maximum": num, "exclusiveMinimum": num, "exclusiveMaximum": num,
		"minLength": cnt, "maxLength": cnt, "items": anyv, "minItems": cnt, "maxItems": cnt,
		"properties": {kind: shObject, elem: anyv}, "additionalProperties": anyv})
	audit := obj(map[string]*shape{"name": str, "source": str, "redact": str})
	place := obj(map[string]*shape{"header": str, "format": str, "query": str})
	cred := &shape{kind: shStringOrObject, fields: map[string]*shape{
		"kind": str, "header": str, "format": str, "query": str, "service": str, "alternatives": arr(place)}}
	op := obj(map[string]*shape{
		"name": str, "summary": str, "description": str, "method": str, "path": str,
		"hosts": arr(str), "idempotency": str, "approval": str, "credential": cred,
		"inputs": arr(input), "audit": arr(audit), "websocket": boolean, "usage": str,
		"visibility": str, "input_schema": anyv, "output_schema": anyv,
	})
	tool := obj(map[string]*shape{"name": str, "description": str, "operations": arr(op)})
	return obj(map[string]*shape{
		"schema_version": str,
		"connector":      obj(map[string]*shape{"fqn": str, "version": str}),
		"tools":          arr(tool),
	})
}

func (s *shape) describe() string {
	switch s.kind {
	case shString:
		return "a string"
	case shBool:
		return "true or false"
	case shArray:
		return "an array of " + strings.TrimPrefix(strings.TrimPrefix(s.elem.describe(), "a "), "an ") + "s"
	case shObject:
		return "an object"
	case shNumber:
		return "a number"
	case shCount:
		return "a non-negative integer"
	case shBoolOrNames:
		return "true, false or a list of property names"
	}
	return "a string or an object"
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return "null"
}

// checkShape reports every value whose JSON type differs from the schema.
// JSON null is accepted anywhere and means "absent".
func checkShape(v any, s *shape, path string, p *problems) {
	if v == nil {
		return
	}
	ok := s.kind == shAny
	switch t := v.(type) {
	case json.Number:
		ok = ok || s.kind == shNumber
		if s.kind == shCount {
			_, ok = count(t)
		}
	case string:
		ok = ok || s.kind == shString || s.kind == shStringOrObject
		if ok && s.kind == shStringOrObject && t == "" {
			// Credential is the only string-or-object field; "" would
			// otherwise decode to "no credential".
			p.add(path, ruleCredentialKind, "credential is an empty string; use "+credentialKindsList+", or remove the field")
		}
	case bool:
		ok = ok || s.kind == shBool || s.kind == shBoolOrNames
	case []any:
		if s.kind == shBoolOrNames {
			ok = namesProblem("required", t) == ""
		}
		if s.kind == shArray {
			ok = true
			for i, e := range t {
				checkShape(e, s.elem, idx(path, i), p)
			}
		}
	case map[string]any:
		if s.kind == shObject && s.elem != nil {
			ok = true // an object of values of one shape
			for _, k := range sortedKeys(t) {
				checkShape(t[k], s.elem, keyPath(path, k), p)
			}
		} else if s.kind == shObject || s.kind == shStringOrObject {
			ok = true
			checkFields(t, s, path, p)
		}
	}
	if !ok {
		p.add(path, ruleJSONType, fmt.Sprintf("expected %s, got %s", s.describe(), jsonTypeName(v)))
	}
}

func checkFields(m map[string]any, s *shape, path string, p *problems) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if fs, known := s.fields[k]; known {
			checkShape(m[k], fs, keyPath(path, k), p)
			continue
		}
		if strings.HasPrefix(k, ExtensionPrefix) {
			continue // an extension, explicitly outside the schema
		}
		names := make([]string, 0, len(s.fields))
		for name := range s.fields {
			names = append(names, name)
		}
		sort.Strings(names)
		if cased := caseVariant(k, names); cased != "" {
			p.add(keyPath(path, k), ruleJSONCase, fmt.Sprintf("field names are case-sensitive: write %s, not %s", quote(cased), quote(k)))
			continue
		}
		msg := fmt.Sprintf("unknown field %s", quote(k))
		if near, ok := Closest(k, names); ok {
			msg += fmt.Sprintf("; did you mean %s?", quote(near))
		}
		p.add(keyPath(path, k), ruleUnknownField, msg+fmt.Sprintf(" (known here: %s; an extension field needs the prefix %q)",
			strings.Join(names, ", "), ExtensionPrefix))
	}
}

// caseVariant returns the name k equals but for case, or "".
func caseVariant(k string, names []string) string {
	for _, name := range names {
		if strings.EqualFold(name, k) {
			return name
		}
	}
	return ""
}

// keyPath appends an object key to a JSON path: ".key" for plain keys,
// `["key"]` (Go-quoted, bounded) for anything else, so hostile keys cannot
// smuggle control characters into messages.
func keyPath(path, k string) string {
	if isIdent(k) {
		return path + "." + k
	}
	return path + "[" + quote(k) + "]"
}
