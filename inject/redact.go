package inject

import (
	"bytes"
	"cmp"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Redacted is the visible mask of a secret: each masked occurrence is
// replaced by Mask of its length.
const Redacted = "[REDACTED]"

// maskFill pads Redacted up to a longer secret's length.
const maskFill = '*'

// Mask returns what replaces a secret of n bytes: Redacted cut to n bytes
// ("[RED" for 4), or followed by '*' up to n ("[REDACTED]******" for 16).
// A mask as long as the secret keeps an answer's length, so its
// Content-Length and framing stay as the upstream sent them.
func Mask(n int) string {
	if n <= len(Redacted) {
		return Redacted[:max(n, 0)]
	}
	return Redacted + strings.Repeat(string(maskFill), n-len(Redacted))
}

// MinRedactLen is the shortest string a Redactor masks. Shorter strings are
// ignored: masking every "abc" in a response would mangle ordinary content
// (JSON, HTML, binary) while protecting almost nothing, since a value that
// short cannot be a meaningful secret on its own; every longer form of it
// (a formatted header, "user:pass", base64) is still masked.
const MinRedactLen = 4

// readChunk is the buffer Body reads through for a caller whose buffer is
// too small to read into directly.
const readChunk = 32 << 10

// noMatch marks a pattern with no occurrence left in the current window.
const noMatch = math.MaxInt

// Redactor masks secret strings in what an upstream sends back. Build one
// from Apply's echoes (Redactors keeps one per set); it is immutable and
// safe for concurrent use.
// Every method is safe on a nil *Redactor, which masks nothing.
//
// Matching is leftmost, and longest among secrets starting at the same
// byte; each match becomes Mask of its length and scanning resumes after
// it.
type Redactor struct {
	pats   [][]byte // distinct, longest first
	masks  [][]byte // Mask of each pattern's length
	strs   []string // pats as strings
	lower  []string // pats lower-cased, for header names
	maxLen int
	first  [256]bool // first bytes of pats
}

// NewRedactor builds a Redactor for secrets, ignoring empty strings,
// duplicates and strings shorter than MinRedactLen (see there why).
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{}
	seen := make(map[string]bool, len(secrets))
	for _, s := range secrets {
		if len(s) < MinRedactLen || seen[s] {
			continue
		}
		seen[s] = true
		r.pats = append(r.pats, []byte(s))
	}
	slices.SortStableFunc(r.pats, func(a, b []byte) int { return cmp.Compare(len(b), len(a)) })
	for _, p := range r.pats {
		r.strs = append(r.strs, string(p))
		r.masks = append(r.masks, []byte(Mask(len(p))))
		r.lower = append(r.lower, strings.ToLower(string(p)))
		r.maxLen = max(r.maxLen, len(p))
		r.first[p[0]] = true
	}
	return r
}

// Redactors keeps the Redactor of each set of secrets: a credential is
// injected request after request, and its Redactor is the same each time.
// It holds at most maxCachedRedactors sets (then starts over), so rotated
// secrets do not pile up. Its keys are the secrets themselves, in the
// daemon's memory as the Redactors (and EchoForms) already hold them. The
// zero value is ready; it is safe for concurrent use.
type Redactors struct {
	mu sync.Mutex
	m  map[string]*Redactor
}

const maxCachedRedactors = 1024

