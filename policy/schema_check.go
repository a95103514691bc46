package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on the arguments CheckArguments reads, so that a hostile body
// costs time linear in its size.
const (
	// maxBodyDepth bounds the nesting of a JSON body.
	maxBodyDepth = 64
	// maxNumberLen bounds the text of one number.
	maxNumberLen = 100
	// maxNumberExp bounds a number's decimal exponent: a check compares
	// numbers exactly, and 1e999999 would cost a million digits.
	maxNumberExp = 400
)

// ChecksBody reports whether the operation's schema describes the request
// body, which must then be read whole and passed to CheckArguments: an
// input in the body, or an input_schema of a POST, PUT or PATCH.
func (o *Operation) ChecksBody() bool { return o.args != nil && o.args.body }

// InputSchema returns the operation's arguments as one JSON Schema object
// (the whole input_schema, or one built from its inputs), for discovery,
// MCP tool schemas and help; nil when it declares none. Never modify it.
func (o *Operation) InputSchema() json.RawMessage {
	if o.args == nil {
		return nil
	}
	return o.args.doc
}

// ArgumentIn says where the argument name travels in a request built from
// the operation's arguments: InPath for a path template variable, else the
// input's declared "in", else InBody for POST, PUT and PATCH and InQuery
// for other methods. CheckArguments refuses an argument sent elsewhere
// than its declared "in".
func (o *Operation) ArgumentIn(name string) string {
	if o.args != nil {
		return o.args.place(name)
	}
	if o.pat != nil {
		for _, v := range o.pat.vars {
			if v == name {
				return InPath
			}
		}
	}
	if methodCarriesBody(o.Spec.Method) {
		return InBody
	}
	return InQuery
}

// CheckArguments checks v against the operation's compiled input schema:
// nil when it fits (always, for an operation that declares no arguments),
// else an *ArgumentError naming the first field that does not fit and the
// rule it breaks, never its value. The arguments are one object: the path
// variables, the query parameters (a credential's query parameter left
// out) and, when ChecksBody, the fields of a JSON object or form body, with
// wire text converted to the declared type ("42" for an integer). A name
// given in two places, a repeated parameter whose schema is not an array,
// a body of another media type, and JSON that is invalid, deeper than 64
// levels or has duplicate keys are refused.
func (o *Operation) CheckArguments(v ArgumentValues) error {
	a := o.args
	if a == nil {
		return nil
	}
	obj, from, aerr := a.collect(v)
	if aerr != nil {
		return aerr
	}
	if err := a.schema.Validate(obj); err != nil {
		return a.explain(err, obj, from)
	}
	return nil
}

// collect builds the argument object and where each name came from.
func (a *argSchema) collect(v ArgumentValues) (map[string]any, map[string]string, *ArgumentError) {
	obj := make(map[string]any, len(v.Path)+len(v.Query))
	from := make(map[string]string, len(v.Path)+len(v.Query))
	put := func(where, name string, val any) *ArgumentError {
		if prev, dup := from[name]; dup {
			f := a.fieldName(where, name)
			return &ArgumentError{Field: f, Rule: "duplicate", Message: fmt.Sprintf(
				"argument %s is also given in the %s; an argument is one field, send it once (duplicate)", f, prev)}
		}
		obj[name], from[name] = val, where
		return nil
	}
	for _, name := range sortedKeys(v.Path) {
		f := a.fields[name]
		if !utf8.ValidString(v.Path[name]) {
			fn := a.fieldName(InPath, name)
			return nil, nil, &ArgumentError{Field: fn, Rule: "encoding", Message: fmt.Sprintf(
				"argument %s is not UTF-8 text once percent-decoded, so it cannot be checked (encoding)", fn)}
		}
		if err := put(InPath, name, wireValue(v.Path[name], f.types, f.items)); err != nil {
			return nil, nil, err
		}
	}
	if err := a.collectWire(InQuery, v.Query, put); err != nil {
		return nil, nil, err
	}
	if a.body && len(v.Body) > 0 {
		if err := a.collectBody(v, put); err != nil {
			return nil, nil, err
		}
	}
	for _, name := range sortedKeys(from) {
		if want := a.fields[name].in; want != "" && want != from[name] {
			f := a.fieldName(from[name], name)
			return nil, nil, &ArgumentError{Field: f, Rule: "in", Message: fmt.Sprintf(
				"argument %s does not fit its schema: it belongs in the %s (in)", f, want)}
		}
	}
	if err := a.checkAliases(from); err != nil {
		return nil, nil, err
	}
	if err := a.checkNestedNames(obj, from); err != nil {
		return nil, nil, err
	}
	return obj, from, nil
}

