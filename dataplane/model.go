package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aileronhq/aileron/policy"
)

// maxModelName bounds the model name put on the record: it comes from the
// sandbox, so a longer one is cut (at a UTF-8 boundary).
const maxModelName = 128

// geminiModel is the {model} of a Gemini path ".../models/{model}:method"
// (tuned models too: ".../tunedModels/{model}:method"), unescaped.
func geminiModel(path string) string {
	model, _ := geminiCall(path)
	return model
}

// geminiCall splits a Gemini path's last segment, unescaped, into its
// model and method; both are "" unless the segment holds exactly one
// colon (google.api.http takes the method after the last colon, so a name
// with another colon in it could name one model here and another there).
func geminiCall(path string) (model, method string) {
	i := strings.LastIndex(path, "/")
	if i < 0 {
		return "", ""
	}
	parent, last := path[:i], path[i+1:]
	if !strings.HasSuffix(parent, "/models") && !strings.HasSuffix(parent, "/tunedModels") {
		return "", ""
	}
	if u, err := url.PathUnescape(last); err == nil {
		last = u
	}
	if strings.Count(last, ":") != 1 {
		return "", ""
	}
	model, method, _ = strings.Cut(last, ":")
	return model, method
}

// freeCall reports whether a model call costs no tokens, so an answer
// without a usage report is expected (Gemini's countTokens, which the
// generic model-method operation covers).
func freeCall(api, path string) bool {
	if api != policy.UsageGemini {
		return false
	}
	_, method := geminiCall(path)
	return method == "countTokens"
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

// Bounds of the bodies read whole to check a model call's model against
// the session's list (readWhole): each body, and the memory all such
// bodies may hold at once, in all and per session, so that one session's
// stalled calls cannot take the proxy's memory.
const (
	maxCheckedBody       = 8 << 20
	maxCheckedTotal      = 96 << 20
	maxCheckedPerSession = 24 << 20
)

// readWhole reads r's whole body into memory before anything is sent, so
// that its model can be checked (onlyModel), and puts it back for
// forwarding; release gives its memory back once the exchange is over.
// whole is empty (the model then counts as unread, and the call is
// refused) when the body is longer than maxCheckedBody or could not be
// read; err (503 not_ready) when the memory for such bodies is in use.
func (p *Proxy) readWhole(r *http.Request, session string) (whole []byte, release func(), err error) {
	whole, release, err = p.readBody(r, session, maxCheckedBody)
	var un *unavailableError
	switch {
	case errors.As(err, &un):
		return nil, release, err
	case err != nil: // too long, or unreadable: the model counts as unread
		return []byte{}, release, nil
	}
	r.Body = &prefixedBody{Reader: bytes.NewReader(whole), Closer: r.Body}
	return whole, release, nil
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
		if !strings.EqualFold(strings.Map(dropControl, key), "model") {
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

// dropControl drops control characters (a parser that cuts a key at NUL
// would read "model\x00" as "model").
func dropControl(r rune) rune {
	if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
		return -1
	}
	return r
}

// checksModel reports whether op's requests are read whole for their model
// in session s: an Anthropic or OpenAI model call of a session that limits
// its models (Gemini names the model in the path).
func checksModel(s *Session, op *policy.Operation) bool {
	return s.Limits != nil && len(s.Limits.Models) > 0 && op != nil &&
		(op.Spec.Usage == policy.UsageAnthropic || op.Spec.Usage == policy.UsageOpenAI)
}
