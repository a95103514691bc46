package usage

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"
)

// MaxModel bounds a model name taken from a message: a longer one is cut
// at a UTF-8 boundary.
const MaxModel = 128

// maxOpenTurns bounds the turns a connection may have open at once; the
// oldest is reported (End "dropped") to make room.
const maxOpenTurns = 8

// How a turn ended.
const (
	EndCompleted  = "completed"  // response.completed
	EndFailed     = "failed"     // response.failed
	EndIncomplete = "incomplete" // response.incomplete
	EndError      = "error"      // an error event
	EndClosed     = "closed"     // the connection ended first
	EndDropped    = "dropped"    // more than maxOpenTurns were open
)

// Turn is one turn of a Responses WebSocket: from the client's
// response.create message to the event that ends its response.
type Turn struct {
	// Model is the model the response.create asked for (else the one the
	// final event names).
	Model string
	// Tokens are those the final event reported; Reported says it did.
	Tokens   Tokens
	Reported bool
	// End is how the turn ended (EndCompleted, …).
	End string
	// Started is when the client's message ended, FirstByte when the
	// first frame from the upstream after it began (zero when none did).
	Started, FirstByte time.Time
}

// Socket reads an OpenAI Responses WebSocket in both directions and reports
// each turn once it ends. Safe for the two directions' goroutines.
type Socket struct {
	mu       sync.Mutex
	calls    sync.Mutex // held while done runs: never two calls at once
	client   frames
	upstream frames
	cs, us   *scanner
	open     []Turn // oldest first
	ended    []Turn // reported when the lock is released
	done     func(Turn)
}

// Socket returns a reader of one WebSocket connection of dialect api that
// calls done (never concurrently, outside its own lock) for each turn as it
// ends. nil when the dialect has no WebSocket turns (only "openai" does).
func (Reader) Socket(api string, done func(Turn)) *Socket {
	if api != OpenAI {
		return nil
	}
	s := &Socket{done: done, cs: newScanner("type", "model"), us: newScanner("type", "response.usage", "response.model")}
	s.client.onData, s.client.onEnd = s.cs.write, s.clientMessage
	s.upstream.onData, s.upstream.onEnd, s.upstream.onHead = s.us.write, s.upstreamMessage, s.upstreamFrame
	return s
}

// FromClient reads bytes the client sent (the proxy calls it before
// forwarding them, so that a turn is open before its answer can arrive).
func (s *Socket) FromClient(p []byte) { s.feed(&s.client, p) }

// FromUpstream reads bytes the upstream sent, after they were forwarded.
func (s *Socket) FromUpstream(p []byte) { s.feed(&s.upstream, p) }

func (s *Socket) feed(f *frames, p []byte) {
	s.mu.Lock()
	f.write(p)
	s.report()
}

// Close reports the turns still open as ended with the connection.
func (s *Socket) Close() {
	s.mu.Lock()
	for _, t := range s.open {
		t.End = EndClosed
		s.ended = append(s.ended, t)
	}
	s.open = nil
	s.report()
}

// report unlocks s and hands the ended turns to done.
func (s *Socket) report() {
	ended := s.ended
	s.ended = nil
	s.mu.Unlock()
	if len(ended) == 0 {
		return
	}
	s.calls.Lock()
	defer s.calls.Unlock()
	for _, t := range ended {
		s.done(t)
	}
}

func (s *Socket) clientMessage() {
	defer s.cs.reset()
	if str(s.cs.get(0)) != "response.create" {
		return
	}
	if len(s.open) == maxOpenTurns {
		t := s.open[0]
		t.End = EndDropped
		s.ended = append(s.ended, t)
		s.open = s.open[1:]
	}
	s.open = append(s.open, Turn{Model: str(s.cs.get(1)), Started: time.Now()})
}

// upstreamFrame marks the first answer of the oldest turn still waiting.
func (s *Socket) upstreamFrame() {
	for i := range s.open {
		if s.open[i].FirstByte.IsZero() {
			s.open[i].FirstByte = time.Now()
			return
		}
	}
}

func (s *Socket) upstreamMessage() {
	defer s.us.reset()
	var end string
	switch str(s.us.get(0)) {
	case "response.completed":
		end = EndCompleted
	case "response.failed":
		end = EndFailed
	case "response.incomplete":
		end = EndIncomplete
	case "error":
		end = EndError
	default:
		return
	}
	var t Turn // a turn whose response.create went unread still gets its line
	if len(s.open) > 0 {
		t = s.open[0]
		s.open = s.open[1:]
	}
	t.End = end
	t.Reported = t.Tokens.merge(OpenAI, s.us.get(1))
	if t.Model == "" {
		t.Model = str(s.us.get(2))
	}
	s.ended = append(s.ended, t)
}

// str decodes a captured JSON string, cut to MaxModel bytes; "" when raw
// is not a string.
func str(raw []byte) string {
	if len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	if !bytes.ContainsAny(raw[1:len(raw)-1], "\\\"") { // no escapes: as written
		return Clip(string(raw[1:len(raw)-1]), MaxModel)
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return Clip(v, MaxModel)
}

// Clip cuts s to at most n bytes at a UTF-8 boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
