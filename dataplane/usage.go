package dataplane

import (
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/aileronhq/aileron/audit"
)

// Usage reads what model calls report: the tokens of an answer, and the
// turns of a WebSocket. An operation whose spec names a usage dialect
// (policy.OperationSpec.Usage) is a model call; the relay feeds the reader
// the answer's bytes after writing them to the client, so reading adds no
// buffering and delays no event. A nil Proxy.Usage reads no tokens: the
// record still has the model asked for (read by the proxy itself, before
// the approval gate), whether the answer streamed and its time to first
// byte.
type Usage interface {
	// Answer returns the reader of one answer's body, given the dialect
	// and the answer's Content-Type; nil reads nothing.
	Answer(api, contentType string) AnswerUsage
	// Socket returns the reader of one WebSocket connection's frames,
	// which calls turn as each turn ends (never concurrently); nil reads
	// nothing.
	Socket(api string, turn func(Turn)) SocketUsage
}

// AnswerUsage reads one answer's body as it passes.
type AnswerUsage interface {
	Observe(p []byte)
	// Tokens is called once, when the body ended (or broke off): the
	// counts and whether the answer reported usage at all.
	Tokens() (Tokens, bool)
}

// SocketUsage reads the two directions of a WebSocket connection as they
// pass: FromClient is given the client's bytes just before they go on to
// the upstream (so a turn is open before its answer can come), FromUpstream
// the upstream's once they reached the client. Close reports the turns
// still open.
type SocketUsage interface {
	FromClient(p []byte)
	FromUpstream(p []byte)
	Close()
}

// Tokens are the counts a provider reported.
type Tokens struct {
	Input, Output, Cached int64
}

// Turn is one request and answer on a model API's WebSocket (an OpenAI
// Responses response.create and the event that ends its response).
type Turn struct {
	Model    string
	Tokens   Tokens
	Reported bool
	// End is how the turn ended: completed, failed, incomplete, error,
	// closed (the connection ended first), dropped (too many open).
	End string
	// Started is when the client's request ended; FirstByte when the
	// answer's first frame began (zero when none did).
	Started, FirstByte time.Time
}

// answerTap is what the relay learns of a model call's answer as it
// copies it: the first byte's time, and the tokens.
type answerTap struct {
	x     *exchange
	rec   *Record
	sent  time.Time
	read  AnswerUsage // nil: no tokens read
	first bool
	broke bool // the answer broke off: what it reported may not be final
}

// newAnswerTap starts reading the answer to x, a model call (nil for any
// other request): the record says whether it streams.
func (p *Proxy) newAnswerTap(x *exchange, resp *http.Response) *answerTap {
	if x.op == nil || x.op.Spec.Usage == "" {
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	x.rec.Streamed = mt == "text/event-stream"
	tap := &answerTap{x: x, rec: x.rec, sent: x.sent}
	if p.Usage != nil {
		tap.read = p.Usage.Answer(x.op.Spec.Usage, ct)
	}
	return tap
}

// arrived notes that bytes of the answer's body arrived: the first time,
// the record gets its time to first byte.
func (t *answerTap) arrived() {
	if t != nil && !t.first {
		t.first = true
		t.rec.TTFBMS = ms(time.Since(t.sent))
	}
}

// saw takes bytes the client was sent.
func (t *answerTap) saw(b []byte) {
	if t != nil && t.read != nil {
		t.read.Observe(b)
	}
}

// brokeOff notes that the answer broke off before its end (the client
// left, or the upstream cut it): the usage seen so far may not be the
// final report (an Anthropic stream reports its output tokens in its last
// events), so the call counts as unreported.
func (t *answerTap) brokeOff() {
	if t != nil {
		t.broke = true
	}
}

// done puts the tokens on the record once the answer ended, or notes
// that a successful answer reported none (or broke off before its end).
func (t *answerTap) done() {
	if t == nil {
		return
	}
	if t.read != nil {
		if n, ok := t.Tokens(); ok {
			t.rec.InputTokens, t.rec.OutputTokens, t.rec.CachedTokens = n.Input, n.Output, n.Cached
			if !t.broke {
				return
			}
		}
	}
	ok := t.rec.UpstreamStatus >= 200 && t.rec.UpstreamStatus < 300
	t.x.unreported = ok && !freeCall(t.x.op.Spec.Usage, t.x.tgt.path)
}

// Tokens is the reader's count.
func (t *answerTap) Tokens() (Tokens, bool) { return t.read.Tokens() }

// socketUsage reads a model API's WebSocket and, as each turn ends, writes
// its line (connector.proxy.turn, with the connection's audit id, model
// and tokens) and charges its tokens to the session's budgets.
func (p *Proxy) socketUsage(x *exchange) SocketUsage {
	if p.Usage == nil || x.op == nil || x.op.Spec.Usage == "" {
		return nil
	}
	conn := x.rec
	return p.Usage.Socket(x.op.Spec.Usage, func(t Turn) {
		rec := &Record{Event: conn.Event, Start: t.Started}
		rec.Name, rec.Decision, rec.Reason, rec.Status, rec.UpstreamStatus = audit.EventTurn, conn.Decision, conn.Reason, 0, 0
		rec.Fields, rec.BytesIn, rec.BytesOut, rec.UpstreamMS = nil, 0, 0, 0
		rec.API, rec.Streamed, rec.Model = conn.API, true, t.Model
		if rec.Model == "" {
			rec.Model = conn.Model
		}
		if t.Started.IsZero() {
			rec.Start = time.Now()
		}
		if !t.FirstByte.IsZero() && !t.Started.IsZero() {
			rec.TTFBMS = ms(t.FirstByte.Sub(t.Started))
		}
		rec.InputTokens, rec.OutputTokens, rec.CachedTokens = t.Tokens.Input, t.Tokens.Output, t.Tokens.Cached
		rec.Details = map[string]string{"end": t.End}
		rec.Message = "a turn of the WebSocket ended: " + t.End
		p.finish(rec)
		p.spend(x, Spent{Tokens: t.Tokens.Input + t.Tokens.Output}) // charged to the session's budgets as each turn ends
	})
}

// tapWriter hands what is written to dst on to see: after the write, or
// before it when first is set.
type tapWriter struct {
	dst   io.Writer
	see   func([]byte)
	first bool
}

func (w tapWriter) Write(b []byte) (int, error) {
	if w.first {
		w.see(b)
		return w.dst.Write(b)
	}
	n, err := w.dst.Write(b)
	w.see(b[:n])
	return n, err
}
