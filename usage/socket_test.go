package usage

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// frame builds one WebSocket frame; a non-nil mask masks it (a client's).
func frame(fin bool, rsv1 bool, op byte, payload []byte, mask []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	if rsv1 {
		b0 |= 0x40
	}
	var head []byte
	var mbit byte
	if mask != nil {
		mbit = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		head = []byte{b0, mbit | byte(n)}
	case n < 1<<16:
		head = []byte{b0, mbit | 126, byte(n >> 8), byte(n)}
	default:
		head = append([]byte{b0, mbit | 127}, binary.BigEndian.AppendUint64(nil, uint64(n))...)
	}
	if mask == nil {
		return append(head, payload...)
	}
	out := append(append(head, mask...), payload...)
	for i := range payload {
		out[len(out)-len(payload)+i] ^= mask[i%4]
	}
	return out
}

var key = []byte{0x37, 0xfa, 0x21, 0x3d}

func text(s string) []byte       { return frame(true, false, opText, []byte(s), nil) }
func clientText(s string) []byte { return frame(true, false, opText, []byte(s), key) }

const (
	wsCreate    = `{"type":"response.create","model":"gpt-5-codex","store":false,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi \"model\":\"no\""}]}],"tools":[]}`
	wsCreated   = `{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","model":"gpt-5-codex","usage":null}}`
	wsDelta     = `{"type":"response.output_text.delta","sequence_number":3,"delta":"Hello"}`
	wsCompleted = `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","model":"gpt-5-codex-2026","usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":34,"output_tokens_details":{"reasoning_tokens":8},"total_tokens":1234}}}`
	wsFailed    = `{"type":"response.failed","sequence_number":2,"response":{"id":"resp_2","status":"failed","error":{"code":"server_error","message":"x"},"usage":null}}`
)

// cat joins byte slices.
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestSocketReportsEachTurn(t *testing.T) {
	fragmented := cat(
		frame(false, false, opText, []byte(wsCompleted[:40]), nil),
		frame(true, false, 0x9, []byte("ping"), nil), // a control frame between fragments
		frame(false, false, opContinuation, []byte(wsCompleted[40:100]), nil),
		frame(true, false, opContinuation, []byte(wsCompleted[100:]), nil))
	clientFragmented := cat(
		frame(false, false, opText, []byte(wsCreate[:10]), key),
		frame(true, false, 0xA, []byte("pong"), key),
		frame(true, false, opContinuation, []byte(wsCreate[10:]), key))
	for _, tc := range []struct {
		name             string
		client, upstream []byte
		want             []Turn
	}{
		{"one turn", clientText(wsCreate), cat(text(wsCreated), text(wsDelta), text(wsCompleted)),
			[]Turn{{Model: "gpt-5-codex", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}}},
		{"fragmented, with control frames", clientFragmented, cat(text(wsCreated), fragmented),
			[]Turn{{Model: "gpt-5-codex", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}}},
		{"two turns, one failed", cat(clientText(wsCreate), clientText(strings.Replace(wsCreate, "gpt-5-codex", "gpt-5", 1))),
			cat(text(wsCompleted), text(wsFailed)),
			[]Turn{{Model: "gpt-5-codex", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}, {Model: "gpt-5", End: EndFailed}}},
		{"an escaped model name", clientText(`{"type":"response.create","model":"gpt\u002d5"}`), text(wsFailed),
			[]Turn{{Model: "gpt-5", End: EndFailed}}},
		{"closed before the end", clientText(wsCreate), text(wsCreated), []Turn{{Model: "gpt-5-codex", End: EndClosed}}},
		{"unread create: the model of the answer", frame(true, true, opText, []byte("compressed"), key), text(wsCompleted),
			[]Turn{{Model: "gpt-5-codex-2026", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}}},
		{"binary and other messages are no turn", cat(frame(true, false, opBinary, []byte(wsCreate), key), clientText(`{"type":"response.cancel"}`)),
			text(`{"type":"error","error":{"message":"bad"}}`), []Turn{{End: EndError}}},
		{"a long frame (64-bit length)", clientText(wsCreate), cat(text(`{"type":"x","pad":"`+strings.Repeat("p", 70000)+`"}`), text(wsCompleted)),
			[]Turn{{Model: "gpt-5-codex", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}}},
		{"a broken sequence stops reading", cat(frame(true, false, opContinuation, []byte("x"), key), clientText(wsCreate)), text(wsCompleted),
			[]Turn{{Model: "gpt-5-codex-2026", Tokens: Tokens{1200, 34, 1024}, Reported: true, End: EndCompleted}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []int{1 << 20, 1, 5} {
				var got []Turn
				s := (Reader{}).Socket(OpenAI, func(tu Turn) { got = append(got, tu) })
				feed := func(f func([]byte), b []byte) {
					for i := 0; i < len(b); i += step {
						f(b[i:min(i+step, len(b))])
					}
				}
				feed(s.FromClient, tc.client)
				feed(s.FromUpstream, tc.upstream)
				s.Close()
				if len(got) != len(tc.want) {
					t.Fatalf("step %d: %d turns %+v, want %d", step, len(got), got, len(tc.want))
				}
				for i, w := range tc.want {
					g := got[i]
					if g.Model != w.Model || g.Tokens != w.Tokens || g.Reported != w.Reported || g.End != w.End {
						t.Errorf("step %d: turn %d = %+v, want %+v", step, i, g, w)
					}
					if w.Model != "" && w.Model == "gpt-5-codex" && (g.Started.IsZero() || w.End == EndCompleted && g.FirstByte.Before(g.Started)) {
						t.Errorf("step %d: turn %d times: started %v, first byte %v", step, i, g.Started, g.FirstByte)
					}
				}
			}
		})
	}
}

func TestSocketOpenTurnsAreBounded(t *testing.T) {
	var got []Turn
	s := (Reader{}).Socket(OpenAI, func(tu Turn) { got = append(got, tu) })
	for range maxOpenTurns + 3 {
		s.FromClient(clientText(wsCreate))
	}
	if len(s.open) != maxOpenTurns || len(got) != 3 || got[0].End != EndDropped {
		t.Fatalf("open %d, reported %+v", len(s.open), got)
	}
	s.Close()
	if len(got) != maxOpenTurns+3 {
		t.Fatalf("reported %d", len(got))
	}
}

func TestSocketOnlyForOpenAI(t *testing.T) {
	if (Reader{}).Socket(Anthropic, func(Turn) {}) != nil {
		t.Fatal("a dialect without WebSocket turns got a socket reader")
	}
}
