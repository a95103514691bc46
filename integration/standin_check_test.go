package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The stand-in's own tests: a Go client speaks to it directly (no daemon),
// verifying it with the test root and dialling it for every provider host.

// standinClient returns an HTTP client that reaches every host at s.
func standinClient(t *testing.T, s *standin) *http.Client {
	t.Helper()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	}
	tr := &http.Transport{
		DialContext:     dial,
		TLSClientConfig: &tls.Config{RootCAs: certPoolFrom(t, filepath.Join(theSuite.pkiDir, "root.pem"))},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// standinPost sends body to url with header name set to key, and returns
// the status and the body read whole.
func standinPost(t *testing.T, c *http.Client, url, header, key, body string) (int, string) {
	t.Helper()
	method := http.MethodPost
	if body == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(header, key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(raw)
}

// assertHolds fails t unless body holds each of want; the stream markers
// among them ("event: …", "data: [DONE]") must also come in order.
func assertHolds(t *testing.T, body string, want []string) {
	t.Helper()
	rest := body
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Fatalf("answer lacks %q:\n%s", w, body)
		}
		if strings.HasPrefix(w, "event: ") || strings.HasPrefix(w, "data: [DONE]") {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Fatalf("answer has %q out of order (want %q):\n%s", w, want, body)
			}
			rest = rest[i+len(w):]
		}
	}
}

// TestStandinAnswers checks each endpoint's status, fields of its shape,
// the order of a stream's events and the usage the test chose, and that the
// record names the model, the streaming and where the key was.
func TestStandinAnswers(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	s.SetUsage(modelUsage{Input: 101, Output: 7, Cached: 3})
	c := standinClient(t, s)
	const anth, oai, gem = "https://api.anthropic.com", "https://api.openai.com", "https://generativelanguage.googleapis.com"
	for _, tc := range []struct {
		name, url, header, body string
		want                    []string // substrings of the answer, in order
		model, keyAt            string
		stream                  bool
	}{
		{"anthropic json", anth + "/v1/messages", "x-api-key", `{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			[]string{`"type":"message"`, `"text":"Hello from the stand-in provider."`, `"input_tokens":101`, `"output_tokens":7`, `"cache_read_input_tokens":3`}, "claude-x", "x-api-key", false},
		{"anthropic sse", anth + "/v1/messages", "authorization", `{"model":"claude-x","stream":true,"messages":[]}`,
			[]string{"event: message_start", `"input_tokens":101`, "event: content_block_start", "event: content_block_delta", `"text":"Hello `, "event: content_block_stop", "event: message_delta", `"output_tokens":7`, "event: message_stop"}, "claude-x", "authorization", true},
		{"anthropic count", anth + "/v1/messages/count_tokens", "x-api-key", `{"model":"claude-x","messages":[]}`, []string{`{"input_tokens":101}`}, "claude-x", "x-api-key", false},
		{"anthropic models", anth + "/v1/models", "x-api-key", "", []string{`"type":"model"`, `"has_more":false`}, "", "x-api-key", false},
		{"responses json", oai + "/v1/responses", "authorization", `{"model":"gpt-x","input":"hi"}`,
			[]string{`"object":"response"`, `"type":"output_text"`, `"cached_tokens":3`, `"input_tokens":101`, `"output_tokens":7`, `"status":"completed"`}, "gpt-x", "authorization", false},
		{"responses sse", oai + "/v1/responses", "authorization", `{"model":"gpt-x","input":"hi","stream":true}`,
			[]string{"event: response.created", "event: response.output_item.added", "event: response.output_text.delta", "event: response.output_text.done", "event: response.completed", `"total_tokens":108`}, "gpt-x", "authorization", true},
		{"chat sse usage", oai + "/v1/chat/completions", "authorization", `{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[]}`,
			[]string{`"object":"chat.completion.chunk"`, `"role":"assistant"`, `"finish_reason":"stop"`, `"choices":[]`, `"prompt_tokens":101`, "data: [DONE]"}, "gpt-x", "authorization", true},
		{"chat json", oai + "/v1/chat/completions", "authorization", `{"model":"gpt-x","messages":[]}`, []string{`"object":"chat.completion"`, `"completion_tokens":7`}, "gpt-x", "authorization", false},
		{"embeddings", oai + "/v1/embeddings", "authorization", `{"model":"emb-x","input":["a","b"],"encoding_format":"base64"}`, []string{`"index":0`, `"index":1`, `"prompt_tokens":101`}, "emb-x", "authorization", false},
		{"openai models", oai + "/v1/models", "authorization", "", []string{`"object":"list"`, `"owned_by"`}, "", "authorization", false},
		{"gemini json", gem + "/v1beta/models/gemini-x:generateContent", "x-goog-api-key", `{"contents":[{"parts":[{"text":"hi"}]}]}`,
			[]string{`"candidates"`, `"finishReason":"STOP"`, `"promptTokenCount":101`, `"candidatesTokenCount":7`, `"cachedContentTokenCount":3`}, "gemini-x", "x-goog-api-key", false},
		{"gemini sse", gem + "/v1beta/models/gemini-x:streamGenerateContent?alt=sse&key=KEY", "", `{"contents":[]}`,
			[]string{"data: {", "\r\n\r\ndata: {", `"finishReason":"STOP"`, `"totalTokenCount":108`}, "gemini-x", "query:key", true},
		{"gemini count", gem + "/v1beta/models/gemini-x:countTokens", "x-goog-api-key", `{"contents":[]}`, []string{`"totalTokens":101`}, "gemini-x", "x-goog-api-key", false},
		{"gemini models", gem + "/v1beta/models", "x-goog-api-key", "", []string{`"name":"models/`}, "", "x-goog-api-key", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "sk-real-" + strings.ReplaceAll(tc.name, " ", "-")
			val := key
			if tc.header == "authorization" {
				val = "Bearer " + key
			}
			n := len(s.Requests())
			status, body := standinPost(t, c, strings.Replace(tc.url, "KEY", key, 1), tc.header, val, tc.body)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			assertHolds(t, body, tc.want)
			reqs := s.Requests()
			if len(reqs) != n+1 {
				t.Fatalf("recorded %d requests, want %d", len(reqs), n+1)
			}
			r := reqs[n]
			if r.Model != tc.model || r.Streamed != tc.stream || r.Keys[tc.keyAt] != key || len(r.Keys) != 1 {
				t.Errorf("recorded model %q streamed %v keys %v, want %q %v {%s: %s}", r.Model, r.Streamed, r.Keys, tc.model, tc.stream, tc.keyAt, key)
			}
		})
	}
}

