package action

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// argsRoot is the reference root of the action's arguments; no step may
// use it as its id.
const argsRoot = "args"

// maxRefLen bounds the text between "${" and "}".
const maxRefLen = 256

// segment is a piece of a template string: literal text, or a reference
// (ref non-empty) written ${ref}.
type segment struct {
	lit string
	ref string
}

// scanTemplate splits s into literal and reference segments. "$${" is a
// literal "${"; a "$" not followed by "{" is literal. Errors are messages
// without a sentinel; callers wrap them.
func scanTemplate(s string) ([]segment, error) {
	var segs []segment
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %s is not closed; write ${args.NAME} or ${STEP.FIELD} (or $${ for a literal \"${\")", quote(s[i:]))
			}
			ref := s[i+2 : i+2+end]
			if err := checkRef(ref); err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				segs = append(segs, segment{lit: lit.String()})
				lit.Reset()
			}
			segs = append(segs, segment{ref: ref})
			i += end + 3
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 {
		segs = append(segs, segment{lit: lit.String()})
	}
	return segs, nil
}

// checkRef validates the text of one reference: dot-separated, non-empty
// segments of letters, digits, '_' and '-'.
func checkRef(ref string) error {
	const form = "; write ${args.NAME} or ${STEP.FIELD[.FIELD…]}"
	if ref == "" {
		return errors.New("empty template ${}" + form)
	}
	if len(ref) > maxRefLen {
		return fmt.Errorf("template reference %s is longer than %d bytes", quote(ref), maxRefLen)
	}
	for _, part := range strings.Split(ref, ".") {
		if part == "" {
			return fmt.Errorf("template ${%s} has an empty segment%s", ref, form)
		}
		for i := 0; i < len(part); i++ {
			if c := part[i]; !isAlnum(c) && c != '_' && c != '-' {
				return fmt.Errorf("template %s contains %s%s", quote("${"+ref+"}"), quote(string(rune(c))), form)
			}
		}
	}
	return nil
}

// errMissingArg marks a reference to an argument the caller did not give.
var errMissingArg = errors.New("argument not given")

// expander evaluates templates against arguments and step outputs.
type expander struct {
	args  map[string]any
	steps map[string]map[string]any
	// missingEmpty renders references to absent arguments as "" (previews).
	missingEmpty bool
}

