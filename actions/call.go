package actions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// OperationCall builds the call that runs operation op of tool of installed
// connector fqn with args, as the sandbox API's run endpoint and action steps
// send it. The returned Call has no Session, Wait or ApprovedBy: the caller
// sets them.
//
// The request is the operation's method, its first host (canonical
// host:port) and its path with each {name} (and a trailing {name...})
// template filled from args[name], path-escaped. Each other argument goes
// where the operation says it travels (policy.Operation.ArgumentIn: an
// input's "in", else the body for POST, PATCH and PUT and the query for
// every other method): query parameters with keys sorted (strings, numbers
// and booleans as text; an array as the key repeated once per element; JSON
// null omitted), body fields as one JSON object body (Content-Type:
// application/json; POST, PATCH and PUT always send one). Equal arguments always build byte-identical calls, so
// a retry after an approval matches the approved request.
//
// OperationCall is the sandbox's: an internal operation (visibility
// "internal") is as if it were not installed, so it is not found and no
// error lists it. Action steps use OperationStepCall.
//
// Errors: an unknown connector, tool or operation wraps state.ErrNotFound and lists
// what is installed; a missing path argument, a path argument that is not a
// string, number or boolean or that makes the path non-canonical (empty, ".",
// "..", a '/' in a single-segment template), an object (or nested array) in
// a query parameter, and an operation that declares no method, path or host
// wrap state.ErrInvalidArgument, naming the argument.
func OperationCall(pol *policy.Policy, fqn, tool, op string, args map[string]any) (dataplane.Call, *policy.Operation, error) {
	return operationCall(pol, fqn, tool, op, args, false)
}

// OperationStepCall is OperationCall for an action step: internal
// operations are found, and the call is marked Step, so policy lets it
// reach them.
func OperationStepCall(pol *policy.Policy, fqn, tool, op string, args map[string]any) (dataplane.Call, *policy.Operation, error) {
	return operationCall(pol, fqn, tool, op, args, true)
}

func operationCall(pol *policy.Policy, fqn, tool, op string, args map[string]any, step bool) (dataplane.Call, *policy.Operation, error) {
	o, ok := pol.Lookup(fqn, tool, op)
	if !ok || !step && o.Spec.IsInternal() {
		return dataplane.Call{}, nil, notFoundOperation(pol, fqn, tool, op, step)
	}
	s := o.Spec
	if s.Method == "" || s.Path == "" || len(o.Hosts) == 0 {
		return dataplane.Call{}, nil, fmt.Errorf("%w: operation %s/%s of %s (%s) declares no method, path or host, so it cannot be called; the connector's spec must declare all three",
			state.ErrInvalidArgument, tool, op, o.Ref(), o.Origin)
	}
	escaped, used, err := fillPath(s.Path, args)
	if err != nil {
		return dataplane.Call{}, nil, fmt.Errorf("operation %s/%s of %s: %w", tool, op, o.Ref(), err)
	}
	unescaped, err := url.PathUnescape(escaped)
	if err != nil { // fillPath only produces valid escapes; kept for safety
		return dataplane.Call{}, nil, fmt.Errorf("%w: path %q: %v", state.ErrInvalidArgument, escaped, err)
	}
	c := dataplane.Call{
		Operation: o,
		Step:      step,
		Method:    s.Method,
		URL:       &url.URL{Scheme: "https", Host: o.Hosts[0].String(), Path: unescaped, RawPath: escaped},
	}
	query, body := map[string]any{}, map[string]any{}
	for k, v := range args {
		switch {
		case used[k]:
		case o.ArgumentIn(k) == policy.InBody:
			body[k] = v
		default:
			query[k] = v
		}
	}
	if err := fillRest(&c, query, body); err != nil {
		return dataplane.Call{}, nil, fmt.Errorf("operation %s/%s of %s: %w", tool, op, o.Ref(), err)
	}
	return c, o, nil
}

// fillRest puts the arguments not used in the path on c: query as its
// query string, body as a JSON object body. A method that carries a body
// (POST, PATCH, PUT) always gets one, "{}" when body is empty; another
// method only when some argument travels in the body.
func fillRest(c *dataplane.Call, query, body map[string]any) error {
	q, err := queryString(query)
	if err != nil {
		return err
	}
	c.URL.RawQuery = q
	switch c.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut:
	default:
		if len(body) == 0 {
			return nil
		}
	}
	b, err := jsonBody(body)
	if err != nil {
		return err
	}
	c.Body = b
	c.Header = http.Header{"Content-Type": {"application/json"}}
	return nil
}

