package dataplane

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// maxModelName bounds the model name put on the record: it comes from the
// sandbox, so a longer one is cut (at a UTF-8 boundary).
const maxModelName = 128

// geminiModel is the {model} of a Gemini path ".../models/{model}:method"
// (tuned models too: ".../tunedModels/{model}:method"), unescaped.
func geminiModel(path string) string {
	i := strings.LastIndex(path, "/")
	if i < 0 {
		return ""
	}
	parent, last := path[:i], path[i+1:]
	if !strings.HasSuffix(parent, "/models") && !strings.HasSuffix(parent, "/tunedModels") {
		return ""
	}
	name, _, ok := strings.Cut(last, ":")
	if !ok {
		return ""
	}
	if u, err := url.PathUnescape(name); err == nil {
		name = u
	}
	return name
}

// clipModel cuts a model name to maxModelName bytes at a UTF-8 boundary.
func clipModel(s string) string {
	if len(s) <= maxModelName {
		return s
	}
	n := maxModelName
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// maxCheckedBody bounds the body of a model call that is read whole, before
// anything is sent, to check the model it asks for against the session's
// list (checkedModel). A longer body's model counts as unread, so the call
// is refused, never sent unchecked.
const maxCheckedBody = 16 << 20

// checkedModel reads r's whole body (at most maxCheckedBody bytes), puts
// it back in front of the rest for forwarding, and returns the string of
// its top-level "model" key. It returns "" (unread) unless the body is one
// JSON object, complete within the bound, with exactly one top-level key
// that reads as "model" in any case: an upstream parser that takes the
// last of two keys, or matches keys case-insensitively, must never act on
// another model than the one checked. Used when the session limits the
// models; otherwise the model is read from the body's start (peekBody),
// for the record only.
func checkedModel(r *http.Request) string {
	if r.Body == nil || r.Body == http.NoBody {
		return ""
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxCheckedBody+1))
	r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), Closer: r.Body}
	if err != nil || len(buf) > maxCheckedBody {
		return ""
	}
	return onlyModel(buf)
}

// onlyModel is the string value of the one top-level key of the JSON
// object b that reads as "model" in any case, or "".
func onlyModel(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	model, seen := "", 0
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return ""
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		if !strings.EqualFold(key, "model") {
			continue
		}
		if seen++; key != "model" || json.Unmarshal(v, &model) != nil {
			return ""
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return ""
	}
	if _, err := dec.Token(); err != io.EOF || seen != 1 { // nothing after the object
		return ""
	}
	return model
}