// TestStandinScript plays a tool call then a text after its result, in
// each provider's shape; a request that matches no queued turn gets the
// plain answer and leaves the script alone.
func TestStandinScript(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	c := standinClient(t, s)
	for _, tc := range []struct {
		name, url, offer, result string
		wantCall                 []string
	}{
		{"anthropic", "https://api.anthropic.com/v1/messages",
			`{"model":"m","stream":true,"tools":[{"name":"mcp__aileron__send","input_schema":{}}],"messages":[{"role":"user","content":"go"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"go"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"pending ap-1"}]}]}]}`,
			[]string{`"type":"tool_use"`, `"name":"mcp__aileron__send"`, `"partial_json":"{\"to\"`, `"stop_reason":"tool_use"`}},
		{"responses", "https://api.openai.com/v1/responses",
			`{"model":"m","tools":[{"type":"function","name":"mcp__aileron__send"}],"input":"go"}`,
			`{"model":"m","input":[{"type":"message","role":"user","content":"go"},{"type":"function_call_output","call_id":"c","output":"pending ap-1"}]}`,
			[]string{`"type":"function_call"`, `"arguments":"{\"to\":\"x\"}"`, `"name":"mcp__aileron__send"`}},
		{"codex code mode", "https://api.openai.com/v1/responses",
			`{"model":"m","stream":true,"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"functions","tools":[{"type":"custom","name":"exec","description":"… ALL_TOOLS …"}]}]},{"type":"message","role":"user","content":"go"}]}`,
			`{"model":"m","input":[{"type":"message","role":"user","content":"go"},{"type":"custom_tool_call_output","call_id":"c","output":"pending ap-1"}]}`,
			[]string{"event: response.output_item.added", `"type":"custom_tool_call"`, `"name":"exec"`, "event: response.custom_tool_call_input.delta", `const want = \"send\"`, `await tools[name]({\"to\":\"x\"})`, "event: response.completed"}},
		{"chat", "https://llm.example.com/v1/chat/completions",
			`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"send"}}],"messages":[]}`,
			`{"model":"m","messages":[{"role":"user","content":"go"},{"role":"tool","tool_call_id":"c","content":"pending ap-1"}]}`,
			[]string{`"tool_calls":[{`, `"name":"send"`, `"finish_reason":"tool_calls"`}},
		{"gemini", "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent",
			`{"tools":[{"functionDeclarations":[{"name":"mcp_aileron_send"}]}],"contents":[]}`,
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"user","parts":[{"functionResponse":{"name":"send","response":{"r":"pending ap-1"}}}]}]}`,
			[]string{`"functionCall":{`, `"args":{"to":"x"}`, `"name":"mcp_aileron_send"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Queue(turn{Tool: "send", Input: map[string]any{"to": "x"}}, turn{Text: "Done: pending.", When: afterToolResult})
			if _, body := standinPost(t, c, tc.url, "x-api-key", "k", `{"model":"m","messages":[],"contents":[],"input":"side"}`); !strings.Contains(body, standinText) || s.Pending() != 2 {
				t.Fatalf("a request offering no tool got %s, pending %d; want the plain answer and 2 pending", body, s.Pending())
			}
			_, body := standinPost(t, c, tc.url, "x-api-key", "k", tc.offer)
			assertHolds(t, body, tc.wantCall)
			_, body = standinPost(t, c, tc.url, "x-api-key", "k", tc.result)
			if !strings.Contains(body, "Done: pending.") || s.Pending() != 0 {
				t.Fatalf("after the tool result got %s, pending %d", body, s.Pending())
			}
			last := s.Requests()[len(s.Requests())-1]
			if !last.AfterTool || len(last.ToolResults) != 1 || !strings.Contains(last.ToolResults[0], "pending ap-1") {
				t.Errorf("recorded tool results %q (after tool %v), want one holding pending ap-1", last.ToolResults, last.AfterTool)
			}
		})
	}
}

