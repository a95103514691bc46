package printable

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Hidden reports whether r is shown as an escape rather than as itself:
// every character outside the letters, marks, numbers, punctuation and
// symbols (controls Cc, format characters Cf such as the direction
// overrides U+202E and U+2066..U+2069, private use Co, surrogates Cs,
// unassigned code points, the line and paragraph separators, and every
// space but U+0020); among those five classes, the default-ignorable code
// points, which draw nothing (Other_Default_Ignorable_Code_Point and
// Variation_Selector: U+034F, the Hangul fillers U+115F, U+1160, U+3164
// and U+FFA0, U+17B4 and U+17B5, U+FE00..U+FE0F, …); and U+2800, the
// blank Braille pattern. Every default-ignorable code point is Hidden:
// the rest of them are format characters or unassigned.
func Hidden(r rune) bool {
	if r == ' ' {
		return false
	}
	if !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
		return true
	}
	return unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) || r == '\u2800'
}

// Line makes s safe to show on one line: newlines and tabs are escaped
// too (\n, \t).
func Line(s string) string { return escape(s, false) }

// Text makes s safe to show as lines of text: newlines and tabs stay as
// they are, everything else Hidden is escaped.
func Text(s string) string { return escape(s, true) }

// escape writes s with each Hidden character as an escape: \n, \r and \t
// by name, other ASCII controls and bytes that are not UTF-8 as \xNN, the
// rest as \uNNNN (\UNNNNNNNN beyond U+FFFF). With multiline, newlines and
// tabs stay as they are.
func escape(s string, multiline bool) string {
	if clean(s, multiline) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = appendHex(append(b, '\\', 'x'), uint32(s[i]), 2)
		case multiline && (r == '\n' || r == '\t'):
			b = append(b, byte(r))
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case !Hidden(r):
			b = append(b, s[i:i+size]...)
		case r < utf8.RuneSelf:
			b = appendHex(append(b, '\\', 'x'), uint32(r), 2)
		case r > 0xffff:
			b = appendHex(append(b, '\\', 'U'), uint32(r), 8)
		default:
			b = appendHex(append(b, '\\', 'u'), uint32(r), 4)
		}
		i += size
	}
	return string(b)
}

// appendHex appends v as n lower-case hex digits.
func appendHex(b []byte, v uint32, n int) []byte {
	for shift := 4 * (n - 1); shift >= 0; shift -= 4 {
		b = append(b, hexDigits[v>>shift&0xf])
	}
	return b
}

// clean reports whether s needs no escape at all.
func clean(s string, multiline bool) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if (c < 0x20 || c == 0x7f) && !(multiline && (c == '\n' || c == '\t')) {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || Hidden(r) {
			return false
		}
		i += size
	}
	return true
}

// Clip is Line(s) cut after about limit bytes of s, saying how many more
// bytes there are.
func Clip(s string, limit int) string {
	cut := Cut(s, limit)
	if cut == len(s) {
		return Line(s)
	}
	return Line(s[:cut]) + fmt.Sprintf(" … %d more bytes", len(s)-cut)
}

// Cut is where to cut s to at most limit bytes without splitting a UTF-8
// sequence: len(s) when it fits.
func Cut(s string, limit int) int {
	if len(s) <= limit {
		return len(s)
	}
	cut := max(limit, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}
