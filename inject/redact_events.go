package inject

import (
	"bytes"
	"io"
	"net/http"
	"slices"
)

// Bounds of EventStream.
const (
	// maxEventBytes: a longer event is masked and released in pieces as
	// it arrives, like Body does, without its joins across events.
	maxEventBytes = 64 << 10
	// maxHeldBytes bounds the events held while their text may be the
	// start of a secret continued in the next; past it the oldest go out.
	maxHeldBytes = 256 << 10
)

// EventStream is Body for a server-sent event stream (text/event-stream):
// it also masks a secret whose bytes an upstream spreads over consecutive
// events, in the string values of one JSON key ("text", "content",
// "delta", …) as a model streams its output a few characters an event.
// Each event is released once it is complete (its blank line arrived:
// nothing a client could act on sooner), masked, unless the text of one of
// its keys, joined with the same key's text in the events before, ends
// with at least MinRedactLen bytes that begin a secret: then it is held
// until a later event shows whether the secret goes on. Where a secret is
// completed, each of its pieces in an event still held becomes the part of
// the secret's mask (Mask) at its place, so events keep their lengths; a
// piece already released (at most MinRedactLen-1 bytes, or past
// maxHeldBytes) stays sent. A nil or empty Redactor
// returns rc itself.
func (r *Redactor) EventStream(rc io.ReadCloser) io.ReadCloser {
	if r.Empty() || rc == nil || rc == http.NoBody {
		return rc
	}
	return &eventRedact{r: r, src: rc, runs: map[string]*run{}, next: make([]int, len(r.pats))}
}

// eventRedact is the reader behind EventStream.
type eventRedact struct {
	r       *Redactor
	src     io.ReadCloser
	pending []byte       // the event being received
	scanned int          // bytes of pending already searched for an event's end
	held    []*heldEvent // complete events not yet released, oldest first
	base    int          // sequence number of held[0]
	heldN   int          // bytes held
	runs    map[string]*run
	cur     []cut // cuts in the event being taken
	out     []byte
	off     int
	next    []int
	err     error
	buf     [16 << 10]byte
}

// heldEvent is a complete, masked event and the cuts still to make in it.
type heldEvent struct {
	b    []byte
	cuts []cut
}

type cut struct {
	from, to int
	with     string
}

// run is one key's text joined across events: only its tail that may
// still begin a secret, and where each of its bytes sits.
type run struct {
	text   []byte
	pieces []piece
}

// piece is a stretch of a run's text: in event seq, bytes [from, to).
type piece struct{ seq, from, to int }

func (e *eventRedact) Read(p []byte) (int, error) {
	for e.off == len(e.out) {
		e.out, e.off = e.out[:0], 0
		if e.err != nil {
			return 0, e.err
		}
		e.fill()
	}
	n := copy(p, e.out[e.off:])
	e.off += n
	return n, nil
}

// fill reads once from the source and releases what it can.
func (e *eventRedact) fill() {
	n, err := e.src.Read(e.buf[:])
	e.pending = append(e.pending, e.buf[:n]...)
	for {
		// resume where the last search stopped (less the few bytes an
		// event's end may straddle): an event sent a byte at a time
		// costs linear time, not quadratic
		from := max(e.scanned-3, 0)
		end := eventEnd(e.pending[from:])
		if end < 0 {
			e.scanned = len(e.pending)
			break
		}
		end += from
		e.event(e.pending[:end])
		e.pending = e.pending[:copy(e.pending, e.pending[end:])]
		e.scanned = 0
	}
	if len(e.pending) > maxEventBytes { // not an event's size: mask it as Body would
		var used int
		e.releaseAll()
		e.out, used = e.r.process(e.out, e.pending, false, e.next)
		e.pending = e.pending[:copy(e.pending, e.pending[used:])]
		e.scanned = 0
	}
	switch {
	case err == io.EOF:
		if len(e.pending) > 0 {
			e.event(e.pending)
			e.pending = e.pending[:0]
		}
		e.releaseAll()
		e.err = io.EOF
	case err != nil:
		e.err = err // held events and a partial one are dropped: they may hold the start of a secret
	}
}

// eventEnd is the length of the first complete event in b (through its
// blank line), or -1.
func eventEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' && b[i] != '\r' {
			continue
		}
		j := i + 1
		if b[i] == '\r' && j < len(b) && b[j] == '\n' {
			j++
		}
		if j < len(b) && (b[j] == '\n' || b[j] == '\r') {
			if b[j] == '\r' && j+1 < len(b) && b[j+1] == '\n' {
				return j + 2
			}
			if b[j] == '\r' && j+1 == len(b) {
				return -1 // a CR that may be the start of a CRLF
			}
			return j + 1
		}
	}
	return -1
}

