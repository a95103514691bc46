package dataplane

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aileronhq/aileron/policy"
)

// maxModelName bounds the model name put on the record: it comes from the
// sandbox, so a longer one is cut (at a UTF-8 boundary).
const maxModelName = 128

// requestModel reads the model a model API call asks for, before it is
// sent: from the path for Gemini (/v1beta/models/{model}:generateContent),
// else from the JSON body's top-level "model", read from the start of the
// body (up to maxBodyPrefix) and put back in front of the rest, so the body
// is still forwarded whole. "" when the operation is not a model call or
// the request names no model.
func requestModel(r *http.Request, op *policy.Operation, path string) string {
	if op == nil || op.Spec.Usage == "" {
		return ""
	}
	if op.Spec.Usage == policy.UsageGemini {
		return clipModel(geminiModel(path))
	}
	if v, ok := peekBody(r, []string{"model"})["model"].(string); ok {
		return clipModel(v)
	}
	return ""
}

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
