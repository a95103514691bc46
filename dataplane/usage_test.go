package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/usage"
)

// usageReader is the usage package's reader in this package's types, as
// cmd/aileron wires it.
type usageReader struct{}

func (usageReader) Answer(api, ct string) AnswerUsage {
	if a := (usage.Reader{}).Answer(api, ct); a != nil {
		return usageAnswer{a}
	}
	return nil
}

func (usageReader) Socket(api string, turn func(Turn)) SocketUsage {
	if s := (usage.Reader{}).Socket(api, func(t usage.Turn) {
		turn(Turn{Model: t.Model, Tokens: Tokens(t.Tokens), Reported: t.Reported, End: t.End, Started: t.Started, FirstByte: t.FirstByte})
	}); s != nil {
		return s
	}
	return nil
}

type usageAnswer struct{ a *usage.Answer }

func (u usageAnswer) Observe(p []byte) { u.a.Observe(p) }
func (u usageAnswer) Tokens() (Tokens, bool) {
	t, ok := u.a.Tokens()
	return Tokens(t), ok
}

// sseEvents are an Anthropic stream's events; the last two carry usage.
var sseEvents = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":10,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// lockstepSSE sends sseEvents one write and flush each, and sends event
// N+1 only once the client said it has event N (on seen): a proxy that
// held any event back would stall the stream, and the upstream says so on
// stalled.
func lockstepSSE(seen <-chan int, stalled chan<- int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, ev := range sseEvents {
			_, _ = io.WriteString(w, ev)
			_ = http.NewResponseController(w).Flush()
			select {
			case n := <-seen:
				if n != i {
					stalled <- i
					return
				}
			case <-time.After(10 * time.Second):
				stalled <- i
				return
			case <-r.Context().Done():
				return
			}
		}
	}
}

