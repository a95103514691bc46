package dataplane

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Method overrides: ways a request asks the upstream to act on another
// method than its own, which policy decided on. All are refused
// (method_override): the headers, a "_method" query parameter, and a
// "_method" field of a form body (Rails, Laravel, Symfony), found as the
// body streams (a held body is checked whole, in its preview).

// methodOverride names the method override the request carries, or "":
// a header with which frameworks (Google APIs, Rails, ASP.NET, …) let a
// request claim another method than its own, in any case and with "_" for
// "-" (CGI-style servers read X_HTTP_METHOD_OVERRIDE as the same), or a
// "_method" query parameter (Laravel, Symfony, Rails).
func methodOverride(h http.Header, rawQuery string) string {
	for name := range h {
		for _, o := range [...]string{"x-http-method-override", "x-http-method", "x-method-override"} {
			if sameHeaderName(name, o) {
				return "the header " + name
			}
		}
	}
	for part := range strings.SplitSeq(rawQuery, "&") {
		k, _, _ := strings.Cut(part, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if isMethodParam(k) {
			return "the query parameter " + k
		}
	}
	return ""
}

// isMethodParam reports whether a decoded query or form name is "_method"
// as a framework may read it: in any case, and with ".", " " or "[" for
// "_" (PHP rewrites those to "_" in parameter names).
func isMethodParam(name string) bool {
	if len(name) != len("_method") {
		return false
	}
	switch name[0] {
	case '_', '.', ' ', '[':
	default:
		return false
	}
	return strings.EqualFold(name[1:], "method")
}

// sameHeaderName reports whether name is lower-case want in any case, with
// "_" for any "-" (without allocating: it runs for every header of every
// request).
func sameHeaderName(name, want string) bool {
	if len(name) != len(want) {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != want[i] && !(c == '_' && want[i] == '-') {
			return false
		}
	}
	return true
}

// overrideScan wraps the body of a form or multipart request so that a
// "_method" field in it fails the read: the request is then cut off before
// its end, so no upstream acts on it, and refused. Other bodies are left
// as they are.
func overrideScan(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case mt == "application/x-www-form-urlencoded":
		r.Body = &formScanner{ReadCloser: r.Body}
	case mt == "multipart/form-data" || strings.HasPrefix(mt, "multipart/") && params["boundary"] != "":
		r.Body = &partScanner{ReadCloser: r.Body}
	}
}

// errBodyOverride is the refusal of a body carrying a method override.
func errBodyOverride(name string) error {
	return deny(policy.ReasonMethodOverride, "the body carries a %q field, which frameworks (Rails, Laravel, Symfony) take as "+
		"the request's method; send the method itself instead", clip(name))
}

// maxMethodKey is the longest raw form name that can decode to a 7-byte
// "_method" (every byte percent-encoded).
const maxMethodKey = 3 * len("_method")

// formScanner reads a urlencoded form's names as they stream by.
type formScanner struct {
	io.ReadCloser
	inValue bool
	key     []byte
	long    bool // the current name is too long to be _method
}

func (s *formScanner) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, c := range p[:n] {
		switch {
		case c == '&' || c == ';':
			if !s.inValue && s.isMethod() {
				return 0, errBodyOverride(string(s.key))
			}
			s.inValue, s.key, s.long = false, s.key[:0], false
		case s.inValue:
		case c == '=':
			if s.isMethod() {
				return 0, errBodyOverride(string(s.key))
			}
			s.inValue = true
		case len(s.key) < maxMethodKey:
			s.key = append(s.key, c)
		default:
			s.long = true
		}
	}
	if err == io.EOF && !s.inValue && s.isMethod() {
		return 0, errBodyOverride(string(s.key))
	}
	return n, err
}

func (s *formScanner) isMethod() bool {
	if s.long {
		return false
	}
	k, uerr := url.QueryUnescape(string(s.key))
	return uerr == nil && isMethodParam(k)
}

// partScanner looks for a part named _method in a multipart body: a
// `name=` followed by the name, quoted or not, anywhere in the stream
// (carrying a tail over from one read to the next).
type partScanner struct {
	io.ReadCloser
	tail []byte
}

func (s *partScanner) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	buf := append(s.tail, p[:n]...)
	low := bytes.ToLower(buf)
	for i := bytes.Index(low, []byte("name=")); i >= 0; {
		v := bytes.TrimLeft(buf[i+len("name="):], `"'`)
		if end := bytes.IndexAny(v, "\"';\r\n"); end >= 0 {
			v = v[:end]
		} else if err != io.EOF {
			v = nil // the name goes on in the next read, which sees it whole from the tail
		}
		if isMethodParam(string(v)) {
			return 0, errBodyOverride(string(v))
		}
		next := bytes.Index(low[i+1:], []byte("name="))
		if next < 0 {
			break
		}
		i += 1 + next
	}
	keep := min(len(buf), len("name=")+maxMethodKey+2)
	s.tail = append(s.tail[:0], buf[len(buf)-keep:]...)
	return n, err
}