// event takes one complete event: masks it into the output, joins its
// string values to their keys' runs, and holds it (and what follows) while
// a run may still be the start of a secret.
func (e *eventRedact) event(raw []byte) {
	o := len(e.out)
	e.out, _ = e.r.process(e.out, raw, true, e.next)
	masked := e.out[o:]
	seq := e.base + len(e.held)
	e.cur = e.cur[:0]
	eachString(masked, func(key []byte, from, to int) {
		e.join(key, piece{seq: seq, from: from, to: to}, masked[from:to])
	})
	oldest := seq + 1
	for _, ru := range e.runs {
		if len(ru.text) >= MinRedactLen && len(ru.pieces) > 0 {
			oldest = min(oldest, ru.pieces[0].seq)
		}
	}
	if len(e.held) == 0 && oldest > seq && len(e.cur) == 0 {
		e.base++ // out as it is, already in the output
		return
	}
	e.held = append(e.held, &heldEvent{b: bytes.Clone(masked), cuts: slices.Clone(e.cur)})
	e.heldN += len(masked)
	e.out = e.out[:o]
	for len(e.held) > 0 && (e.base < oldest || e.heldN > maxHeldBytes) {
		e.release()
	}
}

// join appends a string value to its key's run, cuts a secret the run
// now completes, and keeps only the tail that may begin a secret.
func (e *eventRedact) join(key []byte, pc piece, text []byte) {
	ru := e.runs[string(key)]
	if ru == nil || len(ru.text) == 0 {
		if e.r.holdFrom(text, 0) == len(text) {
			if ru != nil {
				ru.pieces = ru.pieces[:0]
			}
			return // nothing in it may begin a secret (a whole one was masked already)
		}
		if ru == nil {
			if len(e.runs) >= 64 {
				return // a stream of many keys: join only the first 64
			}
			ru = &run{}
			e.runs[string(key)] = ru
		}
	}
	start := len(ru.text)
	ru.text = append(ru.text, text...)
	ru.pieces = append(ru.pieces, pc)
	for {
		at, pi := e.r.earliest(ru.text, 0, resetNext(e.next))
		if at < 0 || at+len(e.r.pats[pi]) <= start {
			break // none, or one inside earlier pieces: masked already
		}
		end := at + len(e.r.pats[pi])
		e.cutSpan(ru, at, end)
		start = max(0, start-end)
	}
	drop := e.r.holdFrom(ru.text, 0)
	ru.text = ru.text[:copy(ru.text, ru.text[drop:])]
	ru.pieces = trimPieces(ru.pieces, drop)
}

func resetNext(next []int) []int {
	for i := range next {
		next[i] = -1
	}
	return next
}

// cutSpan masks the run's bytes [a, b) in the held events that carry them
// (each piece becomes the part of the secret's mask at its place, so every
// event keeps its length) and cuts them from the run.
func (e *eventRedact) cutSpan(ru *run, a, b int) {
	mask, pos := Mask(b-a), 0
	for _, pc := range ru.pieces {
		n := pc.to - pc.from
		lo, hi := max(a, pos), min(b, pos+n)
		if lo < hi {
			c := cut{from: pc.from + lo - pos, to: pc.from + hi - pos, with: mask[lo-a : hi-a]}
			if i := pc.seq - e.base; i >= 0 && i <= len(e.held) { // not released yet
				if i == len(e.held) { // the event being taken
					e.cur = append(e.cur, c)
				} else {
					e.held[i].cuts = append(e.held[i].cuts, c)
				}
			}
		}
		pos += n
	}
	ru.text = ru.text[:copy(ru.text, ru.text[b:])] // what follows the secret starts a new run
	ru.pieces = trimPieces(ru.pieces, b)
}

// trimPieces drops the first n bytes of a run's pieces.
func trimPieces(ps []piece, n int) []piece {
	for len(ps) > 0 && n > 0 {
		l := ps[0].to - ps[0].from
		if l > n {
			ps[0].from += n
			break
		}
		n -= l
		ps = ps[1:]
	}
	return slices.Clip(ps)
}

// release sends the oldest held event, with its cuts made.
func (e *eventRedact) release() {
	h := e.held[0]
	e.held = e.held[1:]
	e.base++
	e.heldN -= len(h.b)
	slices.SortFunc(h.cuts, func(x, y cut) int { return x.from - y.from })
	at := 0
	for _, c := range h.cuts {
		if c.from < at {
			continue // overlapping cuts: the first stands
		}
		e.out = append(e.out, h.b[at:c.from]...)
		e.out = append(e.out, c.with...)
		at = c.to
	}
	e.out = append(e.out, h.b[at:]...)
}

func (e *eventRedact) releaseAll() {
	for len(e.held) > 0 {
		e.release()
	}
	clear(e.runs)
}

func (e *eventRedact) Close() error { return e.src.Close() }

// eachString calls f with each string value of the JSON text in b (its
// raw bytes between the quotes, escapes as sent) and the key it belongs
// to (the last object key before it); at most 64.
func eachString(b []byte, f func(key []byte, from, to int)) {
	var key []byte
	for i, n := 0, 0; i < len(b) && n < 64; i++ {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return
		}
		start := i + q + 1
		j := start
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(b) {
			return
		}
		k := j + 1
		for k < len(b) && (b[k] == ' ' || b[k] == '\t') {
			k++
		}
		if k < len(b) && b[k] == ':' {
			key = b[start:j]
		} else if !bytes.ContainsAny(b[start:j], "\n\r") {
			f(key, start, j)
			n++
		}
		i = j
	}
}