// notFoundOperation explains which of fqn, tool and op is unknown and lists
// what is installed at that level; unless step, what only internal
// operations make up is not listed. The error wraps state.ErrNotFound.
func notFoundOperation(pol *policy.Policy, fqn, tool, op string, step bool) error {
	var conns, tools, ops []string
	for _, o := range pol.Operations() {
		if !step && o.Spec.IsInternal() {
			continue
		}
		conns = appendNew(conns, o.FQN)
		if o.FQN == fqn {
			tools = appendNew(tools, o.Tool)
			if o.Tool == tool {
				ops = appendNew(ops, o.Spec.Name)
			}
		}
	}
	list := func(xs []string) string {
		if len(xs) == 0 {
			return "none"
		}
		sort.Strings(xs)
		return strings.Join(xs, ", ")
	}
	switch {
	case len(tools) == 0:
		return fmt.Errorf("%w: connector %q is not installed; installed connectors: %s", state.ErrNotFound, fqn, list(conns))
	case len(ops) == 0:
		return fmt.Errorf("%w: connector %s has no tool %q; its tools: %s", state.ErrNotFound, fqn, tool, list(tools))
	}
	return fmt.Errorf("%w: tool %s of connector %s has no operation %q; its operations: %s", state.ErrNotFound, tool, fqn, op, list(ops))
}

func appendNew(xs []string, s string) []string {
	for _, x := range xs {
		if x == s {
			return xs
		}
	}
	return append(xs, s)
}

// fillPath fills the {name} and {name...} templates of pattern (a validated
// spec path) from args, path-escaping each value, and checks the result is a
// canonical path. used reports the arguments consumed. Errors wrap
// state.ErrInvalidArgument and name the argument.
func fillPath(pattern string, args map[string]any) (escaped string, used map[string]bool, err error) {
	segs := strings.Split(pattern, "/")
	used = map[string]bool{}
	for i, seg := range segs {
		if len(seg) < 2 || seg[0] != '{' || seg[len(seg)-1] != '}' {
			continue
		}
		name, multi := strings.CutSuffix(seg[1:len(seg)-1], "...")
		v, ok := args[name]
		if !ok {
			return "", nil, fmt.Errorf("%w: missing argument %q, which fills {%s} in path %s", state.ErrInvalidArgument, name, seg[1:len(seg)-1], pattern)
		}
		text, ok := scalarText(v)
		if !ok {
			return "", nil, fmt.Errorf("%w: argument %q fills path %s and must be a string, number or boolean, not %s", state.ErrInvalidArgument, name, pattern, jsonKind(v))
		}
		if text == "" {
			return "", nil, fmt.Errorf("%w: argument %q is empty; it fills {%s} in path %s and needs a value", state.ErrInvalidArgument, name, name, pattern)
		}
		if multi {
			parts := strings.Split(text, "/")
			for j, p := range parts {
				parts[j] = url.PathEscape(p)
			}
			segs[i] = strings.Join(parts, "/")
		} else {
			segs[i] = url.PathEscape(text)
		}
		used[name] = true
	}
	escaped = strings.Join(segs, "/")
	if err := policy.CheckPath(escaped); err != nil {
		names := make([]string, 0, len(used))
		for n := range used {
			names = append(names, n)
		}
		sort.Strings(names)
		return "", nil, fmt.Errorf("%w: path arguments %s make a path the proxy refuses: %v", state.ErrInvalidArgument, strings.Join(names, ", "), err)
	}
	return escaped, used, nil
}

// scalarText renders a string, number or boolean as text; ok is false for
// anything else (null, arrays, objects, non-finite floats).
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case json.Number:
		return x.String(), true
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	case int:
		return strconv.Itoa(x), true
	case int8, int16, int32, int64:
		return fmt.Sprint(x), true
	case uint, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x), true
	}
	return "", false
}

func formatFloat(f float64, bits int) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	return strconv.FormatFloat(f, 'f', -1, bits), true
}

// jsonKind names v's JSON type for messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case float64, float32:
		return "a non-finite number"
	}
	return fmt.Sprintf("a %T", v)
}

// queryString encodes args as a query string: keys sorted, scalars as text,
// arrays as repeated keys, null omitted. Objects and nested arrays wrap
// state.ErrInvalidArgument.
func queryString(args map[string]any) (string, error) {
	q := url.Values{}
	for k, v := range args {
		if v == nil {
			continue
		}
		if arr, ok := v.([]any); ok {
			for i, e := range arr {
				t, ok := scalarText(e)
				if !ok {
					return "", fmt.Errorf("%w: argument %q[%d] is %s; query parameters take strings, numbers or booleans (send a POST/PUT/PATCH operation for structured input)",
						state.ErrInvalidArgument, k, i, jsonKind(e))
				}
				q.Add(k, t)
			}
			continue
		}
		t, ok := scalarText(v)
		if !ok {
			return "", fmt.Errorf("%w: argument %q is %s; this operation sends its arguments as query parameters, which take strings, numbers, booleans or arrays of them",
				state.ErrInvalidArgument, k, jsonKind(v))
		}
		q.Set(k, t)
	}
	return q.Encode(), nil
}

// jsonBody encodes args as a JSON object with sorted keys and no HTML
// escaping. Values that do not encode wrap state.ErrInvalidArgument.
func jsonBody(args map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		return nil, fmt.Errorf("%w: arguments do not encode as JSON: %v", state.ErrInvalidArgument, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
