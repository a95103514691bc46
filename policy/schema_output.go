package policy

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// OutputHasField reports whether an operation's output schema out lists
// the field path (as an action step's ${STEP.F1.F2…} names it): F1 under
// the schema's "properties", F2 under F1's, and so on, following local
// "#/..." references; a numeric segment steps into an array's "items" or
// "prefixItems". A field is known only when listed: additionalProperties
// never makes one known. With out absent (nil or JSON null) nothing is
// checked and every path is known.
func OutputHasField(out json.RawMessage, path []string) bool {
	if absent(out) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	root, err := readValue(dec, "$", 0)
	if err != nil {
		return false
	}
	cur := root
	for _, f := range path {
		cur = deref(root, cur)
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if i, err := strconv.Atoi(f); err == nil && i >= 0 {
			if pre, ok := m["prefixItems"].([]any); ok && i < len(pre) {
				cur = pre[i]
				continue
			}
			if items, ok := m["items"]; ok && items != false {
				cur = items
				continue
			}
		}
		props, _ := m["properties"].(map[string]any)
		next, ok := props[f]
		if !ok || next == false {
			return false
		}
		cur = next
	}
	return true
}

// deref follows local $refs from v, a bounded number of times.
func deref(root, v any) any {
	for range maxSchemaDepth {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		next, ok := resolvePointer(root, ref)
		if !ok {
			return nil
		}
		v = next
	}
	return nil
}
