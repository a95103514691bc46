package dataplane

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// Preview is what the human deciding on a held request sees: the request
// as it will leave, minus only the credential the proxy adds. Nothing is
// redacted (a spec's audit[] rules govern the audit trail, not the owner's
// view) and nothing is cut: displays that shorten a long body say how many
// bytes they left out, and RawRequest renders all of it.
type Preview struct {
	// Action is set when the approval is for a whole action (its runner
	// then issues the operations); Inputs are then the action's arguments.
	Action    string `json:"action,omitempty"`
	Connector string `json:"connector"`
	Version   string `json:"version"`
	Tool      string `json:"tool"`
	Operation string `json:"operation"`
	Summary   string `json:"summary,omitempty"`
	Method    string `json:"method"`
	Host      string `json:"host"`
	// Path and Query are the target exactly as sent and as forwarded:
	// the escaped path and the raw query (without "?").
	Path  string `json:"path"`
	Query string `json:"query,omitempty"`
	// Credential says what the proxy adds, and where its spec puts it
	// (the connector's binding may move it).
	Credential string `json:"credential,omitempty"`
	// Headers are the forwarded request headers, sorted by name, each
	// value in the order sent (one the credential overwrites included).
	Headers []PreviewHeader `json:"headers,omitempty"`
	// Fields are the path variables, query parameters and body fields
	// (form fields, or a JSON object's top-level members), decoded, each
	// marked whether the operation's spec declares it.
	Fields []PreviewField `json:"fields,omitempty"`
	// Body is the body in full, with a reading of it; nil when empty.
	Body *PreviewBody `json:"body,omitempty"`
	// Inputs are an action's arguments (action approvals only).
	Inputs    map[string]any `json:"inputs,omitempty"`
	BodyBytes int            `json:"body_bytes"`
	// ProposalID is set when no operation matches the request (a session
	// in ask mode): the proposal it was learned into, which the human may
	// accept as a rule instead of approving this request once. Connector,
	// Tool and Operation are then empty.
	ProposalID string `json:"proposal_id,omitempty"`
}

// PreviewHeader is one forwarded header line.
type PreviewHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// PreviewField is one decoded value of the request: a path variable, a
// query parameter or a body field.
type PreviewField struct {
	Source string `json:"source"` // "path", "query" or "body"
	Name   string `json:"name"`
	// Value is the decoded text; a JSON member's value as compact JSON.
	Value string `json:"value"`
	// Declared is false for a field the spec's operation does not name
	// (its inputs, or its path template): the approver should look twice.
	Declared bool `json:"declared"`
}

// Body kinds.
const (
	BodyJSON   = "json"   // Text is the body pretty-printed
	BodyForm   = "form"   // application/x-www-form-urlencoded; Fields hold its pairs
	BodyText   = "text"   // valid UTF-8
	BodyBinary = "binary" // anything else
)

// PreviewBody is a held request's body.
type PreviewBody struct {
	Kind        string `json:"kind"`
	ContentType string `json:"content_type,omitempty"`
	// Text is the pretty-printed JSON (kind json); for the other kinds the
	// raw bytes are the text.
	Text string `json:"text,omitempty"`
	// Raw is the body, byte for byte, as it will be sent.
	Raw []byte `json:"raw"`
}

// previewRequest describes a held request for the approver, or refuses
// one a human could not judge: an encoded body, or a JSON body whose keys
// collide when compared case-insensitively (decoders disagree on which
// wins). hdr is the request's forwarded headers (forwardedHeaders). A
// request no operation matches (d.Op nil: ask mode) names no connector,
// and none of its fields is declared.
func previewRequest(r *http.Request, a policy.Authority, tgt target, d policy.Decision, hdr []PreviewHeader, body []byte) (Preview, error) {
	op := d.Op
	pv := Preview{Method: r.Method, Host: a.String(), Path: tgt.path, Query: tgt.query, Headers: hdr, BodyBytes: len(body)}
	if op != nil {
		pv.Connector, pv.Version, pv.Tool, pv.Operation, pv.Summary = op.FQN, op.Version, op.Tool, op.Spec.Name, op.Spec.Summary
		pv.Credential = credentialNote(op.Spec.Credential)
	}
	if ce := contentCoding(r.Header); ce != "" {
		return pv, deny(policy.ReasonEncodedBody, "the request body is %q-encoded; a request that needs approval must carry a plain body, "+
			"so that the human approves the bytes the upstream will read: send it without Content-Encoding", ce)
	}
	declared := declaredNames(op)
	names := make([]string, 0, len(d.Params))
	for k := range d.Params {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		pv.Fields = append(pv.Fields, PreviewField{Source: "path", Name: k, Value: d.Params[k], Declared: true})
	}
	if strings.IndexByte(tgt.query, ';') >= 0 {
		return pv, deny(policy.ReasonAmbiguousBody, "the query holds a ';', which some servers take as a separator like '&'; "+
			"a request that needs approval must have one reading: send it as %%3B")
	}
	pv.Fields = append(pv.Fields, pairFields("query", tgt.query, declared["query"])...)
	if len(body) > 0 {
		var fields []PreviewField
		var err error
		pv.Body, fields, err = readBody(r.Header.Get("Content-Type"), body, declared["body"])
		if err != nil {
			return pv, err
		}
		pv.Fields = append(pv.Fields, fields...)
	}
	for _, f := range pv.Fields {
		if f.Source == "body" && isMethodParam(f.Name) {
			return pv, deny(policy.ReasonMethodOverride, "the body carries a %q field, which frameworks (Rails, Laravel, Symfony) "+
				"take as the request's method; send the method itself instead", clip(f.Name))
		}
	}
	return pv, nil
}