// TestStreamedAnswerIsRelayedEventByEventAndRecorded: through the proxy
// (HTTP/1.1 and HTTP/2 to the client, a credential injected so the echo
// redactor is on the path), every SSE event reaches the client before the
// upstream sends the next; the outcome line has the model, streamed, the
// tokens of the usage events and the time to first byte.
func TestStreamedAnswerIsRelayedEventByEventAndRecorded(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			seen, stalled := make(chan int), make(chan int, 1)
			rec := &listRecorder{}
			e := newModelEnv(t, lockstepSSE(seen, stalled), func(p *Proxy) {
				p.Recorder, p.Usage, p.Injector = rec, usageReader{}, &fixedInjector{token: "sk-ant-sekrit-123456"}
			})
			c := e.client(t, url.UserPassword("s1", e.token))
			c.Transport.(*http.Transport).ForceAttemptHTTP2 = h2
			resp, err := c.Post("https://api.example.com/v1/messages", "application/json", strings.NewReader(`{"model":"claude-sonnet-4-5","stream":true,"max_tokens":20}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if h2 != (resp.ProtoMajor == 2) {
				t.Fatalf("client spoke %s", resp.Proto)
			}
			br := bufio.NewReader(resp.Body)
			for i := range sseEvents {
				var got strings.Builder
				for !strings.HasSuffix(got.String(), "\n\n") {
					line, err := br.ReadString('\n')
					if err != nil {
						select {
						case n := <-stalled:
							t.Fatalf("the stream stalled: event %d did not reach the client before the next was due", n)
						default:
						}
						t.Fatalf("event %d: %v (so far %q)", i, err, got.String())
					}
					got.WriteString(line)
				}
				if got.String() != sseEvents[i] {
					t.Fatalf("event %d = %q, want %q", i, got.String(), sseEvents[i])
				}
				select {
				case seen <- i:
				case n := <-stalled:
					t.Fatalf("the stream stalled: event %d did not reach the client before the next was due", n)
				}
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("after the last event: %v", err)
			}
			got := waitCompleted(t, rec, 1)[0]
			if got.Name != audit.EventProxied || got.Model != "claude-sonnet-4-5" || !got.Streamed || got.API != "anthropic" ||
				got.InputTokens != 25 || got.OutputTokens != 15 || got.CachedTokens != 10 || got.TTFBMS <= 0 {
				t.Fatalf("outcome record: %+v", got.Event)
			}
		})
	}
}

// jsonAnswer answers with body as JSON, with or without Content-Length.
func jsonAnswer(body string, length bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if length {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		_, _ = io.WriteString(w, body)
	}
}

// TestJSONAnswerTokensAreRecorded: a JSON answer's usage is on the outcome
// record for each dialect, masked whole (with a length) or streamed; no
// Usage reader records the model but no tokens.
func TestJSONAnswerTokensAreRecorded(t *testing.T) {
	for _, tc := range []struct {
		name, path, req, answer string
		length, reader          bool
		model                   string
		want                    Tokens
	}{
		{"anthropic", "/v1/messages", `{"model":"claude-haiku-4-5"}`, `{"type":"message","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":12,"cache_read_input_tokens":3,"output_tokens":4}}`, true, true, "claude-haiku-4-5", Tokens{12, 4, 3}},
		{"openai chat, no length", "/v1/chat/completions", `{"model":"gpt-4o","messages":[]}`, `{"object":"chat.completion","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"prompt_tokens_details":{"cached_tokens":4}}}`, false, true, "gpt-4o", Tokens{19, 10, 4}},
		{"gemini", "/v1beta/models/gemini-2.5-pro:generateContent", `{"contents":[]}`, `{"candidates":[],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":7,"thoughtsTokenCount":5,"cachedContentTokenCount":2}}`, true, true, "gemini-2.5-pro", Tokens{11, 12, 2}},
		{"no reader", "/v1/messages", `{"model":"claude-haiku-4-5"}`, `{"usage":{"input_tokens":12,"output_tokens":4}}`, true, false, "claude-haiku-4-5", Tokens{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &listRecorder{}
			e := newModelEnv(t, jsonAnswer(tc.answer, tc.length), func(p *Proxy) {
				p.Recorder, p.Injector = rec, &fixedInjector{token: "sk-sekrit-123456"}
				if tc.reader {
					p.Usage = usageReader{}
				}
			})
			resp, err := e.client(t, url.UserPassword("s1", e.token)).Post("https://api.example.com"+tc.path, "application/json", strings.NewReader(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != tc.answer {
				t.Fatalf("answer %q", body)
			}
			got := waitCompleted(t, rec, 1)[0]
			if got.Model != tc.model || got.Streamed || (Tokens{got.InputTokens, got.OutputTokens, got.CachedTokens}) != tc.want || got.TTFBMS <= 0 {
				t.Fatalf("outcome record: %+v", got.Event)
			}
		})
	}
}

// TestPlainCallHasNoUsageFields: a request of an operation without usage
// gets no model, tokens or ttfb.
func TestPlainCallHasNoUsageFields(t *testing.T) {
	rec := &listRecorder{}
	e := newModelEnv(t, jsonAnswer(`{"usage":{"input_tokens":1}}`, true), func(p *Proxy) { p.Recorder, p.Usage = rec, usageReader{} })
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Post("https://api.example.com/v1/plain", "application/json", strings.NewReader(`{"model":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	got := waitCompleted(t, rec, 1)[0]
	if got.Model != "" || got.InputTokens != 0 || got.TTFBMS != 0 || got.API != "" {
		t.Fatalf("outcome record: %+v", got.Event)
	}
}

// splitEchoSSE echoes the Authorization it received in the text of a
// stream, cut in two: the first half ends one event and the second starts
// the next, in two TCP writes; the upstream sends the second only once the
// client has seen the event before the first half.
func splitEchoSSE(seen <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "text/event-stream")
		half := len(auth) / 2
		ev := func(text string) string {
			return `event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}` + "\n\n"
		}
		_, _ = io.WriteString(w, ev("first")+ev("echo "+auth[:half]))
		_ = http.NewResponseController(w).Flush()
		select {
		case <-seen:
		case <-time.After(10 * time.Second):
			return
		}
		_, _ = io.WriteString(w, ev(auth[half:]+" done"))
	}
}

// TestEchoSplitAcrossEventsIsMasked: an echo of the injected key spread
// over two events and two TCP writes is masked, and the event before it
// is not held back.
func TestEchoSplitAcrossEventsIsMasked(t *testing.T) {
	const secret = "sk-ant-sekrit-0123456789"
	seen := make(chan struct{})
	e := newModelEnv(t, splitEchoSSE(seen), func(p *Proxy) {
		p.Usage, p.Injector = usageReader{}, &fixedInjector{token: secret}
	})
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Post("https://api.example.com/v1/messages", "application/json", strings.NewReader(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var first strings.Builder
	for !strings.HasSuffix(first.String(), "\n\n") {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the first event: %v", err)
		}
		first.WriteString(line)
	}
	if !strings.Contains(first.String(), `"text":"first"`) {
		t.Fatalf("first event %q", first.String())
	}
	close(seen)
	rest, _ := io.ReadAll(br)
	// "Bearer "+secret split in two events: each half becomes its part of the mask
	mask, half := inject.Mask(len("Bearer "+secret)), len("Bearer "+secret)/2
	if strings.Contains(string(rest), "sekrit") || !strings.Contains(string(rest), `"text":"echo `+mask[:half]+`"`) || !strings.Contains(string(rest), `"text":"`+mask[half:]+` done"`) {
		t.Fatalf("rest of the stream %q", rest)
	}
}

// wsFrame builds a WebSocket frame; a non-nil mask masks it (a client's).
func wsFrame(op byte, payload string, mask []byte) []byte {
	b := []byte{0x80 | op}
	n := len(payload)
	var mbit byte
	if mask != nil {
		mbit = 0x80
	}
	switch {
	case n < 126:
		b = append(b, mbit|byte(n))
	default:
		b = append(b, mbit|126, byte(n>>8), byte(n))
	}
	if mask == nil {
		return append(b, payload...)
	}
	b = append(b, mask...)
	for i := 0; i < n; i++ {
		b = append(b, payload[i]^mask[i%4])
	}
	return b
}

const (
	wsCreateMsg    = `{"type":"response.create","model":"gpt-5-codex","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`
	wsCompletedMsg = `{"type":"response.completed","response":{"id":"r","status":"completed","model":"gpt-5-codex","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},"output_tokens":20,"total_tokens":320}}}`
)

// wsUpstream completes a WebSocket opening (saying what extensions it
// was asked for in a header), then answers each client frame it reads
// with a delta and a response.completed.
func wsUpstream(t *testing.T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Asked-Extensions: %s\r\n\r\n", r.Header.Get("Sec-WebSocket-Extensions"))
		_ = brw.Flush()
		for {
			var head [2]byte
			if _, err := io.ReadFull(brw, head[:]); err != nil {
				return
			}
			n := int(head[1] & 0x7f)
			if n == 126 {
				var ext [2]byte
				if _, err := io.ReadFull(brw, ext[:]); err != nil {
					return
				}
				n = int(ext[0])<<8 | int(ext[1])
			}
			if _, err := io.CopyN(io.Discard, brw, int64(n+4)); err != nil { // mask and payload
				return
			}
			_, _ = c.Write(wsFrame(1, `{"type":"response.output_text.delta","delta":"Hello"}`, nil))
			_, _ = c.Write(wsFrame(1, wsCompletedMsg, nil))
		}
	}
}

// TestWebSocketTurnsAreRecorded: each turn of a Responses WebSocket gets
// its own line (connector.proxy.turn, the connection's audit id) with the
// model, tokens and time to first byte, and its tokens are charged to the
// session's budgets; the frames reach each side unchanged; the opening is
// sent without Sec-WebSocket-Extensions.
func TestWebSocketTurnsAreRecorded(t *testing.T) {
	rec, led := &listRecorder{}, &ledger{}
	e := newModelEnv(t, wsUpstream(t), func(p *Proxy) {
		p.Recorder, p.Usage, p.Budgets = rec, usageReader{}, led
		p.Sessions.(staticSessions)["s1"].sess.Limits = &policy.Limits{MaxBytes: 1 << 30} // counted, with room
	})
	tc := tunnelTLS(t, e, "api.example.com")
	defer tc.Close()
	br := bufio.NewReader(tc)
	_, _ = io.WriteString(tc, "GET /v1/responses HTTP/1.1\r\nHost: api.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("opening: %v %v", resp, err)
	}
	if got := resp.Header.Get("X-Asked-Extensions"); got != "" {
		t.Fatalf("the upstream was asked for extensions %q", got)
	}
	key := []byte{1, 2, 3, 4}
	for turn := range 2 {
		_, _ = tc.Write(wsFrame(1, wsCreateMsg, key))
		for _, want := range []string{`{"type":"response.output_text.delta","delta":"Hello"}`, wsCompletedMsg} {
			exp := wsFrame(1, want, nil)
			got := make([]byte, len(exp))
			if _, err := io.ReadFull(br, got); err != nil || string(got) != string(exp) {
				t.Fatalf("turn %d: frame %q (%v), want %q", turn, got, err, exp)
			}
		}
	}
	turns := waitCompleted(t, rec, 2)
	for i, got := range turns[:2] {
		if got.Name != audit.EventTurn || got.Model != "gpt-5-codex" || !got.Streamed || got.InputTokens != 300 || got.OutputTokens != 20 ||
			got.CachedTokens != 256 || got.TTFBMS <= 0 || got.Details["end"] != "completed" || got.Operation != "responses.ws" {
			t.Fatalf("turn %d: %+v", i, got.Event)
		}
	}
	rec.mu.Lock()
	conn := rec.decided[0].AuditID
	rec.mu.Unlock()
	if turns[0].AuditID != conn || turns[1].AuditID != conn {
		t.Fatalf("turn audit ids %s %s, connection's %s", turns[0].AuditID, turns[1].AuditID, conn)
	}
	_ = tc.Close()
	all := waitCompleted(t, rec, 3)
	if all[2].Name != audit.EventProxied || all[2].InputTokens != 0 {
		t.Fatalf("the connection's outcome: %+v", all[2].Event)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	if led.charged.Tokens != 2*320 {
		t.Fatalf("the session was charged %d tokens for two turns of 300 in and 20 out", led.charged.Tokens)
	}
}