// TestStandinResponsesWebSocket sends a prewarm ("generate": false) and two
// response.create messages on one Responses WebSocket and reads each
// turn's events to response.completed.
func TestStandinResponsesWebSocket(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	s.SetUsage(modelUsage{Input: 40, Output: 2})
	s.Queue(turn{Text: "first turn"})
	d := websocket.Dialer{
		NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: certPoolFrom(t, filepath.Join(theSuite.pkiDir, "root.pem"))},
	}
	conn, resp, err := d.Dial("wss://api.openai.com/v1/responses", http.Header{"Authorization": {"Bearer sk-ws"}})
	if err != nil {
		t.Fatalf("dial the Responses WebSocket: %v", err)
	}
	resp.Body.Close()
	defer conn.Close()
	for i, step := range []struct {
		generate        bool
		want            string
		output, pending int
	}{
		{false, "", 0, 1}, // Codex's prewarm: no output, the queued turn kept
		{true, "first turn", 2, 0},
		{true, standinText, 2, 0},
	} {
		msg := map[string]any{"type": "response.create", "model": "gpt-ws", "input": "hi"}
		if !step.generate {
			msg["generate"] = false
		}
		if err := conn.WriteJSON(msg); err != nil {
			t.Fatal(err)
		}
		var types []string
		var text string
		for !slices.Contains(types, "response.completed") {
			var ev struct {
				Type     string
				Delta    string
				Response struct {
					Output []any
					Usage  struct {
						InputTokens  int `json:"input_tokens"`
						OutputTokens int `json:"output_tokens"`
					}
				}
			}
			if err := conn.ReadJSON(&ev); err != nil {
				t.Fatalf("turn %d: read event after %v: %v", i, types, err)
			}
			types, text = append(types, ev.Type), text+ev.Delta
			if u := ev.Response.Usage; ev.Type == "response.completed" && (u.InputTokens != 40 || u.OutputTokens != step.output || (len(ev.Response.Output) == 0) != (step.want == "")) {
				t.Errorf("turn %d: response.completed has usage %+v and %d output items, want 40 in, %d out", i, u, len(ev.Response.Output), step.output)
			}
		}
		if types[0] != "response.created" || text != step.want || s.Pending() != step.pending {
			t.Errorf("turn %d: events %v carried text %q with %d turns pending, want response.created first, %q, %d pending", i, types, text, s.Pending(), step.want, step.pending)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Method != http.MethodGet || !reqs[1].Prewarm || reqs[2].Method != "WS" || reqs[2].Prewarm || reqs[3].Model != "gpt-ws" || !reqs[3].WebSocket || reqs[3].Keys["authorization"] != "sk-ws" {
		t.Errorf("recorded %s, want the upgrade, a prewarm, then two WS turns of gpt-ws with the Bearer key", summary(reqs))
	}
	// Close ends the open WebSocket too (http.Server.Close leaves hijacked
	// connections alone).
	s.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // hang guard only
	if _, _, err := conn.ReadMessage(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after Close the WebSocket read %v, want it closed", err)
	}
}

// TestStandinRefusesOtherKeys: with AcceptKeys set, a request with another
// key gets each provider's 401 (Gemini: 400) error shape, and is recorded.
func TestStandinRefusesOtherKeys(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	s.AcceptKeys("sk-good")
	c := standinClient(t, s)
	for _, tc := range []struct{ url, header, want string }{
		{"https://api.anthropic.com/v1/messages", "x-api-key", `"type":"authentication_error"`},
		{"https://api.openai.com/v1/responses", "x-api-key", `"code":"invalid_api_key"`},
		{"https://generativelanguage.googleapis.com/v1beta/models/g:generateContent", "x-goog-api-key", `"status":"INVALID_ARGUMENT"`},
	} {
		if status, body := standinPost(t, c, tc.url, tc.header, "sk-placeholder", `{}`); status/100 != 4 || !strings.Contains(body, tc.want) {
			t.Errorf("%s with a wrong key: %d %s, want a 4xx with %s", tc.url, status, body, tc.want)
		}
		if status, _ := standinPost(t, c, tc.url, tc.header, "sk-good", `{}`); status != http.StatusOK {
			t.Errorf("%s with the accepted key: %d", tc.url, status)
		}
	}
	if got := len(s.Carrying("sk-placeholder")); got != 3 {
		t.Errorf("Carrying(placeholder) found %d requests, want 3", got)
	}
}

// TestStandinStructuredOutput: a request that asks for JSON following a
// schema gets an instance of it as its plain answer, in each provider's
// place for the schema (Gemini CLI's router, for one, asks so and retries
// anything else).
func TestStandinStructuredOutput(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	c := standinClient(t, s)
	const schema = `{"type":"OBJECT","properties":{"reason":{"type":"STRING"},"score":{"type":"INTEGER","minimum":5},` +
		`"pick":{"type":"string","enum":["flash","pro"]},"extra":{"type":"boolean"}},"required":["reason","score","pick"]}`
	const want = `{"pick":"flash","reason":"stand-in","score":5}`
	for _, tc := range []struct{ name, url, body string }{
		{"anthropic", "https://api.anthropic.com/v1/messages", `{"model":"m","messages":[],"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}}`},
		{"responses", "https://api.openai.com/v1/responses", `{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":` + schema + `}}}`},
		{"chat", "https://api.openai.com/v1/chat/completions", `{"model":"m","messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":` + schema + `}}}`},
		{"gemini", "https://generativelanguage.googleapis.com/v1beta/models/g:generateContent", `{"contents":[],"generationConfig":{"responseMimeType":"application/json","responseJsonSchema":` + schema + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := standinPost(t, c, tc.url, "x-api-key", "k", tc.body)
			quoted, _ := json.Marshal(want)
			if status != http.StatusOK || !strings.Contains(body, string(quoted[1:len(quoted)-1])) {
				t.Errorf("answer %d %s lacks the schema's instance %s", status, body, want)
			}
		})
	}
}

