package usage

import (
	"strings"
	"testing"
)

// Real answer shapes, as the providers document them (text shortened).
const (
	anthropicJSON = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi! \"usage\": {\"input_tokens\": 999}"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":503,"service_tier":"standard"}}`
	anthropicSSE  = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":10,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{"usage":{"input_tokens":7777}}}}` + "\n\n" +
		"event: ping\n" + `data: {"type": "ping"}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
		"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
		"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"
	openaiChatJSON = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`
	openaiChatSSE  = `data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"usage":null}` + "\r\n\r\n" +
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"}}],"usage":null}` + "\r\n\r\n" +
		`data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0}}}` + "\r\n\r\n" +
		"data: [DONE]\r\n\r\n"
	openaiResponsesJSON = `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[{"type":"message","content":[{"type":"output_text","text":"ok"}]}],"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}}`
	openaiResponsesSSE  = "event: response.created\n" + `data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","model":"gpt-5","usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"m","output_index":0,"content_index":0,"delta":"Hi"}` + "\n\n" +
		"event: response.completed\n" + `data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed","model":"gpt-5","output":[],"usage":{"input_tokens":37,"input_tokens_details":{"cached_tokens":5},"output_tokens":11,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":48}}}` + "\n\n"
	openaiEmbeddings = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`
	geminiJSON       = `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":7,"totalTokenCount":60,"cachedContentTokenCount":3,"thoughtsTokenCount":42,"promptTokensDetails":[{"modality":"TEXT","tokenCount":11}]},"modelVersion":"gemini-2.5-flash","responseId":"r"}`
	geminiSSE        = `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n" +
		`data: {"candidates":[{"content":{"parts":[{"text":"lo"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":4,"totalTokenCount":25,"thoughtsTokenCount":12},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n"
	geminiArray = `[{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1}},` +
		`{"candidates":[{"content":{"parts":[{"text":"b"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":3}}]`
)

func TestAnswerReadsTheReportedTokens(t *testing.T) {
	for _, tc := range []struct {
		name, api, ctype, body string
		want                   Tokens
		reported               bool
	}{
		{"anthropic json", Anthropic, "application/json", anthropicJSON, Tokens{2095, 503, 1024}, true},
		{"anthropic sse", Anthropic, "text/event-stream; charset=utf-8", anthropicSSE, Tokens{25, 15, 10}, true},
		{"openai chat json", OpenAI, "application/json", openaiChatJSON, Tokens{19, 10, 4}, true},
		{"openai chat sse (CRLF)", OpenAI, "text/event-stream", openaiChatSSE, Tokens{8, 2, 0}, true},
		{"openai responses json", OpenAI, "application/json", openaiResponsesJSON, Tokens{328, 52, 128}, true},
		{"openai responses sse", OpenAI, "text/event-stream", openaiResponsesSSE, Tokens{37, 11, 5}, true},
		{"openai embeddings", OpenAI, "application/json", openaiEmbeddings, Tokens{8, 0, 0}, true},
		{"gemini json (thoughts are output)", Gemini, "application/json; charset=UTF-8", geminiJSON, Tokens{11, 49, 3}, true},
		{"gemini sse", Gemini, "text/event-stream", geminiSSE, Tokens{9, 16, 0}, true},
		{"gemini json array", Gemini, "application/json", geminiArray, Tokens{5, 3, 0}, true},
		{"no usage", OpenAI, "text/event-stream", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", Tokens{}, false},
		{"not JSON", Anthropic, "text/html", "<html>usage</html>", Tokens{}, false},
		{"usage too large is dropped", Anthropic, "application/json", `{"usage":{"input_tokens":5,"x":"` + strings.Repeat("a", maxCapture) + `"}}`, Tokens{}, false},
		{"error answer", Anthropic, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, Tokens{}, false},
		{"last event without blank line", Anthropic, "text/event-stream", "data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}", Tokens{0, 3, 0}, true},
		{"multi-line data", Anthropic, "text/event-stream", "data: {\"type\":\"message_delta\",\ndata: \"usage\":{\"output_tokens\":4}}\n\n", Tokens{0, 4, 0}, true},
		{"absurd counts saturate", Anthropic, "application/json", `{"usage":{"input_tokens":9223372036854775807,"output_tokens":5}}`, Tokens{maxCount, 5, 0}, true},
		{"gemini output sum saturates", Gemini, "application/json", `{"usageMetadata":{"candidatesTokenCount":9223372036854775807,"thoughtsTokenCount":9223372036854775807}}`, Tokens{0, maxCount, 0}, true},
		{"comments and other fields", OpenAI, "text/event-stream", ": keep-alive\nid: 1\nretry: 10\ndata:{\"usage\":{\"prompt_tokens\":2}}\n\n", Tokens{2, 0, 0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// whole, and one byte at a time: the split must not matter
			for _, step := range []int{len(tc.body), 1, 7} {
				a := (Reader{}).Answer(tc.api, tc.ctype)
				for i := 0; i < len(tc.body); i += step {
					a.Observe([]byte(tc.body[i:min(i+step, len(tc.body))]))
				}
				got, reported := a.Tokens()
				if got != tc.want || reported != tc.reported {
					t.Fatalf("step %d: tokens %+v reported %v, want %+v %v", step, got, reported, tc.want, tc.reported)
				}
			}
		})
	}
}

func TestAnswerOfNoDialectIsNil(t *testing.T) {
	if (Reader{}).Answer("", "application/json") != nil || (Reader{}).Answer("claude", "text/event-stream") != nil {
		t.Fatal("an answer of no known dialect has an observer")
	}
}

// TestAnswerMemoryIsFixed: a long stream grows nothing the observer holds.
func TestAnswerMemoryIsFixed(t *testing.T) {
	a := (Reader{}).Answer(Anthropic, "text/event-stream")
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("x", 4096) + "\"}}\n\n")
	a.Observe([]byte(anthropicSSE))
	before := cap(a.sc.capBuf)
	for range 2000 {
		a.Observe(ev)
	}
	if cap(a.sc.capBuf) != before || cap(a.sc.keyBuf) > maxKey {
		t.Fatalf("buffers grew: capture %d → %d, key %d", before, cap(a.sc.capBuf), cap(a.sc.keyBuf))
	}
	if got, _ := a.Tokens(); got != (Tokens{25, 15, 10}) {
		t.Fatalf("tokens %+v", got)
	}
}