// declaredNames are the query and body fields the operation's effective
// input schema (policy.Operation.InputSchema) declares, as the proxy's
// argument check reads the request: a field is declared when the schema's
// top-level properties name it and its input, if it says where it travels
// ("in"), puts it there. Without an operation, none is.
func declaredNames(op *policy.Operation) map[string]map[string]bool {
	query, body := map[string]bool{}, map[string]bool{}
	if op == nil {
		return map[string]map[string]bool{"query": query, "body": body}
	}
	for name := range schemaProperties(op.InputSchema()) {
		query[name], body[name] = true, true
	}
	for _, in := range op.Spec.Inputs {
		switch in.In {
		case policy.InQuery:
			delete(body, in.Name)
		case policy.InBody:
			delete(query, in.Name)
		case policy.InPath:
			delete(query, in.Name)
			delete(body, in.Name)
		}
	}
	return map[string]map[string]bool{"query": query, "body": body}
}

// pairFields decodes a query string or form body, keeping every pair in
// order (repeats included); a pair that does not decode is shown raw.
func pairFields(source, raw string, declared map[string]bool) []PreviewField {
	var out []PreviewField
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		out = append(out, PreviewField{Source: source, Name: k, Value: v, Declared: declared[k]})
	}
	return out
}

// readBody reads a body for the approver: JSON pretty-printed, with its
// top-level members as fields; a form as its pairs; else text or binary.
// A body is JSON when its Content-Type says so or when it looks like JSON
// (the upstream may parse it as JSON whatever the header says). One that
// could be read two ways is refused (ambiguous_body): JSON-looking bytes
// that are not valid JSON (lenient decoders read a prefix), a form that
// looks like JSON, is not UTF-8 or holds a ';' (some servers split on it).
func readBody(contentType string, body []byte, declared map[string]bool) (*PreviewBody, []PreviewField, error) {
	b := &PreviewBody{ContentType: contentType, Raw: body}
	mt, _, _ := mime.ParseMediaType(contentType)
	isJSON, isForm := mt == "application/json" || strings.HasSuffix(mt, "+json"), mt == "application/x-www-form-urlencoded"
	doc := bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")) // a BOM: many JSON decoders skip it
	trimmed := bytes.TrimLeft(doc, " \t\r\n")
	looksJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if why := bodyAmbiguity(isJSON, isForm, looksJSON, body, doc); why != "" {
		return b, nil, deny(policy.ReasonAmbiguousBody, "the body (Content-Type %q) %s; a request that needs approval must have one reading, "+
			"the one the approver sees", clip(contentType), why)
	}
	switch {
	case isJSON || looksJSON:
		b.Kind = BodyJSON
		fields, err := jsonFields(doc, declared)
		if err != nil {
			return b, nil, err
		}
		b.Text = prettyJSON(doc, 4*len(doc)+64<<10)
		return b, fields, nil
	case isForm:
		b.Kind = BodyForm
		return b, pairFields("body", string(body), declared), nil
	case utf8.Valid(body):
		b.Kind = BodyText
	default:
		b.Kind = BodyBinary
	}
	return b, nil, nil
}

// bodyAmbiguity says why a body could be read more than one way, or "".
func bodyAmbiguity(isJSON, isForm, looksJSON bool, body, doc []byte) string {
	switch {
	case (isJSON || looksJSON) && !json.Valid(doc):
		return "is not valid JSON, though it is labelled or looks like JSON (a lenient decoder would read part of it)"
	case isForm && looksJSON:
		return "is labelled a form but looks like JSON"
	case isForm && !utf8.Valid(body):
		return "is a form that is not UTF-8"
	case isForm && bytes.IndexByte(body, ';') >= 0:
		return "is a form holding a ';', which some servers take as a separator like '&' (send it as %3B)"
	}
	return ""
}

// maxJSONDepth is the deepest nesting a held JSON body may have: deeper
// bodies are refused (ambiguous_body), as no human reads them and their
// pretty-printed form grows with the square of the depth.
const maxJSONDepth = 64

