package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPatternLen and maxPatternSegs bound operation path patterns.
const (
	maxPatternLen  = 2048
	maxPatternSegs = 64
)

// segProblem classifies what makes a path segment non-canonical.
type segProblem uint8

const (
	segOK segProblem = iota
	segDot
	segEncodedSlash
	segBackslash
	segNUL
	segControl
	segBadEscape
	segRawReserved
	segBadUTF8
	segDoubleEncoded
)

func (p segProblem) String() string {
	switch p {
	case segDot:
		return "is a dot segment (\".\" or \"..\", raw or percent-encoded)"
	case segEncodedSlash:
		return "contains an encoded '/' (%2F)"
	case segBackslash:
		return "contains a backslash, raw or encoded (%5C)"
	case segNUL:
		return "contains NUL, raw or encoded (%00)"
	case segControl:
		return "contains a control character, raw or encoded"
	case segBadEscape:
		return "contains an invalid percent-escape"
	case segRawReserved:
		return "contains a raw space, '?' or '#'"
	case segBadUTF8:
		return "decodes to invalid UTF-8"
	case segDoubleEncoded:
		return "is double-encoded (%25 followed by an escape of '.', '/', '\\' or a control character)"
	}
	return "is fine"
}

// CheckPath checks a request path exactly as sent (URL-escaped, without the
// query) and returns nil when it is canonical: it starts with '/', has no
// empty segment except one trailing slash, no "." or ".." segment (raw or
// percent-encoded in any case, also before a ';' parameter), no encoded
// '/', no '\', NUL or control characters raw or encoded, no raw space,
// '?' or '#', only valid percent-escapes, valid UTF-8 once decoded, and no
// double-encoded dangerous character (such as %252e). It never normalises.
// It does not allocate for paths without percent-escapes of non-ASCII
// bytes or of '%'. Every failure wraps ErrNonCanonicalPath.
func CheckPath(escaped string) error {
	if escaped == "" || escaped[0] != '/' {
		return fmt.Errorf("%w: path %s must start with '/'", ErrNonCanonicalPath, quote(escaped))
	}
	start := 1
	n := 1
	for i := 1; i <= len(escaped); i++ {
		if i < len(escaped) && escaped[i] != '/' {
			continue
		}
		seg := escaped[start:i]
		if seg == "" && i < len(escaped) {
			return fmt.Errorf("%w: path %s has an empty segment (\"//\") at segment %d", ErrNonCanonicalPath, quote(escaped), n)
		}
		if p := checkSegment(seg); p != segOK {
			return fmt.Errorf("%w: path %s: segment %d (%s) %s", ErrNonCanonicalPath, quote(escaped), n, quote(seg), p)
		}
		start = i + 1
		n++
	}
	return nil
}

// checkSegment inspects one escaped segment.
func checkSegment(seg string) segProblem {
	dots, decodedLen := 0, 0
	semi := -1 // decoded length before the first ';'
	semiDots := 0
	pct, high, pct25 := false, false, false
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if isAlnum(c) || c == '-' || c == '_' {
			decodedLen++ // common case: nothing to check
			continue
		}
		if c == '%' {
			if i+2 >= len(seg) {
				return segBadEscape
			}
			h, l := unhex(seg[i+1]), unhex(seg[i+2])
			if h < 0 || l < 0 {
				return segBadEscape
			}
			c = byte(h<<4 | l)
			i += 2
			pct = true
			switch c {
			case '/':
				return segEncodedSlash
			case '%':
				pct25 = true
			}
		} else if c == ' ' || c == '?' || c == '#' {
			return segRawReserved
		}
		if p := forbiddenByte(c); p != segOK {
			return p
		}
		if c >= 0x80 {
			high = true
		}
		if c == ';' && semi < 0 {
			semi, semiDots = decodedLen, dots
		}
		if c == '.' {
			dots++
		}
		decodedLen++
	}
	if isDotRun(dots, decodedLen) || (semi > 0 && isDotRun(semiDots, semi)) {
		return segDot
	}
	if high || pct25 {
		return checkDecoded(seg, pct, high, pct25)
	}
	return segOK
}

// isDotRun reports whether a decoded run of n bytes, dots of them '.', is
// "." or "..".
func isDotRun(dots, n int) bool { return n > 0 && n <= 2 && dots == n }

// forbiddenByte classifies a decoded byte that may never appear in a path.
func forbiddenByte(c byte) segProblem {
	switch {
	case c == 0:
		return segNUL
	case c == '\\':
		return segBackslash
	case c < 0x20 || c == 0x7f:
		return segControl
	}
	return segOK
}

