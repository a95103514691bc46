package inject

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Apply puts s on out, the outbound request, at pl, mutating out's Header
// and URL (and, for aws_sigv4, its Body) in place. Whatever the client put
// in the same place (the same header, or the same query parameter) is
// replaced, not appended to. now is the signing time for aws_sigv4 (zero
// means time.Now()); other kinds ignore it.
//
// It returns every string a reflecting upstream might echo that would reveal
// the secret, for NewRedactor: the raw secret, the formatted header value, its
// query-escaped, path-escaped and JSON-escaped forms, its base64 (standard and
// URL alphabets, padded and unpadded, plus for long secrets the stable core
// of its encoding at each byte alignment, which catches it inside a larger
// base64 blob). For basic: base64("user:pass"), "user:pass" and the password,
// each in those forms. For aws_sigv4: the secret access key and session
// token forms (the access key id is an identifier, not a secret).
//
// aws_sigv4 signs with the official AWS signer: service from s.Service,
// region from the host (see Region). It sets X-Amz-Date,
// X-Amz-Content-Sha256 and, for temporary credentials, X-Amz-Security-Token,
// and removes any client-sent SigV4 header or presigned-URL query parameter.
// To hash the body it reads it (at most MaxSignedBody bytes) and replaces
// out.Body with a re-readable copy (GetBody and ContentLength set); a client
// that declared X-Amz-Content-Sha256: UNSIGNED-PAYLOAD (or
// STREAMING-UNSIGNED-PAYLOAD-TRAILER) keeps its body streaming, unread.
// SigV4 re-encodes the query string canonically.
//
// Failures wrap ErrBadSecret, ErrBadPlacement or ErrBodyTooLarge; out may be
// partly modified and must then not be sent. Errors never contain the secret.
func Apply(out *http.Request, pl Placement, s Secret, now time.Time) (echoes []string, err error) {
	return ApplyWith(out, pl, s, now, nil)
}

// ApplyWith is Apply that works out each secret's echo forms once per
// forms (nil: every time).
func ApplyWith(out *http.Request, pl Placement, s Secret, now time.Time, forms *EchoForms) (echoes []string, err error) {
	if out == nil || out.URL == nil || out.Header == nil {
		return nil, fmt.Errorf("%w: the outbound request has no URL or header map", ErrBadPlacement)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	switch s.Kind {
	case KindSigV4:
		if now.IsZero() {
			now = time.Now()
		}
		return applySigV4(out, s, now, forms)
	case KindBasic:
		return applyBasic(out, pl.normalized(KindBasic), s, forms)
	}
	return applyToken(out, pl.normalized(s.Kind), s, forms)
}

// applyToken places an api_key, bearer or oauth2 token.
func applyToken(out *http.Request, pl Placement, s Secret, forms *EchoForms) ([]string, error) {
	if err := pl.check(s.Kind); err != nil {
		return nil, err
	}
	v := render(pl.Format, s.Token)
	e := echoSet{cache: forms}
	e.forms(s.Token)
	e.forms(v)
	if pl.Query != "" {
		setQuery(out.URL, pl.Query, v)
		return e.list, nil
	}
	if !validFieldValue(v) {
		return nil, fmt.Errorf("%w: %s token contains a control character and cannot go in header %q", ErrBadSecret, s.Kind, pl.Header)
	}
	setHeader(out.Header, pl.Header, v)
	return e.list, nil
}

// applyBasic places HTTP basic credentials.
func applyBasic(out *http.Request, pl Placement, s Secret, forms *EchoForms) ([]string, error) {
	if err := pl.check(KindBasic); err != nil {
		return nil, err
	}
	pair := s.Username + ":" + s.Password
	v := "Basic " + base64.StdEncoding.EncodeToString([]byte(pair))
	e := echoSet{cache: forms}
	e.forms(s.Password)
	e.forms(pair)
	e.add(v)
	setHeader(out.Header, pl.Header, v)
	return e.list, nil
}

// echoSet collects distinct echo strings in a stable order.
type echoSet struct {
	list  []string
	cache *EchoForms // nil: forms are worked out every time
}

func (e *echoSet) add(v string) {
	for _, have := range e.list {
		if have == v {
			return
		}
	}
	e.list = append(e.list, v)
}

// coreMin is the secret length from which the alignment cores of its base64
// encoding are added: shorter cores would match unrelated base64 data.
const coreMin = 16

// forms adds v and every encoded form of it an upstream could echo.
func (e *echoSet) forms(v string) {
	if v == "" {
		return
	}
	for _, f := range e.cache.of(v) {
		e.add(f)
	}
}

// EchoForms remembers each secret's encoded forms: a secret is injected on
// request after request, and working them out costs more than the rest of
// the injection. It holds at most maxCachedSecrets (then starts over), so
// rotated secrets do not pile up. The zero value is ready; it is safe for
// concurrent use; a nil *EchoForms remembers nothing.
type EchoForms struct {
	mu sync.Mutex
	m  map[string][]string
}

const maxCachedSecrets = 1024

func (c *EchoForms) of(v string) []string {
	if c == nil {
		return encodedForms(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.m[v]; ok {
		return f
	}
	if c.m == nil || len(c.m) >= maxCachedSecrets {
		c.m = map[string][]string{}
	}
	f := encodedForms(v)
	c.m[v] = f
	return f
}

// encodedForms is v and every encoded form of it an upstream could echo.
func encodedForms(v string) []string {
	var e echoSet
	e.add(v)
	e.add(url.QueryEscape(v))
	e.add(url.PathEscape(v))
	e.add(jsonEscape(v))
	e.add(strings.ReplaceAll(jsonEscape(v), "/", `\/`)) // encoders that escape '/'
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		e.add(enc.EncodeToString([]byte(v)))
		raw := enc.WithPadding(base64.NoPadding)
		e.add(raw.EncodeToString([]byte(v)))
		if len(v) >= coreMin {
			for shift := range 3 {
				e.add(base64Core(raw, v, shift))
			}
		}
	}
	return e.list
}

// base64Core returns the characters of the encoding of v, preceded by shift
// other bytes and followed by more, that depend on v's bytes alone: what v
// looks like anywhere inside a larger base64 text.
func base64Core(raw *base64.Encoding, v string, shift int) string {
	buf := make([]byte, shift+len(v)+2)
	copy(buf[shift:], v)
	enc := raw.EncodeToString(buf)
	first := (8*shift + 5) / 6       // first character whose 6 bits start inside v
	last := 8 * (shift + len(v)) / 6 // characters [first,last) end inside v
	return enc[first:last]
}

// jsonEscape is v as it appears inside a JSON string written by Go's
// encoder (which also escapes <, > and &).
func jsonEscape(v string) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) < 2 {
		return v
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(b), `"`), `"`)
}
