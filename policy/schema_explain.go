package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// explain maps a validation failure to an ArgumentError for its first,
// deepest cause: the field, the keyword broken and the rule in words,
// never the value.
func (a *argSchema) explain(err error, obj map[string]any, from map[string]string) *ArgumentError {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgumentError{Field: "arguments", Rule: "schema", Message: "the arguments do not fit the operation's schema (schema)"}
	}
	leaf, _ := deepest(ve)
	rule, msg, name := describeKind(leaf.ErrorKind)
	field := a.fieldPath(leaf.InstanceLocation, name, obj, from)
	return &ArgumentError{Field: field, Rule: rule, Message: fmt.Sprintf("argument %s does not fit its schema: %s (%s)", field, msg, rule)}
}

// deepest returns the first leaf cause with the longest instance location
// (a missing or undeclared property counting one deeper). An anyOf or
// oneOf whose branches fail no deeper than itself is the cause itself:
// one branch's complaint would mislead.
func deepest(e *jsonschema.ValidationError) (*jsonschema.ValidationError, int) {
	if len(e.Causes) == 0 {
		d := len(e.InstanceLocation)
		if _, _, name := describeKind(e.ErrorKind); name != "" {
			d++
		}
		return e, d
	}
	var best *jsonschema.ValidationError
	bd := -1
	for _, c := range e.Causes {
		if l, d := deepest(c); d > bd {
			best, bd = l, d
		}
	}
	switch e.ErrorKind.(type) {
	case *kind.AnyOf, *kind.OneOf:
		if bd <= len(e.InstanceLocation) {
			return e, len(e.InstanceLocation)
		}
	}
	return best, bd
}

// fieldPath names the field at loc (plus the property name, when the rule
// is about a property of it), prefixed by the place its top-level
// argument came from: "body.items[2].name".
func (a *argSchema) fieldPath(loc []string, name string, obj map[string]any, from map[string]string) string {
	if name != "" {
		loc = append(loc[:len(loc):len(loc)], name)
	}
	if len(loc) == 0 {
		return "arguments"
	}
	top := loc[0]
	where := from[top]
	if where == "" {
		where = a.place(top)
	}
	path := a.fieldName(where, top)
	var cur any = obj[top]
	for _, tok := range loc[1:] {
		if arr, ok := cur.([]any); ok {
			i, _ := strconv.Atoi(tok)
			path = idx(path, i)
			if i >= 0 && i < len(arr) {
				cur = arr[i]
			}
			continue
		}
		path = argKey(path, tok, false)
		if m, ok := cur.(map[string]any); ok {
			cur = m[tok]
		} else {
			cur = nil
		}
	}
	return path
}

// place is where an argument belongs.
func (a *argSchema) place(name string) string {
	switch {
	case a.vars[name]:
		return InPath
	case a.fields[name].in != "":
		return a.fields[name].in
	case a.carries:
		return InBody
	}
	return InQuery
}

// describeKind returns a failure's keyword, the rule in words and, for a
// rule about one property (required, additionalProperties), its name.
func describeKind(k jsonschema.ErrorKind) (rule, msg, name string) {
	switch k := k.(type) {
	case *kind.Type:
		return "type", "it must be of type " + strings.Join(k.Want, " or "), ""
	case *kind.Enum:
		return "enum", "it must be one of " + boundedJSON(k.Want), ""
	case *kind.Const:
		return "const", "it must be " + boundedJSON(k.Want), ""
	case *kind.Pattern:
		return "pattern", "it must match the pattern " + boundedText(k.Want), ""
	case *kind.Format:
		return "format", "it must be a valid " + k.Want, ""
	case *kind.MinLength:
		return "minLength", fmt.Sprintf("it must be at least %d characters long", k.Want), ""
	case *kind.MaxLength:
		return "maxLength", fmt.Sprintf("it must be at most %d characters long", k.Want), ""
	case *kind.Minimum:
		return "minimum", "it must be at least " + ratText(k.Want), ""
	case *kind.Maximum:
		return "maximum", "it must be at most " + ratText(k.Want), ""
	case *kind.ExclusiveMinimum:
		return "exclusiveMinimum", "it must be more than " + ratText(k.Want), ""
	case *kind.ExclusiveMaximum:
		return "exclusiveMaximum", "it must be less than " + ratText(k.Want), ""
	case *kind.MultipleOf:
		return "multipleOf", "it must be a multiple of " + ratText(k.Want), ""
	case *kind.MinItems:
		return "minItems", fmt.Sprintf("it must have at least %d items", k.Want), ""
	case *kind.MaxItems:
		return "maxItems", fmt.Sprintf("it must have at most %d items", k.Want), ""
	case *kind.UniqueItems:
		return "uniqueItems", "its items must all differ", ""
	case *kind.MinProperties:
		return "minProperties", fmt.Sprintf("it must have at least %d fields", k.Want), ""
	case *kind.MaxProperties:
		return "maxProperties", fmt.Sprintf("it must have at most %d fields", k.Want), ""
	case *kind.Required:
		return "required", "it is required", first(k.Missing)
	case *kind.DependentRequired:
		return "dependentRequired", fmt.Sprintf("it is required when %s is given", quote(k.Prop)), first(k.Missing)
	case *kind.AdditionalProperties:
		return "additionalProperties", "it is not declared, and the schema allows no other fields", first(k.Properties)
	case *kind.FalseSchema:
		return "false", "no value is allowed here", ""
	case *kind.Not:
		return "not", "it must not match the schema under not", ""
	case *kind.OneOf:
		return "oneOf", "it must match exactly one of the schemas under oneOf", ""
	case *kind.AnyOf:
		return "anyOf", "it must match one of the schemas under anyOf", ""
	}
	rule = "schema"
	if kp := k.KeywordPath(); len(kp) > 0 {
		rule = kp[0]
	}
	return rule, "it breaks the schema's " + rule + " rule", ""
}

func first(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}

// boundedJSON renders a schema's own value (enum, const) for a message.
func boundedJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "the values its schema gives"
	}
	return boundedText(string(b))
}

// ratText renders a schema's bound: 5, 2.5, 0.333333.
func ratText(r *big.Rat) string {
	if r == nil {
		return "its schema's bound"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return strings.TrimRight(r.FloatString(6), "0")
}