// TestStandinToolSearch: Claude Code defers MCP tools behind ToolSearch. A
// queued call of such a tool is answered first with one ToolSearch call
// that loads it (the turn stays queued), then with the call itself once
// offered; a system message after a tool result still counts as after it.
func TestStandinToolSearch(t *testing.T) {
	s := startStandin(t, "127.0.0.2")
	c := standinClient(t, s)
	const url = "https://api.anthropic.com/v1/messages"
	s.Queue(turn{Tool: "check", Input: map[string]any{"id": "ap-1"}}, turn{Text: "Checked.", When: afterToolResult})
	const sys = `{"role":"system","content":"deferred tools: mcp__aileron__check"}`
	result := func(text string) string {
		return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + text + `"}]}`
	}
	for i, step := range []struct {
		tools, messages string
		want            []string
		pending         int
	}{
		{`[{"name":"ToolSearch"}]`, `[{"role":"user","content":"go"},` + sys + `]`, []string{`"name":"ToolSearch"`, `"input":{"max_results":5,"query":"check"}`}, 2},
		{`[{"name":"ToolSearch"}]`, `[{"role":"user","content":"go"}]`, []string{standinText}, 2}, // searched once only
		{`[{"name":"ToolSearch"},{"name":"mcp__aileron__check"}]`, `[{"role":"user","content":"go"},` + result("loaded") + `,` + sys + `]`, []string{`"name":"mcp__aileron__check"`, `"input":{"id":"ap-1"}`}, 1},
		{`[{"name":"ToolSearch"},{"name":"mcp__aileron__check"}]`, `[` + result("loaded") + `,` + result("pending ap-1") + `,` + sys + `]`, []string{`"text":"Checked."`}, 0},
	} {
		_, body := standinPost(t, c, url, "x-api-key", "k", `{"model":"m","tools":`+step.tools+`,"messages":`+step.messages+`}`)
		for _, w := range step.want {
			if !strings.Contains(body, w) {
				t.Errorf("step %d: answer lacks %s: %s", i, w, body)
			}
		}
		if s.Pending() != step.pending {
			t.Errorf("step %d: %d turns pending, want %d", i, s.Pending(), step.pending)
		}
	}
}
