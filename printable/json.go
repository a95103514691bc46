package printable

import (
	"encoding/binary"
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// JSON returns the JSON text b made safe to show with the same value:
// inside strings, every Hidden character is written as its JSON escape
// (\u202e; a surrogate pair beyond U+FFFF), an ASCII control as \u00NN
// and a byte that is not UTF-8 as \ufffd (what a decoder reads it as);
// outside strings, an ASCII control other than a newline becomes a space
// (JSON white space). b itself is returned when nothing needs escaping.
func JSON(b []byte) []byte {
	i := plainJSON(b)
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	inString, escaped := jsonState(b[:i])
	for i < len(b) {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == 0x7f:
				switch {
				case inString:
					out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				case c == '\n':
					out = append(out, c)
				default:
					out = append(out, ' ')
				}
				escaped = false
			case escaped:
				out, escaped = append(out, c), false
			case inString && c == '\\':
				out, escaped = append(out, c), true
			default:
				if c == '"' {
					inString = !inString
				}
				out = append(out, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		escaped = false
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case Hidden(r):
			out = AppendJSONEscape(out, r)
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// plainJSON is the length of b's leading run that JSON leaves as it is:
// printable ASCII, newlines, and runes that are not Hidden. Printable
// ASCII, nearly all of a log or audit line, is skipped eight bytes at a
// time (the daemon's log runs every line through JSON).
func plainJSON(b []byte) int {
	for i := 0; i < len(b); {
		if i+8 <= len(b) && printableWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
			continue
		}
		if c := b[i]; c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size == 1) || Hidden(r) {
			return i
		}
		i += size
	}
	return len(b)
}

// printableWord says whether the 8 bytes of w are all printable ASCII
// (0x20 to 0x7e): no byte has its high bit, none is below 0x20 (exact
// while no byte is >= 0x80), none is DEL.
func printableWord(w uint64) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	ctl := (w - 0x20*lo) &^ w & hi
	del := w ^ 0x7f*lo
	return (w&hi)|ctl|((del-lo)&^del&hi) == 0
}

// jsonState says whether the JSON text b ends inside a string, and then
// whether just after a backslash.
func jsonState(b []byte) (inString, escaped bool) {
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		}
	}
	return inString, escaped
}

// AppendJSONEscape appends r as a JSON string escape: \uNNNN (lower-case
// hex, as encoding/json writes), or the UTF-16 surrogate pair of a rune
// beyond U+FFFF.
func AppendJSONEscape(out []byte, r rune) []byte {
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		return AppendJSONEscape(AppendJSONEscape(out, hi), lo)
	}
	return append(out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
}
