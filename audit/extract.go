package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Redaction modes of Field.Redact.
const (
	RedactKeep = "keep"
	RedactHash = "hash"
	RedactDrop = "drop"
)

// MaxKeptBytes bounds a value recorded with RedactKeep.
const MaxKeptBytes = 256

// Field is one audit[] entry of a connector operation (the caller converts
// policy.AuditField to it).
type Field struct {
	// Name is the key in Event.Fields.
	Name string
	// Source is "query.NAME" (first value of that query parameter),
	// "body.KEY[.KEY…]" (a JSON body member; dots walk into objects, a
	// "[N]" suffix indexes an array: "body.items[0].id") or "path.VAR" (a
	// path template variable).
	Source string
	// Redact is RedactKeep (the value: strings cut to MaxKeptBytes at a
	// UTF-8 boundary, objects and arrays kept when their compact JSON fits
	// in MaxKeptBytes, else recorded as that JSON text cut to
	// MaxKeptBytes), RedactHash ("sha256:" + hex of the string's bytes, or
	// of the compact JSON with sorted keys of a non-string) or RedactDrop
	// (true when present). Any other value is treated as RedactDrop, so a
	// mistake never records a value.
	Redact string
}

// Extract returns the audit values named by fields, redacted, or nil when
// none is present. A source that is absent (no such parameter, variable or
// member; a body that is not JSON) is omitted. Nothing that a field does
// not name is ever returned.
func Extract(fields []Field, pathParams map[string]string, rawQuery string, jsonBody []byte) map[string]any {
	var (
		body    any
		bodyOK  bool
		decoded bool
	)
	return extract(fields, pathParams, rawQuery, func(name string) (any, bool) {
		if !decoded {
			body, bodyOK = decodeBody(jsonBody)
			decoded = true
		}
		if !bodyOK {
			return nil, false
		}
		return lookup(body, name)
	})
}

// ExtractFound is Extract for a body whose values the caller already
// found: body maps the path of each "body." source (without "body.") to
// its value as encoding/json decodes it with UseNumber; a source it lacks
// is absent. It lets a caller read a body of any size as a stream and
// keep only the named values.
func ExtractFound(fields []Field, pathParams map[string]string, rawQuery string, body map[string]any) map[string]any {
	return extract(fields, pathParams, rawQuery, func(name string) (any, bool) {
		v, ok := body[name]
		return v, ok
	})
}

// BodyPaths returns the paths of the fields' "body." sources (without
// "body."), for ExtractFound.
func BodyPaths(fields []Field) []string {
	var out []string
	for _, f := range fields {
		if name, ok := strings.CutPrefix(f.Source, "body."); ok && name != "" {
			out = append(out, name)
		}
	}
	return out
}

func extract(fields []Field, pathParams map[string]string, rawQuery string, bodyValue func(string) (any, bool)) map[string]any {
	var (
		out     map[string]any
		query   url.Values
		parsedQ bool
	)
	for _, f := range fields {
		where, name, ok := strings.Cut(f.Source, ".")
		if f.Name == "" || !ok || name == "" {
			continue
		}
		var v any
		var found bool
		switch where {
		case "path":
			v, found = pathParams[name]
		case "query":
			if !parsedQ {
				query, _ = url.ParseQuery(rawQuery) // keeps the pairs that parse
				parsedQ = true
			}
			if vs := query[name]; len(vs) > 0 {
				v, found = vs[0], true
			}
		case "body":
			v, found = bodyValue(name)
		}
		if !found {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(fields))
		}
		out[f.Name] = redact(f.Redact, v)
	}
	return out
}

// decodeBody parses a JSON document, keeping numbers as written.
func decodeBody(b []byte) (any, bool) {
	if len(b) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

// lookup walks a dotted path with optional [N] indexes through v.
func lookup(v any, path string) (any, bool) {
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = obj[key]; !ok {
				return nil, false
			}
		} else if rest == "" {
			return nil, false // empty segment
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			arr, isArr := v.([]any)
			if !ok || err != nil || !isArr || n < 0 || n >= len(arr) {
				return nil, false
			}
			v = arr[n]
			if after == "" {
				break
			}
			if rest, ok = strings.CutPrefix(after, "["); !ok {
				return nil, false
			}
		}
	}
	return v, true
}

// redact applies one redaction mode to a present value.
func redact(mode string, v any) any {
	switch mode {
	case RedactKeep:
		switch x := v.(type) {
		case string:
			return cut(x)
		case map[string]any, []any:
			b := canonical(x)
			if len(b) <= MaxKeptBytes {
				return json.RawMessage(b)
			}
			return cut(string(b))
		default: // json.Number, bool, nil
			return x
		}
	case RedactHash:
		var sum [sha256.Size]byte
		if s, ok := v.(string); ok {
			sum = sha256.Sum256([]byte(s))
		} else {
			sum = sha256.Sum256(canonical(v))
		}
		return "sha256:" + hex.EncodeToString(sum[:])
	default: // RedactDrop, and anything unknown
		return true
	}
}

// canonical is v's compact JSON with sorted object keys and no HTML
// escaping. v comes from decodeBody, so it always marshals.
func canonical(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// cut shortens s to at most MaxKeptBytes without splitting a UTF-8
// sequence.
func cut(s string) string {
	if len(s) <= MaxKeptBytes {
		return s
	}
	n := MaxKeptBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
