package policy

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkNestedNames refuses, in the JSON object values of the body's
// arguments, a key equal but for case to a property the schema declares
// for that object (through $ref, allOf, anyOf, oneOf, if/then/else and
// items), which it is not: Go's encoding/json would bind it to that
// property, which the check never saw given.
func (a *argSchema) checkNestedNames(obj map[string]any, from map[string]string) *ArgumentError {
	top := closure([]*jsonschema.Schema{a.schema})
	for _, name := range sortedKeys(obj) {
		if from[name] != InBody {
			continue
		}
		var subs []*jsonschema.Schema
		for _, s := range top {
			if c := s.Properties[name]; c != nil {
				subs = append(subs, c)
			}
		}
		if err := nestedNames(subs, obj[name], a.fieldName(InBody, name)); err != nil {
			return err
		}
	}
	return nil
}

func nestedNames(schemas []*jsonschema.Schema, v any, path string) *ArgumentError {
	switch v.(type) {
	case map[string]any, []any:
	default:
		return nil // a scalar has no keys
	}
	set := closure(schemas)
	if len(set) == 0 {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		declared := map[string]string{}
		for _, s := range set {
			for p := range s.Properties {
				declared[foldKey(p)] = p
			}
		}
		for _, k := range sortedKeys(v) {
			kp := keyPath(path, k)
			if d, ok := declared[foldKey(k)]; ok && d != k {
				return &ArgumentError{Field: kp, Rule: "name", Message: fmt.Sprintf(
					"argument %s is not the declared field %s, but some servers read it as that one (keys compared without regard to case); send it as %s (name)",
					kp, quote(d), quote(d))}
			}
			var subs []*jsonschema.Schema
			for _, s := range set {
				if c := s.Properties[k]; c != nil {
					subs = append(subs, c)
				}
			}
			if err := nestedNames(subs, v[k], kp); err != nil {
				return err
			}
		}
	case []any:
		for i, item := range v {
			var subs []*jsonschema.Schema
			for _, s := range set {
				switch it := s.Items.(type) {
				case *jsonschema.Schema:
					subs = append(subs, it)
				case []*jsonschema.Schema:
					if i < len(it) {
						subs = append(subs, it[i])
					}
				}
				if s.Items2020 != nil {
					subs = append(subs, s.Items2020)
				}
				if i < len(s.PrefixItems) {
					subs = append(subs, s.PrefixItems[i])
				}
			}
			if err := nestedNames(subs, item, idx(path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// closure returns schemas with every schema they apply in place ($ref,
// allOf, anyOf, oneOf, if, then, else), each once.
func closure(schemas []*jsonschema.Schema) []*jsonschema.Schema {
	seen := map[*jsonschema.Schema]bool{}
	var out []*jsonschema.Schema
	var add func(s *jsonschema.Schema)
	add = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		out = append(out, s)
		add(s.Ref)
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf} {
			for _, c := range list {
				add(c)
			}
		}
		add(s.If)
		add(s.Then)
		add(s.Else)
	}
	for _, s := range schemas {
		add(s)
	}
	return out
}
