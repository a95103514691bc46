package main

import (
	"testing"

	"github.com/aileronhq/aileron/dataplane"
)

// TestUsageReaderWiresTheUsagePackage: the daemon's dataplane.Usage reads
// tokens from an answer and turns from a WebSocket, in the data plane's
// types, and reads nothing for what has no dialect.
func TestUsageReaderWiresTheUsagePackage(t *testing.T) {
	var u dataplane.Usage = usageReader{}
	a := u.Answer("anthropic", "text/event-stream")
	a.Observe([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"cache_read_input_tokens\":2,\"output_tokens\":1}}}\n\n"))
	a.Observe([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}\n\n"))
	if got, ok := a.Tokens(); !ok || got != (dataplane.Tokens{Input: 9, Output: 4, Cached: 2}) {
		t.Fatalf("answer tokens %+v %v", got, ok)
	}
	if u.Answer("", "application/json") != nil || u.Socket("gemini", func(dataplane.Turn) {}) != nil {
		t.Fatal("a reader for no dialect, or a WebSocket of a dialect without turns")
	}
	var turns []dataplane.Turn
	s := u.Socket("openai", func(tu dataplane.Turn) { turns = append(turns, tu) })
	create := `{"type":"response.create","model":"gpt-5"}`
	frame := []byte{0x81, 0x80 | byte(len(create)), 0, 0, 0, 0} // masked with a zero key
	s.FromClient(append(frame, create...))
	done := `{"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":3,"input_tokens_details":{"cached_tokens":1}}}}`
	s.FromUpstream(append([]byte{0x81, 126, byte(len(done) >> 8), byte(len(done))}, done...)) // a 16-bit length
	if len(done) < 126 {
		t.Fatal("the final event must need a 16-bit length")
	}
	s.Close()
	if len(turns) != 1 || turns[0].Model != "gpt-5" || turns[0].Tokens != (dataplane.Tokens{Input: 5, Output: 3, Cached: 1}) ||
		!turns[0].Reported || turns[0].End != "completed" || turns[0].Started.IsZero() || turns[0].FirstByte.IsZero() {
		t.Fatalf("turns %+v", turns)
	}
}