// checkDecoded handles the rare segments with non-ASCII bytes or an encoded
// '%': the decoded form must be valid UTF-8, and decoding it a second time
// must not reveal a dot segment or a forbidden character.
func checkDecoded(seg string, pct, high, pct25 bool) segProblem {
	dec := seg
	if pct {
		dec = unescape(seg)
	}
	if high && !utf8.ValidString(dec) {
		return segBadUTF8
	}
	if !pct25 {
		return segOK
	}
	twice := make([]byte, 0, len(dec))
	for i := 0; i < len(dec); i++ {
		c := dec[i]
		if c == '%' && i+2 < len(dec) {
			if h, l := unhex(dec[i+1]), unhex(dec[i+2]); h >= 0 && l >= 0 {
				c = byte(h<<4 | l)
				i += 2
				if c == '/' || forbiddenByte(c) != segOK {
					return segDoubleEncoded
				}
			}
		}
		twice = append(twice, c)
	}
	base, _, _ := strings.Cut(string(twice), ";")
	if isDotRun(strings.Count(base, "."), len(base)) {
		return segDoubleEncoded
	}
	return segOK
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// unescape percent-decodes s, keeping invalid escapes as they are. It
// returns s itself when s has no '%'.
func unescape(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	return string(appendUnescaped(make([]byte, 0, len(s)), s))
}

// appendUnescaped appends the percent-decoded form of s to b.
func appendUnescaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			if h, l := unhex(s[i+1]), unhex(s[i+2]); h >= 0 && l >= 0 {
				c = byte(h<<4 | l)
				i += 2
			}
		}
		b = append(b, c)
	}
	return b
}

type segKind uint8

const (
	segLiteral segKind = iota
	segSingle          // {name}
	segMulti           // {name...}
)

// patSeg is one segment of a compiled path pattern.
type patSeg struct {
	kind segKind
	lit  string // unescaped literal (segLiteral)
	name string // variable name (segSingle, segMulti)
}

// pattern is a parsed operation path.
type pattern struct {
	segs []patSeg
	vars []string
}

// shape renders the pattern with variable names erased: two patterns with
// the same shape match exactly the same requests with equal priority.
func (p *pattern) shape() string {
	var b strings.Builder
	for _, s := range p.segs {
		switch s.kind {
		case segLiteral:
			b.WriteString("/l")
			b.WriteString(s.lit)
		case segSingle:
			b.WriteString("/s")
		case segMulti:
			b.WriteString("/m")
		}
	}
	return b.String()
}

// parsePattern parses an operation path such as "/v1/items/{id}". On
// failure it returns the rule broken and a message.
func parsePattern(path string) (*pattern, string, string) {
	bad := func(rule, format string, args ...any) (*pattern, string, string) {
		return nil, rule, fmt.Sprintf("path %s ", quote(path)) + fmt.Sprintf(format, args...)
	}
	switch {
	case len(path) > maxPatternLen:
		return bad(rulePathLength, "is longer than %d bytes", maxPatternLen)
	case path == "" || path[0] != '/':
		return bad(rulePathAbsolute, "must start with '/', e.g. \"/v1/items\"")
	case strings.ContainsAny(path, "?#"):
		return bad(rulePathQuery, "must not contain '?' or '#'; declare query parameters as inputs instead")
	}
	raw := strings.Split(path[1:], "/")
	if len(raw) > maxPatternSegs {
		return bad(rulePathLength, "has more than %d segments", maxPatternSegs)
	}
	p := &pattern{}
	for i, seg := range raw {
		last := i == len(raw)-1
		if seg == "" && !last {
			return bad(rulePathEmptySegment, "has an empty segment (\"//\"); only a single trailing slash is allowed")
		}
		ps, rule, msg := parsePatSeg(seg, last, p.vars)
		if rule != "" {
			return bad(rule, "%s", msg)
		}
		if ps.kind != segLiteral {
			p.vars = append(p.vars, ps.name)
		}
		p.segs = append(p.segs, ps)
	}
	return p, "", ""
}

// parsePatSeg parses one pattern segment; seen are the variables so far.
func parsePatSeg(seg string, last bool, seen []string) (patSeg, string, string) {
	if !strings.ContainsAny(seg, "{}") {
		if p := checkSegment(seg); p != segOK {
			rule := rulePathChars
			if p == segDot {
				rule = rulePathDotSegment
			}
			return patSeg{}, rule, fmt.Sprintf("segment %s %s", quote(seg), p)
		}
		return patSeg{kind: segLiteral, lit: unescape(seg)}, "", ""
	}
	if len(seg) < 2 || seg[0] != '{' || seg[len(seg)-1] != '}' || strings.Count(seg, "{") != 1 || strings.Count(seg, "}") != 1 {
		return patSeg{}, rulePathTemplateMix, fmt.Sprintf("segment %s mixes literal text and a template; a template must be a whole segment such as \"{id}\"", quote(seg))
	}
	name, kind := seg[1:len(seg)-1], segSingle
	if n, ok := strings.CutSuffix(name, "..."); ok {
		name, kind = n, segMulti
	}
	if name == "$" {
		return patSeg{}, rulePathTemplate, "uses \"{$}\", which is not supported: a pattern without a trailing {name...} already matches only the exact path"
	}
	if !isIdent(name) {
		return patSeg{}, rulePathTemplate, fmt.Sprintf("has template %s; a template is {name} or {name...} where name is letters, digits and underscores, not starting with a digit", quote(seg))
	}
	if kind == segMulti && !last {
		return patSeg{}, rulePathTemplateLast, fmt.Sprintf("has %s before the last segment; {name...} must be the last segment", quote(seg))
	}
	for _, v := range seen {
		if v == name {
			return patSeg{}, rulePathTemplateDup, fmt.Sprintf("uses template variable %s twice; give each variable its own name", quote(name))
		}
	}
	return patSeg{kind: kind, name: name}, "", ""
}

// isIdent reports whether s is an ASCII Go identifier.
func isIdent(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
