package inject

import (
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Default placement values.
const (
	// DefaultHeader carries a credential when a placement names no header
	// and no query parameter.
	DefaultHeader = "Authorization"
	// DefaultFormat renders a credential in the Authorization header.
	DefaultFormat = "Bearer {token}"
	// RawFormat renders a credential in any other header or in a query
	// parameter: the secret alone.
	RawFormat = "{token}"
)

// Placement says where a token credential goes: a header whose value is
// rendered from Format, or the query parameter Query. In Format, "{token}"
// and "{key}" are both replaced by the secret ("Bearer {token}", Linear's raw
// "{key}"); no other placeholder is allowed.
//
// Defaults (applied by Apply and PlacementFor alike): no Header and no Query
// means Header "Authorization"; an empty Format means "Bearer {token}" for
// the Authorization header and the raw "{token}" for any other header or a
// query parameter (X-Api-Key: sk-… rather than X-Api-Key: Bearer sk-…).
// Setting both Header and Query is an error.
//
// For basic credentials only Header is used (default Authorization, value
// "Basic base64(user:pass)"). aws_sigv4 ignores the Placement: the signature
// always goes in Authorization and the X-Amz-* headers.
type Placement struct{ Header, Format, Query string }

// PlacementFor derives the placement from a spec operation's credential
// object: api_key, bearer and oauth2 go in the header Authorization as
// "Bearer {token}" unless the spec names a header, a format or a query
// parameter; basic goes in Authorization (or the named header) as HTTP
// basic; aws_sigv4 yields the zero Placement. Validation is Apply's job.
func PlacementFor(c policy.Credential) Placement {
	switch c.Kind {
	case KindSigV4:
		return Placement{}
	case KindBasic:
		return Placement{Header: c.Header, Query: c.Query}.normalized(KindBasic)
	}
	return Placement{Header: c.Header, Format: c.Format, Query: c.Query}.normalized(c.Kind)
}

// normalized fills in the documented defaults.
func (pl Placement) normalized(kind string) Placement {
	if kind == KindBasic {
		if pl.Header == "" && pl.Query == "" {
			pl.Header = DefaultHeader
		}
		return pl
	}
	if pl.Header == "" && pl.Query == "" {
		pl.Header = DefaultHeader
	}
	if pl.Format == "" {
		pl.Format = RawFormat
		if pl.Query == "" && strings.EqualFold(pl.Header, DefaultHeader) {
			pl.Format = DefaultFormat
		}
	}
	return pl
}

// check validates a normalized placement for kind. Every failure wraps
// ErrBadPlacement.
func (pl Placement) check(kind string) error {
	if pl.Header != "" && pl.Query != "" {
		return fmt.Errorf("%w: both header %q and query parameter %q are set; choose one", ErrBadPlacement, pl.Header, pl.Query)
	}
	if kind == KindBasic && pl.Query != "" {
		return fmt.Errorf("%w: basic credentials go in a header, not query parameter %q", ErrBadPlacement, pl.Query)
	}
	if pl.Header != "" {
		if !policy.IsToken(pl.Header) {
			return fmt.Errorf("%w: %q is not a valid HTTP header name", ErrBadPlacement, pl.Header)
		}
		if policy.ReservedHeader(pl.Header) {
			return fmt.Errorf("%w: header %q is a connection or framing header and cannot carry a credential", ErrBadPlacement, pl.Header)
		}
	}
	if pl.Query != "" && strings.ContainsAny(pl.Query, "&=#;%+ \t\r\n\x00") {
		return fmt.Errorf("%w: query parameter name %q must not contain '&', '=', '#', ';', '%%', '+', spaces or control characters", ErrBadPlacement, pl.Query)
	}
	if kind != KindBasic {
		return checkFormat(pl.Format)
	}
	return nil
}

// checkFormat requires at least one {token} or {key}, no other placeholder,
// no stray brace and no control character.
func checkFormat(f string) error {
	n := 0
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c < 0x20 && c != '\t' || c == 0x7f:
			return fmt.Errorf("%w: format %q contains a control character", ErrBadPlacement, f)
		case c == '}':
			return fmt.Errorf("%w: format %q has a '}' without '{'", ErrBadPlacement, f)
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 {
				return fmt.Errorf("%w: format %q has a '{' without '}'", ErrBadPlacement, f)
			}
			if name := f[i+1 : i+end]; name != "token" && name != "key" {
				return fmt.Errorf("%w: format %q uses placeholder {%s}; only {token} and {key} are replaced by the secret", ErrBadPlacement, f, name)
			}
			n++
			i += end
		}
	}
	if n == 0 {
		return fmt.Errorf("%w: format %q has no {token} or {key} placeholder, so the secret would not be sent; write e.g. \"Bearer {token}\" or \"{key}\"", ErrBadPlacement, f)
	}
	return nil
}

// render replaces every {token} and {key} in format by secret.
func render(format, secret string) string {
	if !strings.Contains(format, "{") {
		return format
	}
	var b strings.Builder
	for format != "" { // one pass: a secret holding "{key}" is never expanded again
		i := strings.IndexByte(format, '{')
		if i < 0 {
			b.WriteString(format)
			break
		}
		b.WriteString(format[:i])
		switch rest := format[i:]; {
		case strings.HasPrefix(rest, "{token}"):
			b.WriteString(secret)
			format = rest[len("{token}"):]
		case strings.HasPrefix(rest, "{key}"):
			b.WriteString(secret)
			format = rest[len("{key}"):]
		default:
			b.WriteByte('{')
			format = rest[1:]
		}
	}
	return b.String()
}

// setHeader replaces every value the client put under name (matched case-
// insensitively, whatever the map key's spelling) by v.
func setHeader(h http.Header, name, v string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
	h[textproto.CanonicalMIMEHeaderKey(name)] = []string{v}
}

// setQuery replaces every parameter named name in u's raw query (compared
// both raw and percent-decoded, so "api%5Fkey" counts) by name=value. The
// other parameters keep their bytes and order.
func setQuery(u *url.URL, name, value string) {
	var b strings.Builder
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		if part == "" || queryPartNames(part, name) {
			continue
		}
		b.WriteString(part)
		b.WriteByte('&')
	}
	b.WriteString(url.QueryEscape(name))
	b.WriteByte('=')
	b.WriteString(url.QueryEscape(value))
	u.RawQuery = b.String()
	u.ForceQuery = false
}

// queryPartNames reports whether one '&'-separated part names the parameter
// name. Parts are also split on ';', which some servers treat as a separator.
func queryPartNames(part, name string) bool {
	for sub := range strings.SplitSeq(part, ";") {
		key, _, _ := strings.Cut(sub, "=")
		if key == name {
			return true
		}
		if dec, err := url.QueryUnescape(key); err == nil && dec == name {
			return true
		}
	}
	return false
}

// validFieldValue reports whether v can be sent as a header value: no
// control characters other than horizontal tab.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
