package inject

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// PlaceholderPrefix starts every placeholder credential.
const PlaceholderPrefix = "aileron-placeholder-"

// decodeRounds is how many layers of percent-encoding ContainsPlaceholder
// peels off (so "%2561ileron-…" is found too).
const decodeRounds = 3

// Placeholder returns the fake credential handed to a sandbox for SDKs that
// refuse to start without an API key: PlaceholderPrefix followed by 32
// lower-case hex characters of HMAC-SHA256(key, sessionID + "\x00" +
// credentialName). It is stable per session and credential, reveals nothing
// about the real secret, and cannot be forged without key.
func Placeholder(key []byte, sessionID, credentialName string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(sessionID))
	m.Write([]byte{0})
	m.Write([]byte(credentialName))
	return PlaceholderPrefix + hex.EncodeToString(m.Sum(nil)[:16])
}

// ContainsPlaceholder reports whether r still carries a placeholder: any
// header or trailer value, the Host, the path (decoded and raw), the raw
// query or the URL's userinfo contains PlaceholderPrefix, compared
// case-insensitively, also under up to three layers of percent-encoding of
// any of its characters. The proxy refuses such a request: it would send a
// fake key upstream, or probe which operations swap it.
func ContainsPlaceholder(r *http.Request) bool {
	if r == nil {
		return false
	}
	if hasPlaceholder(r.Host) || headerHasPlaceholder(r.Header) || headerHasPlaceholder(r.Trailer) {
		return true
	}
	u := r.URL
	if u == nil {
		return false
	}
	if hasPlaceholder(u.Path) || hasPlaceholder(u.RawPath) || hasPlaceholder(u.Opaque) ||
		hasPlaceholder(u.RawQuery) || hasPlaceholder(u.Fragment) || hasPlaceholder(u.Host) {
		return true
	}
	return u.User != nil && hasPlaceholder(u.User.String())
}

func headerHasPlaceholder(h http.Header) bool {
	for k, vs := range h {
		if hasPlaceholder(k) {
			return true
		}
		for _, v := range vs {
			if hasPlaceholder(v) {
				return true
			}
		}
	}
	return false
}

// hasPlaceholder reports whether s contains the prefix, case-insensitively,
// as is or after up to decodeRounds lenient percent-decodings ('+' is also
// read as a space, which cannot hide the prefix).
func hasPlaceholder(s string) bool {
	for round := 0; ; round++ {
		if containsFold(s, PlaceholderPrefix) {
			return true
		}
		if round == decodeRounds || strings.IndexByte(s, '%') < 0 {
			return false
		}
		s = percentDecode(s)
	}
}

// containsFold reports whether s contains the lower-case ASCII needle,
// ignoring ASCII case, without allocating.
func containsFold(s, needle string) bool {
	for i := 0; i+len(needle) <= len(s); i++ {
		j := 0
		for j < len(needle) && lowerASCII(s[i+j]) == needle[j] {
			j++
		}
		if j == len(needle) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// percentDecode decodes every valid %XX escape and keeps anything else as
// is (unlike url.PathUnescape, a stray '%' does not stop it).
func percentDecode(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
