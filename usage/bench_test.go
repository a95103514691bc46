package usage

import (
	"strings"
	"testing"
)

// BenchmarkAnswerSSEEvent is the observer's cost per stream event: a text
// delta of an Anthropic stream (the common event), read as it passes.
func BenchmarkAnswerSSEEvent(b *testing.B) {
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("word ", 12) + "\"}}\n\n")
	a := (Reader{}).Answer(Anthropic, "text/event-stream")
	a.Observe([]byte(anthropicSSE))
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		a.Observe(ev)
	}
}

// BenchmarkAnswerSSEUsageEvent is the cost of an event that carries usage
// (parsed).
func BenchmarkAnswerSSEUsageEvent(b *testing.B) {
	ev := []byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n")
	a := (Reader{}).Answer(Anthropic, "text/event-stream")
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	for b.Loop() {
		a.Observe(ev)
	}
}

// BenchmarkSocketFrame is the cost per upstream WebSocket event frame.
func BenchmarkSocketFrame(b *testing.B) {
	fr := text(wsDelta)
	s := (Reader{}).Socket(OpenAI, func(Turn) {})
	s.FromClient(clientText(wsCreate))
	b.SetBytes(int64(len(fr)))
	b.ReportAllocs()
	for b.Loop() {
		s.FromUpstream(fr)
	}
}