// checkAliases refuses argument names that a server may read as one
// another: two given names, or a given name and a declared one it is not,
// that are equal once compared without regard to case (as ASP.NET and Go's
// encoding/json compare), with trailing "[]" or "[0]" dropped (as Rails,
// PHP and Express's qs read "limit[]" as limit) and with '.' and ' ' read
// as '_' (as PHP does). The check would look at one name and such a server
// act on the other.
func (a *argSchema) checkAliases(from map[string]string) *ArgumentError {
	declared := map[string]string{}
	for name := range a.fields {
		declared[argAlias(name)] = name
	}
	for name := range a.vars {
		declared[argAlias(name)] = name
	}
	seen := map[string]string{}
	for _, name := range sortedKeys(from) {
		al := argAlias(name)
		f := a.fieldName(from[name], name)
		if prev, dup := seen[al]; dup {
			return &ArgumentError{Field: f, Rule: "duplicate", Message: fmt.Sprintf(
				"argument %s is also given as %s, which some servers read as the same argument; send it once (duplicate)", f, a.fieldName(from[prev], prev))}
		}
		seen[al] = name
		_, isField := a.fields[name]
		if d, ok := declared[al]; ok && !isField && !a.vars[name] {
			return &ArgumentError{Field: f, Rule: "name", Message: fmt.Sprintf(
				"argument %s is not the declared argument %s, but some servers read it as that one (names compared without regard to case, "+
					"with [] dropped or '.' read as '_'); send it as %s (name)", f, quote(d), quote(d))}
		}
	}
	return nil
}

// argAlias maps an argument name to what lenient servers may read it as:
// trailing "[]" and "[digits]" dropped, '.' and ' ' as '_', case folded.
func argAlias(name string) string {
	for strings.HasSuffix(name, "]") {
		i := strings.LastIndexByte(name, '[')
		if i < 0 || strings.Trim(name[i+1:len(name)-1], "0123456789") != "" {
			break
		}
		name = name[:i]
	}
	return foldKey(strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' {
			return '_'
		}
		return r
	}, name))
}

type putFunc func(where, name string, val any) *ArgumentError