// jsonFields checks that no two keys of any object in body are equal under
// Unicode case folding (a case-insensitive decoder would take either) and
// that nothing nests deeper than maxJSONDepth, and returns the top-level
// object's members in order.
func jsonFields(body []byte, declared map[string]bool) ([]PreviewField, error) {
	if err := checkJSONKeys(json.NewDecoder(bytes.NewReader(body)), nil); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return nil, nil
	}
	var out []PreviewField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out, nil
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out, nil
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, v)
		k, _ := tok.(string)
		out = append(out, PreviewField{Source: "body", Name: k, Value: compact.String(), Declared: declared[k]})
	}
	return out, nil
}

// checkJSONKeys walks one JSON value from dec, refusing an object with two
// keys that fold to the same string, or nesting deeper than maxJSONDepth;
// at is the JSON path to the value, one element per level.
func checkJSONKeys(dec *json.Decoder, at []string) error {
	tok, err := dec.Token()
	if err != nil {
		return nil // json.Valid passed: cannot happen
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && len(at) >= maxJSONDepth {
		return deny(policy.ReasonAmbiguousBody, "the JSON body nests deeper than %d levels at %s; a request that needs approval "+
			"must be one a human can read", maxJSONDepth, jsonPath(at))
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{}
		for dec.More() {
			kt, _ := dec.Token()
			k, _ := kt.(string)
			if prev, dup := seen[foldKey(k)]; dup {
				return deny(policy.ReasonAmbiguousBody, "the JSON body's object %s has the keys %q and %q, which decoders that ignore case "+
					"(or keep the first or the last of two) read differently; a request that needs approval must name each key once", jsonPath(at), prev, k)
			}
			seen[foldKey(k)] = k
			if err := checkJSONKeys(dec, append(at, "."+k)); err != nil {
				return err
			}
		}
		_, _ = dec.Token()
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkJSONKeys(dec, append(at, "["+strconv.Itoa(i)+"]")); err != nil {
				return err
			}
		}
		_, _ = dec.Token()
	}
	return nil
}

// jsonPath renders a path built by checkJSONKeys, cut to a readable length.
func jsonPath(at []string) string {
	return clip("$" + strings.Join(at, ""))
}

// foldKey maps s to one representative of its Unicode simple case-folding
// class, rune by rune ("TO", "to" and "tO" alike; the Kelvin sign as k),
// with the dotless and dotted i as i (locale-aware decoders fold them).
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == 'ı' || r == 'İ' {
			r = 'i'
		}
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// prettyJSON indents valid JSON doc by two spaces a level, keeping every
// byte of its tokens as written; "" when the result would pass limit bytes
// (then the body shows as sent).
func prettyJSON(doc []byte, limit int) string {
	var b strings.Builder
	depth, inString, escaped := 0, false, false
	newline := func() bool {
		b.WriteByte('\n')
		for range depth {
			b.WriteString("  ")
		}
		return b.Len() <= limit
	}
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if inString {
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
		case '"':
			inString = true
			b.WriteByte(c)
		case '{', '[':
			b.WriteByte(c)
			if next := nextToken(doc, i+1); next == '}' || next == ']' {
				continue
			}
			depth++
			if !newline() {
				return ""
			}
		case '}', ']':
			if prev := prevToken(doc, i); prev != '{' && prev != '[' {
				depth--
				if !newline() {
					return ""
				}
			}
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			if !newline() {
				return ""
			}
		case ':':
			b.WriteString(": ")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// nextToken is the first byte at or after i that is not JSON whitespace.
func nextToken(doc []byte, i int) byte {
	for ; i < len(doc); i++ {
		if c := doc[i]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// prevToken is the last byte before i that is not JSON whitespace.
func prevToken(doc []byte, i int) byte {
	for i--; i >= 0; i-- {
		if c := doc[i]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// forwardedHeaders lists the headers forwarded for a request with
// headers in that matched op, sorted by name: outboundHeader's, before
// the credential is added. A header the credential will overwrite is kept:
// where the credential goes depends on the binding too, and binding more
// than is sent costs nothing.
func forwardedHeaders(in http.Header, op *policy.Operation) []PreviewHeader {
	h := outboundHeader(in, op)
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []PreviewHeader
	for _, k := range names {
		for _, v := range h[k] {
			out = append(out, PreviewHeader{Name: k, Value: v})
		}
	}
	return out
}

// credentialNote says what the proxy adds to the request, and where its
// spec puts it (a binding may place it elsewhere).
func credentialNote(c policy.Credential) string {
	switch {
	case c.IsZero():
		return ""
	case c.Kind == inject.KindSigV4:
		return "aws_sigv4: the proxy signs the request (Authorization and X-Amz-* headers), replacing what the client sent there"
	}
	where := "header " + inject.PlacementFor(c).Header
	if pl := inject.PlacementFor(c); pl.Query != "" {
		where = "query parameter " + pl.Query
	}
	return c.Kind + ", which the proxy adds where the connector's binding puts it (the spec says: " + where +
		"), replacing what the client sent there"
}

// schemaProperties are the names of an object schema's properties; none
// when it has none or is not an object.
func schemaProperties(schema json.RawMessage) map[string]bool {
	out := map[string]bool{}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return out
	}
	for name := range s.Properties {
		out[name] = true
	}
	return out
}
