package sandbox

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameLen bounds a command (tool, action) or operation name, as the spec
// validator does.
const maxNameLen = 128

// shellQuote single-quotes s for a POSIX shell: the result is one word whose
// value is exactly s. An embedded single quote closes the quoting, is written
// backslash-escaped, and reopens it. Nothing inside single quotes is special
// to the shell ($, `, \, newlines are literal). s must not contain NUL, which
// no shell variable or script can hold; callers check with safeLiteral or
// clean the text with cleanText first.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// nameProblem reports why name cannot be a command (and file) name in the
// shims directory, or "" when it can: 1 to 128 bytes of letters, digits,
// '.', '_', '-', ':', not "." or "..", not starting with '-' (it would read
// as an option). These are the spec validator's rules; they are checked again
// here so that the shim generator is safe on its own.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "it is empty"
	case len(name) > maxNameLen:
		return "it is longer than 128 bytes"
	case name == "." || name == "..":
		return "it names a directory"
	case name[0] == '-':
		return "it starts with '-' and would read as an option"
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			return "it contains " + strconvQuoteByte(c) + "; use only letters, digits, dots, dashes, underscores or colons"
		}
	}
	return ""
}

// strconvQuoteByte renders c for an error message: printable ASCII as 'c',
// anything else as its hex code.
func strconvQuoteByte(c byte) string {
	if c > ' ' && c < 0x7f {
		return "'" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string(hex[c>>4]) + string(hex[c&0xf])
}

// fieldProblem reports why s cannot be one space-separated field of
// tools.txt (a connector FQN), or "": it must be non-empty valid UTF-8 with
// no white space and no control characters.
func fieldProblem(s string) string {
	if s == "" {
		return "it is empty"
	}
	if !utf8.ValidString(s) {
		return "it is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || isBidiControl(r) {
			return "it contains white space or a control character"
		}
	}
	return ""
}

// cleanText makes third-party text (descriptions, summaries) safe to print
// on a terminal and to embed in a shim: invalid UTF-8 becomes U+FFFD, CRLF
// and CR become LF, tabs stay, every other control character (C0, DEL, C1,
// which includes terminal escape introducers) and the Unicode bidirectional
// overrides are dropped, and surrounding white space is trimmed. The result
// never contains NUL.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || isBidiControl(r) {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// oneLine is cleanText folded onto one line: runs of white space (newlines
// included) become one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(cleanText(s)), " ")
}

// isBidiControl reports the Unicode bidirectional embedding, override and
// isolate characters, which can make a terminal show text in another order
// than the bytes say.
func isBidiControl(r rune) bool {
	return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069' || r == '\u200E' || r == '\u200F' || r == '\u061C'
}

// indent prefixes every non-empty line of s with prefix.
func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