// Expand replaces the templates in v: strings are scanned for ${…}
// references, maps and slices ([]any, map[string]any) are expanded
// element by element into new values, anything else is returned as is. A
// string that is exactly one reference becomes the referenced value with
// its own type; references inside longer strings are replaced by the
// value's text (a string as is, anything else as JSON). ${args.NAME} reads
// args (NAME may contain dots when args has such a key; the longest
// matching key wins and the rest is a field path), ${STEP.F1.F2…} reads
// the output of step STEP in steps, ${args} and ${STEP} alone are the whole
// value. Inside a map or array, an element that is exactly one reference to
// an argument args does not hold is left out, so optional inputs may be
// omitted. Every failure (malformed template, unknown argument, step or
// field) wraps ErrTemplate and names the reference and where it occurs.
func Expand(v any, args map[string]any, steps map[string]map[string]any) (any, error) {
	e := &expander{args: args, steps: steps}
	out, err := e.value(v, "")
	if errors.Is(err, errMissingArg) {
		return nil, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	return out, err
}

// value expands v; path locates it for messages.
func (e *expander) value(v any, path string) (any, error) {
	switch t := v.(type) {
	case string:
		return e.str(t, path)
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			r, err := e.value(x, keyPath(path, k))
			if errors.Is(err, errMissingArg) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
		for i, x := range t {
			r, err := e.value(x, idx(path, i))
			if errors.Is(err, errMissingArg) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return v, nil
}

// str expands one string. It returns an error wrapping errMissingArg (and
// not ErrTemplate) when s is exactly a reference to an absent argument.
func (e *expander) str(s, path string) (any, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	at := ""
	if path != "" {
		at = " at " + path
	}
	segs, err := scanTemplate(s)
	if err != nil {
		return nil, fmt.Errorf("%w%s: %s", ErrTemplate, at, err.Error())
	}
	if len(segs) == 1 && segs[0].ref != "" {
		v, err := e.resolve(segs[0].ref)
		if errors.Is(err, errMissingArg) {
			return nil, fmt.Errorf("${%s}%s: %w", segs[0].ref, at, err)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: ${%s}%s: %s", ErrTemplate, segs[0].ref, at, err.Error())
		}
		return v, nil
	}
	var b strings.Builder
	for _, sg := range segs {
		if sg.ref == "" {
			b.WriteString(sg.lit)
			continue
		}
		v, err := e.resolve(sg.ref)
		if errors.Is(err, errMissingArg) && e.missingEmpty {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: ${%s}%s: %s", ErrTemplate, sg.ref, at, err.Error())
		}
		text, err := stringify(v)
		if err != nil {
			return nil, fmt.Errorf("%w: ${%s}%s: %s", ErrTemplate, sg.ref, at, err.Error())
		}
		b.WriteString(text)
	}
	return b.String(), nil
}

// resolve looks a reference up.
func (e *expander) resolve(ref string) (any, error) {
	parts := strings.Split(ref, ".")
	if parts[0] == argsRoot {
		if len(parts) == 1 {
			return e.args, nil
		}
		for k := len(parts); k > 1; k-- {
			if v, ok := e.args[strings.Join(parts[1:k], ".")]; ok {
				return descend(v, parts[k:], strings.Join(parts[:k], "."))
			}
		}
		return nil, fmt.Errorf("%w: the action was called without %s", errMissingArg, quote(parts[1]))
	}
	out, ok := e.steps[parts[0]]
	if !ok {
		return nil, fmt.Errorf("step %s has no output: no such step, or it has not run yet", quote(parts[0]))
	}
	return descend(out, parts[1:], parts[0])
}

// descend follows a field path into a decoded JSON value. Numeric fields
// index arrays.
func descend(v any, path []string, at string) (any, error) {
	for _, f := range path {
		switch t := v.(type) {
		case map[string]any:
			x, ok := t[f]
			if !ok {
				return nil, fmt.Errorf("%s has no field %s; it has %s", at, quote(f), list(sortedKeys(t, 20)))
			}
			v = x
		case []any:
			i, err := strconv.Atoi(f)
			if err != nil || i < 0 || i >= len(t) {
				return nil, fmt.Errorf("%s is an array of %d elements; %s is not an index into it", at, len(t), quote(f))
			}
			v = t[i]
		default:
			return nil, fmt.Errorf("%s is %s, which has no field %s", at, jsonKind(v), quote(f))
		}
		at += "." + f
	}
	return v, nil
}

// stringify renders a value inside a longer string: a string as is,
// anything else as JSON.
func stringify(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("value cannot be written as text: %v", err)
	}
	return string(b), nil
}

// sortedKeys returns up to max keys of m, sorted.
func sortedKeys(m map[string]any, max int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > max {
		keys = append(keys[:max], "…")
	}
	return keys
}

// jsonKind names the JSON type of a decoded value for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, float32, int, int64, int32, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// Args returns the arguments of s's operation: the action's arguments
// unchanged (a copy) when the step has no inputs table, else its inputs
// expanded with Expand. Every failure wraps ErrTemplate.
func (s Step) Args(args map[string]any, steps map[string]map[string]any) (map[string]any, error) {
	if s.Inputs == nil {
		out := make(map[string]any, len(args))
		for k, v := range args {
			out[k] = v
		}
		return out, nil
	}
	v, err := Expand(s.Inputs, args, steps)
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", quote(s.ID), err)
	}
	out, _ := v.(map[string]any)
	return out, nil
}

// PreviewText renders the approval preview with args: references to
// arguments not given render as empty text. It returns "" when the
// manifest has no preview. Every failure wraps ErrTemplate.
func (m *Manifest) PreviewText(args map[string]any) (string, error) {
	if m.Approval.Preview == "" {
		return "", nil
	}
	e := &expander{args: args, missingEmpty: true}
	v, err := e.str(m.Approval.Preview, "approval.preview")
	if errors.Is(err, errMissingArg) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return stringify(v)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
