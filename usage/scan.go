package usage

import "bytes"

// maxCapture bounds one captured value (a usage object, a type or model
// string): a larger one is dropped, never buffered whole.
const maxCapture = 8 << 10

// maxKey bounds an object key the scanner remembers; longer keys match no
// path.
const maxKey = 32

// maxPathDepth is how deep a captured path may lie: "response.usage" is
// depth 2, and 3 in a document that is an array of such objects (Gemini's
// streamGenerateContent without alt=sse).
const maxPathDepth = 3

// scanner reads one JSON document as bytes arrive and captures the raw
// text of the values at a few paths (an object or a string), without
// validating or keeping anything else. Its memory is fixed: the keys of
// the enclosing objects up to maxPathDepth and the captures, each at most
// maxCapture bytes.
type scanner struct {
	paths []string // dotted paths of the values to capture
	depth int      // containers open
	kinds [maxPathDepth + 1]byte
	keys  [maxPathDepth + 1][]byte // the current key at each depth (1-based)
	// state of the lexer
	inStr, esc bool
	isKey      bool // the open string is a key
	expectKey  bool // the next string at this depth is a key (an object, after '{' or ',')
	keyBuf     []byte
	keyLong    bool
	broken     bool // unbalanced: ignore the rest
	// the value being captured
	capIdx   int // index in paths, -1 when none
	capDepth int // depth at which it started
	capBuf   []byte
	capLong  bool
	captured [][]byte // per path: the last complete capture
}

func newScanner(paths ...string) *scanner {
	s := &scanner{paths: paths, capIdx: -1, captured: make([][]byte, len(paths))}
	for i := range s.keys {
		s.keys[i] = make([]byte, 0, maxKey)
	}
	s.keyBuf = make([]byte, 0, maxKey)
	return s
}

// reset readies the scanner for the next document, keeping its buffers.
func (s *scanner) reset() {
	s.depth, s.inStr, s.esc, s.isKey, s.expectKey, s.broken = 0, false, false, false, false, false
	s.keyBuf, s.keyLong = s.keyBuf[:0], false
	s.capIdx, s.capBuf, s.capLong = -1, s.capBuf[:0], false
	for i := range s.captured {
		s.captured[i] = s.captured[i][:0]
	}
}

// get returns the last complete capture of path i (nil when none).
func (s *scanner) get(i int) []byte {
	if len(s.captured[i]) == 0 {
		return nil
	}
	return s.captured[i]
}

// write scans p. Inside a string that is neither a key nor captured, it
// skips to the next quote or backslash at once: most of an answer is text.
func (s *scanner) write(p []byte) {
	for i := 0; i < len(p); i++ {
		if s.inStr && !s.esc && !s.isKey && s.capIdx < 0 {
			j := bytes.IndexAny(p[i:], "\"\\")
			if j < 0 {
				return
			}
			i += j
		}
		s.byte(p[i])
	}
}

func (s *scanner) byte(c byte) {
	if s.broken {
		return
	}
	if s.capIdx >= 0 {
		if len(s.capBuf) < maxCapture {
			s.capBuf = append(s.capBuf, c)
		} else {
			s.capLong = true
		}
	}
	if s.inStr {
		s.strByte(c)
		return
	}
	switch c {
	case '"':
		s.startValue(c)
		s.inStr, s.isKey = true, s.expectKey && s.kind() == '{'
		s.keyBuf, s.keyLong = s.keyBuf[:0], false
	case '{', '[':
		s.startValue(c)
		s.depth++
		if s.depth <= maxPathDepth {
			s.kinds[s.depth] = c
			s.keys[s.depth] = s.keys[s.depth][:0]
		}
		s.expectKey = c == '{'
	case '}', ']':
		s.depth--
		if s.depth < 0 {
			s.broken = true
			return
		}
		s.expectKey = false
		s.endValue()
	case ',':
		s.expectKey = s.kind() == '{'
	}
}

// kind is the open container at the current depth ('{', '[' or 0 when it
// is deeper than the paths reach, or at the top).
func (s *scanner) kind() byte {
	if s.depth == 0 || s.depth > maxPathDepth {
		return 0
	}
	return s.kinds[s.depth]
}

func (s *scanner) strByte(c byte) {
	switch {
	case s.esc:
		s.esc = false
	case c == '\\':
		s.esc = true
	case c == '"':
		s.inStr = false
		if s.isKey {
			s.isKey, s.expectKey = false, false
			if s.depth <= maxPathDepth {
				s.keys[s.depth] = append(s.keys[s.depth][:0], s.keyBuf...)
				if s.keyLong {
					s.keys[s.depth] = append(s.keys[s.depth][:0], 0) // no path names it
				}
			}
			return
		}
		s.endValue()
		return
	}
	if s.isKey {
		if len(s.keyBuf) < maxKey {
			s.keyBuf = append(s.keyBuf, c)
		} else {
			s.keyLong = true
		}
	}
}

// startValue begins a capture when a value (an object or a string, first
// byte c) starts at a wanted path. Keys are not values.
func (s *scanner) startValue(c byte) {
	if s.capIdx >= 0 || s.depth == 0 || s.depth > maxPathDepth || s.kind() != '{' || (c == '"' && s.expectKey) {
		return
	}
	for i, p := range s.paths {
		if s.atPath(p) {
			s.capIdx, s.capDepth, s.capLong = i, s.depth, false
			s.capBuf = append(s.capBuf[:0], c)
			return
		}
	}
}

// atPath reports whether the value about to start is at path p: the keys
// of the open objects, from the top (or from each element of a top-level
// array), spell it.
func (s *scanner) atPath(p string) bool {
	d := 1
	if s.kinds[1] == '[' {
		d = 2
	}
	for ; d <= s.depth; d++ {
		if s.kinds[d] != '{' {
			return false
		}
		k := s.keys[d]
		if len(p) < len(k) || p[:len(k)] != string(k) {
			return false
		}
		p = p[len(k):]
		if d < s.depth {
			if len(p) == 0 || p[0] != '.' {
				return false
			}
			p = p[1:]
		}
	}
	return p == ""
}

// endValue ends a capture whose value just closed.
func (s *scanner) endValue() {
	if s.capIdx < 0 || s.depth != s.capDepth {
		return
	}
	if !s.capLong {
		s.captured[s.capIdx] = append(s.captured[s.capIdx][:0], s.capBuf...)
	}
	s.capIdx = -1
}
