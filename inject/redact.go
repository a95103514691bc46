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

// Redacted replaces every masked occurrence of a secret.
const Redacted = "[REDACTED]"

// MinRedactLen is the shortest string a Redactor masks. Shorter strings are
// ignored: masking every "abc" in a response would mangle ordinary content
// (JSON, HTML, binary) while protecting almost nothing, since a value that
// short cannot be a meaningful secret on its own; every longer form of it
// (a formatted header, "user:pass", base64) is still masked.
const MinRedactLen = 4

// readChunk is how much Body asks its source for per Read.
const readChunk = 32 << 10

// noMatch marks a pattern with no occurrence left in the current window.
const noMatch = math.MaxInt

// Redactor masks secret strings in what an upstream sends back. Build one
// from Apply's echoes (Redactors keeps one per set); it is immutable and
// safe for concurrent use.
// Every method is safe on a nil *Redactor, which masks nothing.
//
// Matching is leftmost, and longest among secrets starting at the same
// byte; each match becomes Redacted and scanning resumes after it.
type Redactor struct {
	pats   [][]byte // distinct, longest first
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

// String returns s with every occurrence of a secret replaced by Redacted.
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
			return append(dst, buf[pos:limit]...), limit
		}
		dst = append(dst, buf[pos:at]...)
		dst = append(dst, Redacted...)
		pos = at + len(r.pats[pi])
	}
}

// Body wraps rc so that every secret in the stream is masked. It never
// buffers a whole body: each Read releases everything it has except a
// trailing partial match (a suffix that is a proper prefix of some secret,
// so at most the longest secret's length minus one byte), so SSE events and
// chunks arrive as sent; matches spanning Read boundaries are caught. At EOF
// the held bytes are flushed. On any other read error the held bytes are
// dropped (they may be the start of a secret) and the error is returned.
// Closing the result closes rc. A nil or empty Redactor returns rc itself.
func (r *Redactor) Body(rc io.ReadCloser) io.ReadCloser {
	if r.Empty() || rc == nil || rc == http.NoBody {
		return rc
	}
	return &redactBody{r: r, src: rc, next: make([]int, len(r.pats))}
}

// redactBody is the streaming reader behind Redactor.Body. After warm-up its
// buffers are reused, so a Read allocates nothing.
type redactBody struct {
	r    *Redactor
	src  io.ReadCloser
	in   []byte // unreleased input (a held partial match) plus new input
	out  []byte // masked output not yet returned
	off  int    // read offset in out
	next []int
	err  error // sticky source error, io.EOF included
}

func (b *redactBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for b.off == len(b.out) {
		if b.err != nil {
			return 0, b.err
		}
		if n := b.fill(); n == 0 && b.err == nil && b.off == len(b.out) {
			return 0, nil // the source made no progress; let the caller retry
		}
	}
	n := copy(p, b.out[b.off:])
	b.off += n
	if b.off == len(b.out) {
		b.out, b.off = b.out[:0], 0
		if b.err == io.EOF {
			return n, io.EOF
		}
	}
	return n, nil
}

// fill reads once from the source and masks what can be decided. It returns
// how many bytes the source gave.
func (b *redactBody) fill() int {
	if b.in == nil {
		b.in = make([]byte, 0, readChunk+b.r.maxLen)
	}
	held := len(b.in)
	n, err := b.src.Read(b.in[held : held+readChunk])
	b.in = b.in[:held+n]
	if err != nil {
		b.err = err
	}
	var used int
	b.out, used = b.r.process(b.out, b.in, err == io.EOF, b.next)
	if err != nil {
		used = len(b.in) // EOF: all flushed; other errors: drop the held tail
	}
	b.in = b.in[:copy(b.in, b.in[used:])]
	return n
}

func (b *redactBody) Close() error { return b.src.Close() }
