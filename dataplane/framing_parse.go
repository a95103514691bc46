package dataplane

import (
	"bytes"
	"fmt"
	"math"
	"net/http"

	"github.com/aileronhq/aileron/policy"
)

// The framing guard's parsers: request lines, header fields and chunk-size
// lines, byte by byte, as strictly as the guard's contract says.

// headInfo collects what the framing checks need from one request head.
type headInfo struct {
	lines                    int
	connect, http10, upgrade bool
	clSeen, te               bool
	cl                       int64
	// absolute is the authority of an absolute-form target ("" otherwise)
	// and absPort its scheme's default port; host is the Host header and
	// hosts how many there were.
	absolute, host string
	absPort, hosts int
}

// requestLine checks "METHOD SP request-target SP HTTP/1.x".
func (h *headInfo) requestLine(s []byte) string {
	const bad = `request line is not "METHOD SP request-target SP HTTP/1.x"`
	h.lines++
	method, rest, ok1 := bytes.Cut(s, []byte{' '})
	target, version, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 || len(version) != 8 ||
		string(version[:7]) != "HTTP/1." || !isDigit(version[7]) {
		return bad
	}
	for i, c := range s[:len(method)+1+len(target)] { // method: tchar; target: no SP/HTAB
		if (i < len(method) && !isTchar(c)) || (i > len(method) && c <= ' ') {
			return bad
		}
	}
	h.connect = string(method) == http.MethodConnect
	h.http10 = version[7] == '0'
	if scheme, after, ok := absoluteForm(target); ok {
		end := bytes.IndexAny(after, "/?#")
		if end < 0 {
			end = len(after)
		}
		h.absolute, h.absPort = string(after[:end]), 443
		if eqFold(scheme, "http") {
			h.absPort = 80
		}
	}
	return ""
}

// absoluteForm splits an absolute-form request target ("scheme://rest")
// at its scheme. Only a target that starts with a scheme (RFC 3986: a
// letter, then letters, digits, "+", "-" or ".") is one: an origin-form
// target ("/path?next=https://other.example/") that carries a URL in its
// query is not.
func absoluteForm(target []byte) (scheme, rest []byte, ok bool) {
	scheme, rest, ok = bytes.Cut(target, []byte("://"))
	if !ok || len(scheme) == 0 || !isAlpha(scheme[0]) {
		return nil, nil, false
	}
	for _, c := range scheme[1:] {
		if !isAlpha(c) && !isDigit(c) && c != '+' && c != '-' && c != '.' {
			return nil, nil, false
		}
	}
	return scheme, rest, true
}

func isAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// field checks one header line and records the framing headers.
func (h *headInfo) field(s []byte) string {
	h.lines++
	name, value, msg := splitField(s)
	if msg != "" {
		return msg
	}
	switch {
	case eqFold(name, "Content-Length"):
		if h.clSeen {
			return "request has more than one Content-Length header; send exactly one"
		}
		h.clSeen = true
		n, ok := parseDecimal(trimOWS(value))
		if !ok {
			return "Content-Length is not a decimal number of at most 18 digits; send one plain byte count"
		}
		h.cl = n
	case eqFold(name, "Transfer-Encoding"):
		if h.te {
			return "request has more than one Transfer-Encoding header; send exactly one"
		}
		h.te = true
		if !eqFold(trimOWS(value), "chunked") {
			return `Transfer-Encoding must be exactly "chunked"; other codings are not accepted`
		}
	case eqFold(name, "Upgrade"):
		h.upgrade = true
	case eqFold(name, "Host"):
		h.hosts++
		h.host = string(trimOWS(value))
	}
	return ""
}

// finish runs the checks that need the whole head.
func (h *headInfo) finish() string {
	switch {
	case h.te && h.clSeen:
		return "request has both Content-Length and Transfer-Encoding; send one of them"
	case h.te && h.http10:
		return "Transfer-Encoding is not allowed in an HTTP/1.0 request; use Content-Length"
	case h.hosts > 1:
		return "request has more than one Host header; send exactly one"
	}
	return ""
}

