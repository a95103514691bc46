package action

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// ToolName is the action's name as an MCP tool name: dashes become
// underscores ("send-email" → "send_email").
func (m *Manifest) ToolName() string { return strings.ReplaceAll(m.Name, "-", "_") }

// JSON Schema type names.
const (
	jsString  = "string"
	jsInteger = "integer"
	jsNumber  = "number"
	jsBoolean = "boolean"
	jsObject  = "object"
	jsArray   = "array"
)

// jsonType maps a free-form manifest type to a JSON Schema type, a string
// format (may be empty) and, for "[T]", the element type T. Matching
// ignores case and a trailing "!" (GraphQL non-null). Unknown types map to
// the empty string: any value.
func jsonType(t string) (typ, format, elem string) {
	t = strings.TrimSuffix(strings.TrimSpace(t), "!")
	if len(t) >= 2 && t[0] == '[' && t[len(t)-1] == ']' {
		return jsArray, "", strings.TrimSuffix(strings.TrimSpace(t[1:len(t)-1]), "!")
	}
	switch strings.ToLower(t) {
	case "string", "str", "text", "id":
		return jsString, "", ""
	case "datetime", "date-time", "timestamp":
		return jsString, "date-time", ""
	case "date":
		return jsString, "date", ""
	case "uri", "url":
		return jsString, "uri", ""
	case "email":
		return jsString, "email", ""
	case "integer", "int", "int32", "int64", "long":
		return jsInteger, "", ""
	case "number", "float", "double", "decimal":
		return jsNumber, "", ""
	case "boolean", "bool":
		return jsBoolean, "", ""
	case "object", "json", "jsonobject", "map":
		return jsObject, "", ""
	case "array", "list":
		return jsArray, "", ""
	}
	return "", "", ""
}

// InputSchema returns the JSON Schema of the action's arguments, for MCP
// tools/list: {"type":"object","properties":{…},"additionalProperties":
// false,"required":[…]} ("required" only when some input is required).
// Each property has its mapped type (none for unknown types, whose name is
// then appended to the description), "format" for date/time, URI and
// e-mail types, "items" for arrays with a known element type,
// "description", "title" from Label, and "x-multiline": true for multiline
// inputs. The result is a fresh value the caller may modify.
func (m *Manifest) InputSchema() map[string]any {
	props := map[string]any{}
	required := []any{}
	for _, in := range m.Inputs {
		props[in.Name] = inputSchema(in)
		if in.Required {
			required = append(required, in.Name)
		}
	}
	s := map[string]any{"type": jsObject, "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func inputSchema(in Input) map[string]any {
	p := map[string]any{}
	desc := in.Description
	note := func(s string) {
		if desc != "" {
			desc += " "
		}
		desc += "(" + s + ")"
	}
	typ, format, elem := jsonType(in.Type)
	switch typ {
	case "":
		note("type: " + in.Type)
	case jsArray:
		p["type"] = typ
		if elem == "" {
			elem = in.ItemsType
		}
		if elem != "" {
			et, ef, _ := jsonType(elem)
			switch {
			case et == "" || et == jsArray:
				note("items: " + elem)
			case ef != "":
				p["items"] = map[string]any{"type": et, "format": ef}
			default:
				p["items"] = map[string]any{"type": et}
			}
		}
	default:
		p["type"] = typ
		if format != "" {
			p["format"] = format
		}
	}
	if desc != "" {
		p["description"] = desc
	}
	if in.Label != "" {
		p["title"] = in.Label
	}
	if in.Multiline {
		p["x-multiline"] = true
	}
	return p
}

// CheckArgs checks args (decoded JSON) against the declared inputs: every
// required input present and not null, no undeclared input, and values of
// inputs whose type maps to a JSON type (see InputSchema) of that type; an
// integer may arrive as a whole float64 such as 3.0. It returns every
// problem joined with errors.Join, each wrapping ErrInvalidArgs and naming
// the input.
func (m *Manifest) CheckArgs(args map[string]any) error {
	declared := make(map[string]Input, len(m.Inputs))
	names := make([]string, 0, len(m.Inputs))
	for _, in := range m.Inputs {
		declared[in.Name] = in
		names = append(names, in.Name)
	}
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: action %s: %s", ErrInvalidArgs, quote(m.Name), fmt.Sprintf(format, a...)))
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		in, ok := declared[k]
		if !ok {
			bad("unknown input %s; accepted inputs: %s", quote(k), list(names))
			continue
		}
		if args[k] == nil {
			continue
		}
		if msg := typeMismatch(in, args[k], k); msg != "" {
			bad("%s", msg)
		}
	}
	for _, in := range m.Inputs {
		if v, ok := args[in.Name]; in.Required && (!ok || v == nil) {
			what := ""
			if in.Description != "" {
				what = " (" + in.Description + ")"
			}
			bad("missing required input %s%s", quote(in.Name), what)
		}
	}
	return errors.Join(errs...)
}

// typeMismatch describes v not fitting in's type, or returns "".
func typeMismatch(in Input, v any, at string) string {
	typ, _, elem := jsonType(in.Type)
	if !hasJSONType(typ, v) {
		return fmt.Sprintf("input %s must be %s (type %s), got %s", quote(at), article(typ), quote(in.Type), jsonKind(v))
	}
	if typ != jsArray {
		return ""
	}
	if elem == "" {
		elem = in.ItemsType
	}
	et, _, _ := jsonType(elem)
	if et == "" {
		return ""
	}
	for i, e := range v.([]any) {
		if e != nil && !hasJSONType(et, e) {
			return fmt.Sprintf("input %s element %d must be %s (items %s), got %s", quote(at), i, article(et), quote(elem), jsonKind(e))
		}
	}
	return ""
}

func article(typ string) string {
	switch typ {
	case jsInteger, jsObject, jsArray:
		return "an " + typ
	}
	return "a " + typ
}

// hasJSONType reports whether a decoded JSON value has JSON Schema type
// typ; the empty type accepts anything.
func hasJSONType(typ string, v any) bool {
	switch typ {
	case jsString:
		_, ok := v.(string)
		return ok
	case jsBoolean:
		_, ok := v.(bool)
		return ok
	case jsObject:
		_, ok := v.(map[string]any)
		return ok
	case jsArray:
		_, ok := v.([]any)
		return ok
	case jsNumber:
		_, ok := number(v)
		return ok
	case jsInteger:
		f, ok := number(v)
		return ok && f == math.Trunc(f) && !math.IsInf(f, 0)
	}
	return true
}

// number converts a decoded JSON number to float64.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, !math.IsNaN(t)
	case float32:
		return float64(t), !math.IsNaN(float64(t))
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case int32:
		return float64(t), true
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	}
	return 0, false
}
