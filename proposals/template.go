package proposals

import (
	"fmt"
	"net/url"
	"strings"
)

// minHexSegment is the shortest hexadecimal segment Template generalises:
// shorter ones are as likely to be words ("cafe", "deadbeef") as ids.
const minHexSegment = 16

// Template generalises an escaped request path (no query) into a path
// template: every segment that is a decimal number, a UUID or at least 16
// hexadecimal digits (with at least one digit) becomes a placeholder,
// {id}, {uuid} or {hex}, numbered from the second of a kind on ({id2}).
// Segments are classified by their unescaped value; every other segment
// is kept as sent, with any literal brace escaped so that it cannot read
// as a placeholder. The number of segments, and so a trailing slash, is
// kept. An empty path is "/".
func Template(path string) string {
	if path == "" {
		return "/"
	}
	segs := strings.Split(path, "/")
	seen := map[string]int{}
	for i, s := range segs {
		kind := segmentKind(s)
		if kind == "" {
			segs[i] = strings.NewReplacer("{", "%7B", "}", "%7D").Replace(s)
			continue
		}
		seen[kind]++
		if n := seen[kind]; n > 1 {
			kind = fmt.Sprintf("%s%d", kind, n)
		}
		segs[i] = "{" + kind + "}"
	}
	return strings.Join(segs, "/")
}

// segmentKind names the placeholder escaped segment s becomes, or "" when
// it stays literal.
func segmentKind(s string) string {
	v, err := url.PathUnescape(s)
	if err != nil || v == "" {
		return ""
	}
	switch {
	case isDigits(v):
		return "id"
	case isUUID(v):
		return "uuid"
	case len(v) >= minHexSegment && isHex(v) && strings.ContainsAny(v, "0123456789"):
		return "hex"
	}
	return ""
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// isUUID reports whether s is a UUID in its 8-4-4-4-12 hexadecimal form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if s[i] != '-' {
				return false
			}
		} else if !isHex(s[i : i+1]) {
			return false
		}
	}
	return true
}