// authorityConflict reports an absolute-form target whose authority and
// the Host header name different destinations. net/http keeps the target's
// and drops the Host header, so this is the one place both are seen; a
// request whose names disagree is refused (authority_mismatch), never sent
// to one while checked as the other.
func (h *headInfo) authorityConflict() string {
	if h.absolute == "" || h.hosts == 0 {
		return ""
	}
	a, errA := policy.ParseAuthority(h.absolute, h.absPort)
	b, errB := policy.ParseAuthority(h.host, h.absPort)
	if errA != nil || errB != nil || a != b {
		return "the absolute-form request target and the Host header name different hosts; they must agree"
	}
	return ""
}

// lineContent strips CRLF from a head, trailer or chunk-size line and
// refuses a bare LF and controls other than HTAB.
func lineContent(line []byte) ([]byte, string) {
	n := len(line)
	if n < 2 || line[n-2] != '\r' {
		return nil, "a line in the request ends with a bare LF; end every line with CRLF"
	}
	s := line[:n-2]
	for _, c := range s {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return nil, fmt.Sprintf("request contains control character 0x%02x; remove it", c)
		}
	}
	return s, ""
}

// splitField splits "name: value"; the value keeps its whitespace. Messages
// never quote header values: they may be secret.
func splitField(s []byte) (name, value []byte, msg string) {
	if s[0] == ' ' || s[0] == '\t' {
		return nil, nil, "header line starts with whitespace (obsolete line folding); put each header on one line"
	}
	i := 0
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	switch {
	case i == len(s):
		return nil, nil, "header line has no colon; send \"Name: value\""
	case s[i] == ' ' || s[i] == '\t':
		return nil, nil, fmt.Sprintf("whitespace between header field name %q and the colon; remove it", s[:min(i, 64)])
	case s[i] != ':' || i == 0:
		return nil, nil, "header field name is empty or contains an invalid character"
	}
	return s[:i], s[i+1:], ""
}

// trimOWS removes leading and trailing spaces and tabs.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// parseChunkLine parses "1*HEXDIG [BWS ";" extension] CRLF".
func parseChunkLine(line []byte) (int64, string) {
	s, msg := lineContent(line)
	if msg != "" {
		return 0, "in chunk-size line: " + msg
	}
	var size uint64
	i := 0
	for ; i < len(s) && unhex(s[i]) >= 0; i++ {
		if i == 16 {
			return 0, "chunk size has more than 16 hex digits"
		}
		size = size<<4 | uint64(unhex(s[i]))
	}
	if i == 0 {
		return 0, "chunk size is not a hexadecimal number"
	}
	if size > math.MaxInt64 {
		return 0, "chunk size is too large"
	}
	if ext := trimOWS(s[i:]); len(s) > i && (len(ext) == 0 || ext[0] != ';') {
		return 0, `chunk size is followed by something other than ";extension"`
	}
	return int64(size), ""
}

// parseDecimal parses 1*DIGIT up to 18 digits (always fits in int64).
func parseDecimal(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func unhex(c byte) int {
	if isDigit(c) {
		return int(c - '0')
	}
	if c |= 0x20; 'a' <= c && c <= 'f' { // only 'A'-'F' and 'a'-'f' map here
		return int(c-'a') + 10
	}
	return -1
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// RFC 9110 tchar as bit sets: tcharLo for bytes 0-63, tcharHi for 64-127.
const (
	tcharLo = 1<<'!' | 1<<'#' | 1<<'$' | 1<<'%' | 1<<'&' | 1<<'\'' | 1<<'*' | 1<<'+' | 1<<'-' | 1<<'.' |
		(1<<10-1)<<'0'
	tcharHi = (1<<26-1)<<('A'-64) | (1<<26-1)<<('a'-64) |
		1<<('^'-64) | 1<<('_'-64) | 1<<('`'-64) | 1<<('|'-64) | 1<<('~'-64)
)

// isTchar reports whether c is an RFC 9110 token character.
func isTchar(c byte) bool {
	if c < 64 {
		return uint64(tcharLo)>>c&1 == 1
	}
	return c < 128 && uint64(tcharHi)>>(c-64)&1 == 1
}

// eqFold compares ASCII case-insensitively.
func eqFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		// Unequal bytes must be the two cases of one letter.
		if x, y := b[i]|0x20, s[i]|0x20; b[i] != s[i] && (x != y || x < 'a' || x > 'z') {
			return false
		}
	}
	return true
}
