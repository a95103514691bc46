package usage

import (
	"bytes"
	"strings"
)

// Reader makes the observers of model calls. Its zero value is ready.
type Reader struct{}

// Answer returns an observer of the body of an answer to a call of dialect
// api whose Content-Type is ctype: an event stream (text/event-stream) or
// a JSON document (any other type). nil when api is not a dialect.
func (Reader) Answer(api, ctype string) *Answer {
	paths := usagePaths(api)
	if paths == nil {
		return nil
	}
	a := &Answer{api: api, sc: newScanner(paths...)}
	if mt, _, _ := strings.Cut(ctype, ";"); strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
		a.sse = &sse{}
	}
	return a
}

// Answer reads the tokens one answer reports, from its body's bytes as
// they pass. Not safe for concurrent use.
type Answer struct {
	api      string
	sc       *scanner
	sse      *sse // nil for a JSON answer
	tokens   Tokens
	reported bool
	flushed  bool
}

// Observe reads the next bytes of the body.
func (a *Answer) Observe(p []byte) {
	if a.sse == nil {
		a.sc.write(p)
		return
	}
	a.sse.write(p, a.sc, a.event)
}

// event takes the usage of one complete stream event.
func (a *Answer) event() {
	a.take()
	a.sc.reset()
}

// take merges what the scanner captured.
func (a *Answer) take() {
	for i := range a.sc.paths {
		if raw := a.sc.get(i); raw != nil && a.tokens.merge(a.api, raw) {
			a.reported = true
		}
	}
}

// Tokens returns the counts read so far, and whether the answer reported
// any usage at all. Call it once the body ended: a JSON answer's usage is
// taken then, and a stream's last event even without its closing blank
// line.
func (a *Answer) Tokens() (Tokens, bool) {
	if !a.flushed {
		a.flushed = true
		if a.sse == nil || a.sse.data {
			a.take()
		}
	}
	return a.tokens, a.reported
}

// sse splits an event stream into events (text/event-stream, WHATWG HTML
// "server-sent events"): it feeds the value of each data line to the
// scanner (several data lines joined by a newline) and calls the event
// function at each blank line that ends an event. It keeps no line.
type sse struct {
	field   [5]byte // the first bytes of the line's field name
	nf      int
	inValue bool // past the colon of a data line
	isData  bool
	skipSP  bool // the one optional space after the colon
	lastCR  bool
	data    bool // the event has a data line
	other   bool // the line has content (a blank line has none)
}

func (s *sse) write(p []byte, sc *scanner, event func()) {
	for i := 0; i < len(p); i++ {
		if s.inValue && !s.skipSP && !s.lastCR { // the rest of the line's value at once
			j := bytes.IndexAny(p[i:], "\r\n")
			if j < 0 {
				j = len(p) - i
			}
			if j > 0 {
				if s.isData {
					sc.write(p[i : i+j])
				}
				s.other = true
				i += j
				if i == len(p) {
					return
				}
			}
		}
		c := p[i]
		if s.lastCR {
			s.lastCR = false
			if c == '\n' {
				continue // CRLF ends one line
			}
		}
		if c == '\r' || c == '\n' {
			s.lastCR = c == '\r'
			s.endLine(sc, event)
			continue
		}
		s.other = true
		switch {
		case s.inValue:
			if s.skipSP {
				s.skipSP = false
				if c == ' ' {
					continue
				}
			}
			if s.isData {
				sc.byte(c)
			}
		case c == ':':
			s.inValue, s.skipSP = true, true
			s.isData = s.nf == 4 && string(s.field[:4]) == "data"
			if s.isData {
				if s.data {
					sc.byte('\n') // the lines of one event's data are joined by a newline
				}
				s.data = true
			}
		default:
			if s.nf < len(s.field) {
				s.field[s.nf] = c
			}
			s.nf++
		}
	}
}

// endLine ends a line; a blank one ends the event.
func (s *sse) endLine(sc *scanner, event func()) {
	if !s.other {
		if s.data {
			event()
		}
		s.data = false
	} else if !s.inValue && s.nf == 4 && string(s.field[:4]) == "data" {
		// "data" with no colon: an empty data line
		if s.data {
			sc.byte('\n')
		}
		s.data = true
	}
	s.nf, s.inValue, s.isData, s.skipSP, s.other = 0, false, false, false, false
}