// collectWire adds query or form values, converted to their types.
func (a *argSchema) collectWire(where string, vals url.Values, put putFunc) *ArgumentError {
	names := make([]string, 0, len(vals))
	for k := range vals {
		if where == InQuery && a.credQuery[k] {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		vs := vals[name]
		f := a.fields[name]
		if !utf8.ValidString(name) || !allUTF8(vs) {
			fn := a.fieldName(where, strings.ToValidUTF8(name, "\uFFFD"))
			return &ArgumentError{Field: fn, Rule: "encoding", Message: fmt.Sprintf(
				"argument %s is not UTF-8 text once percent-decoded, so it cannot be checked (encoding)", fn)}
		}
		var val any
		switch {
		case len(vs) == 1:
			val = wireValue(vs[0], f.types, f.items)
		case !hasType(f.types, "array"):
			fn := a.fieldName(where, name)
			return &ArgumentError{Field: fn, Rule: "type", Message: fmt.Sprintf(
				"argument %s does not fit its schema: it is given %d times, and only an array may repeat (type)", fn, len(vs))}
		default:
			arr := make([]any, len(vs))
			for i, s := range vs {
				arr[i] = wireValue(s, f.items, nil)
			}
			val = arr
		}
		if err := put(where, name, val); err != nil {
			return err
		}
	}
	return nil
}

// collectBody adds the fields of a JSON object or form body.
func (a *argSchema) collectBody(v ArgumentValues, put putFunc) *ArgumentError {
	mt, params, err := mime.ParseMediaType(v.ContentType)
	if cs, ok := params["charset"]; err == nil && ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return &ArgumentError{Field: "body", Rule: "content_type", Message: "the body's charset must be utf-8, which is how its schema check reads it (content_type)"}
	}
	switch {
	case err == nil && mt == "application/x-www-form-urlencoded":
		if looksJSON(v.Body) {
			return &ArgumentError{Field: "body", Rule: "content_type", Message: "the body is labelled a form (application/x-www-form-urlencoded, what curl -d sends) " +
				"but looks like JSON, which an upstream reading JSON whatever the label would read apart from the check: send it with Content-Type: application/json (content_type)"}
		}
		vals, err := url.ParseQuery(string(v.Body))
		if err != nil {
			return &ArgumentError{Field: "body", Rule: "content_type", Message: "the body is not valid application/x-www-form-urlencoded data (content_type)"}
		}
		return a.collectWire(InBody, vals, put)
	case err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")):
	default:
		return &ArgumentError{Field: "body", Rule: "content_type", Message: "the operation's schema describes the body, so it must be application/json or application/x-www-form-urlencoded (content_type)"}
	}
	val, aerr := decodeBody(v.Body)
	if aerr != nil {
		return aerr
	}
	m, ok := val.(map[string]any)
	if !ok {
		return &ArgumentError{Field: "body", Rule: "type", Message: fmt.Sprintf("the body must be a JSON object of fields, not %s (type)", jsonTypeName(val))}
	}
	for _, name := range sortedKeys(m) {
		if err := put(InBody, name, m[name]); err != nil {
			return err
		}
	}
	return nil
}