// For returns the Redactor of secrets, as NewRedactor builds it.
func (c *Redactors) For(secrets []string) *Redactor {
	var key strings.Builder
	for _, s := range secrets { // length-prefixed: no two lists share a key
		key.WriteString(strconv.Itoa(len(s)))
		key.WriteByte(':')
		key.WriteString(s)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.m[key.String()]; ok {
		return r
	}
	if c.m == nil || len(c.m) >= maxCachedRedactors {
		c.m = map[string]*Redactor{}
	}
	r := NewRedactor(secrets...)
	c.m[key.String()] = r
	return r
}

// Empty reports whether r masks nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.pats) == 0 }

// String returns s with every occurrence of a secret replaced by its mask
// (Mask): the result is as long as s.
func (r *Redactor) String(s string) string {
	if r.Empty() || !r.containsAny(s) {
		return s
	}
	next := make([]int, len(r.pats))
	out, _ := r.process(make([]byte, 0, len(s)), []byte(s), true, next)
	return string(out)
}

func (r *Redactor) containsAny(s string) bool {
	for _, p := range r.strs {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// Header masks secrets in h in place: every value is passed through String,
// and a header whose name contains a secret (compared case-insensitively,
// as names are canonicalized) is removed. Use it on trailers too.
func (r *Redactor) Header(h http.Header) {
	if r.Empty() {
		return
	}
	for k, vs := range h {
		if r.nameHasSecret(k) {
			delete(h, k)
			continue
		}
		for i, v := range vs {
			vs[i] = r.String(v)
		}
	}
}

func (r *Redactor) nameHasSecret(name string) bool {
	if len(name) < MinRedactLen {
		return false
	}
	ln := strings.ToLower(name)
	for _, p := range r.lower {
		if strings.Contains(ln, p) {
			return true
		}
	}
	return false
}

// earliest returns the leftmost complete match at or after pos in buf
// (longest at a tie), or at = -1. next caches, per pattern, its first
// occurrence at or after an earlier pos (-1 = unknown, noMatch = none).
func (r *Redactor) earliest(buf []byte, pos int, next []int) (at, pi int) {
	at = -1
	for i, p := range r.pats {
		n := next[i]
		if n < pos {
			if j := bytes.Index(buf[pos:], p); j < 0 {
				n = noMatch
			} else {
				n = pos + j
			}
			next[i] = n
		}
		if n != noMatch && (at < 0 || n < at) {
			at, pi = n, i
		}
	}
	return at, pi
}

// holdFrom returns the smallest j ≥ from such that buf[j:] is a proper
// prefix of some secret (more input could complete a match there), or
// len(buf).
func (r *Redactor) holdFrom(buf []byte, from int) int {
	for j := max(from, len(buf)-r.maxLen+1); j < len(buf); j++ {
		if !r.first[buf[j]] {
			continue
		}
		tail := buf[j:]
		for _, p := range r.pats {
			if len(p) > len(tail) && bytes.Equal(p[:len(tail)], tail) {
				return j
			}
		}
	}
	return len(buf)
}

// process appends buf, masked, to dst and returns how many bytes of buf it
// consumed. Unless eof, it stops at the first byte that could begin a match
// still incomplete at the end of buf; that tail must be processed again with
// more input. next must have one slot per pattern.
func (r *Redactor) process(dst, buf []byte, eof bool, next []int) ([]byte, int) {
	n := len(dst)
	dst = append(dst, buf...)
	done := r.maskInPlace(dst[n:], eof, next) // a mask is as long as its secret
	return dst[:n+done], done
}

// maskInPlace masks buf where it lies, as process would (a mask is as
// long as its secret), and returns how many bytes of buf are decided:
// unless eof, those before the first byte that could begin a match still
// incomplete at the end of buf. next must have one slot per pattern.
func (r *Redactor) maskInPlace(buf []byte, eof bool, next []int) int {
	for i := range next {
		next[i] = -1
	}
	pos, hold := 0, -1
	for {
		at, pi := r.earliest(buf, pos, next)
		limit := len(buf)
		if !eof {
			if hold < pos {
				hold = r.holdFrom(buf, pos)
			}
			limit = hold
		}
		if at < 0 || at >= limit {
			return limit
		}
		copy(buf[at:], r.masks[pi])
		pos = at + len(r.pats[pi])
	}
}

// Body wraps rc so that every secret in the stream is masked. It never
// buffers a whole body, and masks in place in the caller's buffer: each
// Read returns what it read except a trailing partial match (a suffix that
// is a proper prefix of some secret, so at most the longest secret's length
// minus one byte), held until the next Read, so SSE events and chunks
// arrive as sent and matches spanning Read boundaries are caught. Every
// mask is as long as its secret, so the masked body is as long as rc. At
// EOF the held bytes are flushed. On any other read error the held bytes
// are dropped (they may be the start of a secret) and the error is
// returned. Closing the result closes rc. A nil or empty Redactor returns
// rc itself.
func (r *Redactor) Body(rc io.ReadCloser) io.ReadCloser {
	if r.Empty() || rc == nil || rc == http.NoBody {
		return rc
	}
	return &redactBody{r: r, src: rc, next: make([]int, len(r.pats))}
}

// redactBody is the streaming reader behind Redactor.Body. A Read into a
// buffer of at least minDirect(maxLen) bytes reads and masks in that
// buffer; a smaller one goes through small. After warm-up it allocates
// nothing.
type redactBody struct {
	r     *Redactor
	src   io.ReadCloser
	held  []byte // read but undecided: a tail that may begin a secret
	small []byte // a masked piece read for a small caller's buffer
	off   int    // read offset in small
	next  []int
	err   error // sticky source error, io.EOF included
}

// minDirect is the smallest caller's buffer read into directly: room
// for the held bytes and at least as many new ones.
func minDirect(maxLen int) int { return max(2*maxLen, 512) }

func (b *redactBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.off < len(b.small) {
		n := copy(p, b.small[b.off:])
		b.off += n
		return n, nil
	}
	if len(p) >= minDirect(b.r.maxLen) {
		return b.readInto(p)
	}
	if b.small == nil {
		b.small = make([]byte, 0, max(readChunk, minDirect(b.r.maxLen)))
	}
	n, err := b.readInto(b.small[:cap(b.small)])
	b.small, b.off = b.small[:n], copy(p, b.small[:n])
	return b.off, err
}

// readInto reads from the source into p after the held bytes and masks
// p in place. It returns either bytes (and nil) or an error: the source's,
// after the held bytes were flushed at EOF. p has room for more than the
// held bytes.
func (b *redactBody) readInto(p []byte) (int, error) {
	for {
		h := copy(p, b.held)
		b.held = b.held[:0]
		if b.err != nil {
			if b.err == io.EOF && h > 0 {
				return b.r.maskInPlace(p[:h], true, b.next), nil
			}
			return 0, b.err
		}
		n, err := b.src.Read(p[h:])
		buf := p[:h+n]
		b.err = err
		done := b.r.maskInPlace(buf, err == io.EOF, b.next)
		if err == nil {
			b.held = append(b.held, buf[done:]...)
		} // at EOF nothing is held; on any other error the undecided tail is dropped
		switch {
		case done > 0:
			return done, nil
		case err != nil:
			return 0, err
		case n == 0:
			return 0, nil // the source made no progress; let the caller retry
		}
	}
}

func (b *redactBody) Close() error { return b.src.Close() }
