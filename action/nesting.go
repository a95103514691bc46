package action

import (
	"fmt"
	"strings"
)

// Bounds on the shape of the front matter. The TOML decoder recurses on
// nested arrays and inline tables and is quadratic in the parts of a
// dotted key, so a hostile manifest could otherwise exhaust memory.
const (
	maxNesting  = 32 // arrays, inline tables and table headers
	maxKeyParts = 32 // parts of one dotted key, such as a.b.c
)

// shapeProblem reports front matter that nests deeper than maxNesting or
// has a dotted key of more than maxKeyParts parts. It skips strings and
// comments; on text it cannot lex it stops and leaves the error to the
// TOML decoder.
func shapeProblem(s string) string {
	var stack []byte // '[' array, '{' inline table, 'h' table header
	keyMode, dots := true, 0
	line := func(i int) int { return strings.Count(s[:i], "\n") + 2 } // front matter starts on line 2
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '#':
			end := strings.IndexByte(s[i:], '\n')
			if end < 0 {
				return ""
			}
			i += end - 1
		case c == '"' || c == '\'':
			n := skipString(s[i:])
			if n < 0 {
				return ""
			}
			i += n - 1
		case c == '\n' && len(stack) == 0:
			keyMode, dots = true, 0
		case c == '[' || c == '{':
			kind := c
			if c == '[' && keyMode && (len(stack) == 0 || stack[len(stack)-1] == 'h') {
				kind = 'h'
			}
			stack = append(stack, kind)
			if len(stack) > maxNesting {
				return fmt.Sprintf("arrays and tables nest more than %d levels deep on line %d; flatten the value", maxNesting, line(i))
			}
			keyMode = kind != '['
			if c == '{' {
				dots = 0
			}
		case c == ']' || c == '}':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			keyMode = len(stack) > 0 && stack[len(stack)-1] == 'h'
		case c == ',' && len(stack) > 0 && stack[len(stack)-1] == '{':
			keyMode, dots = true, 0
		case c == '=' && keyMode:
			keyMode = false
		case c == '.' && keyMode:
			if dots++; dots >= maxKeyParts {
				return fmt.Sprintf("a dotted key on line %d has more than %d parts; use fewer levels", line(i), maxKeyParts)
			}
		}
	}
	return ""
}

// skipString returns the length of the TOML string starting at s[0] (a
// quote), or -1 when it is not terminated.
func skipString(s string) int {
	q := s[0]
	if len(s) >= 3 && s[1] == q && s[2] == q { // multi-line
		for i := 3; i+2 < len(s); i++ {
			if q == '"' && s[i] == '\\' {
				i++
				continue
			}
			if s[i] == q && s[i+1] == q && s[i+2] == q {
				// Up to two more quotes may belong to the content.
				j := i + 3
				for k := 0; k < 2 && j < len(s) && s[j] == q; k++ {
					j++
				}
				return j
			}
		}
		return -1
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\n':
			return -1
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q:
			return i + 1
		}
	}
	return -1
}