// looksJSON reports a body whose first byte, after a byte order mark and
// JSON white space, opens a JSON object or array.
func looksJSON(body []byte) bool {
	t := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[')
}

// decodeBody decodes one JSON value (numbers as json.Number), refusing
// invalid JSON, trailing data, duplicate keys, nesting deeper than
// maxBodyDepth and numbers too long or too large to check.
func decodeBody(body []byte) (any, *ArgumentError) {
	if !utf8.Valid(body) {
		return nil, &ArgumentError{Field: "body", Rule: "json", Message: "the body is not valid JSON: it is not UTF-8 (json)"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	val, aerr := readBodyValue(dec, "body", 0)
	if aerr != nil {
		return nil, aerr
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ArgumentError{Field: "body", Rule: "json", Message: "the body is not one JSON value: data follows it (json)"}
	}
	return val, nil
}

func badJSON(err error) *ArgumentError {
	msg := "the body is not valid JSON"
	var se *json.SyntaxError
	if errors.As(err, &se) {
		msg += fmt.Sprintf(" (syntax error at byte %d)", se.Offset)
	}
	return &ArgumentError{Field: "body", Rule: "json", Message: msg + " (json)"}
}

func readBodyValue(dec *json.Decoder, path string, depth int) (any, *ArgumentError) {
	if depth > maxBodyDepth {
		return nil, &ArgumentError{Field: path, Rule: "json", Message: fmt.Sprintf("argument %s nests deeper than %d levels in the body (json)", path, maxBodyDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, badJSON(err)
	}
	switch t := tok.(type) {
	case json.Number:
		if !checkableNumber(string(t)) {
			return nil, &ArgumentError{Field: path, Rule: "number", Message: fmt.Sprintf(
				"argument %s is a number too long or too large to check (at most %d characters, exponent at most %d) (number)", path, maxNumberLen, maxNumberExp)}
		}
		return t, nil
	case json.Delim:
		if t == '{' {
			return readBodyObject(dec, path, depth)
		}
		var arr []any
		for i := 0; dec.More(); i++ {
			v, aerr := readBodyValue(dec, idx(path, i), depth+1)
			if aerr != nil {
				return nil, aerr
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, badJSON(err)
		}
		if arr == nil {
			arr = []any{}
		}
		return arr, nil
	}
	return tok, nil
}

// readBodyObject reads an object's members. Two keys equal but for case
// are refused like a key given twice: an upstream that matches keys
// without regard to case (as Go's encoding/json does) could act on the one
// the check did not look at.
func readBodyObject(dec *json.Decoder, path string, depth int) (any, *ArgumentError) {
	m := map[string]any{}
	folded := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, badJSON(err)
		}
		k, _ := kt.(string)
		kp := argKey(path, k, false)
		if fk := foldKey(k); folded[fk] {
			return nil, &ArgumentError{Field: kp, Rule: "duplicate", Message: fmt.Sprintf(
				"argument %s appears twice in one JSON object (keys are compared without regard to case); send it once (duplicate)", kp)}
		} else {
			folded[fk] = true
		}
		v, aerr := readBodyValue(dec, kp, depth+1)
		if aerr != nil {
			return nil, aerr
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, badJSON(err)
	}
	return m, nil
}

// foldKey maps s to one representative of its case-folding class: every
// rune to the smallest rune of its unicode.SimpleFold orbit (so "K", "k"
// and the Kelvin sign fold alike, as "s", "S" and "ſ" do).
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

// checkableNumber reports a JSON number short enough, with a small enough
// exponent, to compare exactly in bounded time.
func checkableNumber(s string) bool {
	if len(s) > maxNumberLen {
		return false
	}
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
	return err == nil && e >= -maxNumberExp && e <= maxNumberExp
}

// wireValue converts wire text to the first declared type it fits; text
// that fits none stays a string, for the schema to refuse.
func wireValue(s string, types, items []string) any {
	for _, t := range types {
		switch t {
		case "string":
			return s
		case "integer", "number":
			if isJSONNumber(s) && checkableNumber(s) {
				return json.Number(s)
			}
		case "boolean":
			if s == "true" || s == "false" {
				return s == "true"
			}
		case "array":
			return []any{wireValue(s, items, nil)}
		}
	}
	return s
}

func allUTF8(vs []string) bool {
	for _, v := range vs {
		if !utf8.ValidString(v) {
			return false
		}
	}
	return true
}

func isJSONNumber(s string) bool {
	if s == "" || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') || !(s[len(s)-1] >= '0' && s[len(s)-1] <= '9') {
		return false
	}
	return json.Valid([]byte(s))
}

func hasType(types []string, t string) bool {
	for _, x := range types {
		if x == t {
			return true
		}
	}
	return false
}

// fieldName renders where and name as "body.to" or `query["a b"]`; a name
// the schema does not declare only when short and printable (see argKey).
func (a *argSchema) fieldName(where, name string) string {
	_, field := a.fields[name]
	return argKey(where, name, field || a.vars[name])
}

// maxShownName bounds an undeclared argument name a message shows: a name
// is chosen by the sender, and a bare token in a query or a form body
// (curl -d "$SECRET") is a name with no value.
const maxShownName = 32

// argKey is keyPath for an argument's name k, showing an undeclared name
// only when it is at most maxShownName printable ASCII bytes; any other is
// shown by its length alone, never quoted.
func argKey(path, k string, declared bool) string {
	if declared || len(k) <= maxShownName && printableName(k) {
		return keyPath(path, k)
	}
	return fmt.Sprintf("%s[an undeclared name of %d bytes]", path, len(k))
}

func printableName(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' || s[i] == '"' || s[i] == '\\' {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
