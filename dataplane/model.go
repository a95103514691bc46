package dataplane

import (
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
