package integration

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// modelAnswers are the stand-in provider's answers by X-Test-Answer, in the
// providers' shapes: a stream's events are flushed one by one.
var modelAnswers = map[string]struct {
	ctype  string
	events []string
}{
	"anthropic-sse": {"text/event-stream", []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":2095,\"cache_read_input_tokens\":1024,\"output_tokens\":1}}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":503}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}},
	"openai-json": {"application/json", []string{`{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},"output_tokens":52,"total_tokens":380}}`}},
	"gemini-json": {"application/json", []string{`{"candidates":[],"usageMetadata":{"promptTokenCount":11,"candidatesTokenCount":7,"thoughtsTokenCount":5,"cachedContentTokenCount":3}}`}},
}

// serveModelAnswer answers with modelAnswers[X-Test-Answer].
func serveModelAnswer(w http.ResponseWriter, r *http.Request) {
	a, ok := modelAnswers[r.Header.Get("X-Test-Answer")]
	if !ok {
		http.Error(w, "no such answer", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	for _, ev := range a.events {
		_, _ = io.WriteString(w, ev)
		_ = http.NewResponseController(w).Flush()
	}
}

// TestModelUsageOnTheRecord: through the daemon, with the providers
// installed by `aileron provider add`, an Anthropic stream, an OpenAI
// Responses JSON answer, a Gemini answer and a Responses WebSocket turn each
// leave the model asked for and the tokens reported on their audit lines,
// and `aileron audit tail` shows them.
func TestModelUsageOnTheRecord(t *testing.T) {
	e := theSuite.providerEnv(t)
	addProvider(t, e, newSecret("anthropic key", "sk-ant-api03-", ""), "anthropic")
	addProvider(t, e, newSecret("openai key", "sk-proj-", ""), "openai")
	addProvider(t, e, newSecret("gemini key", "AIza", ""), "gemini")
	s := e.d.newSession(t)
	vars := sessionVars(t, s)
	c := s.via(t, e.d)
	for _, tc := range []struct {
		answer, url, key, val, body string
	}{
		{"anthropic-sse", "https://api.anthropic.com/v1/messages", "x-api-key", vars["ANTHROPIC_API_KEY"], `{"model":"claude-sonnet-4-5","stream":true,"max_tokens":9,"messages":[]}`},
		{"openai-json", "https://api.openai.com/v1/responses", "Authorization", "Bearer " + vars["OPENAI_API_KEY"], `{"model":"gpt-5-codex","input":"` + strings.Repeat("x", 80<<10) + `"}`},
		{"gemini-json", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent", "x-goog-api-key", vars["GEMINI_API_KEY"], `{"contents":[]}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, tc.url, strings.NewReader(tc.body))
		req.Header.Set(tc.key, tc.val)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Answer", tc.answer)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(bufio.NewReader(resp.Body))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "usage") {
			t.Fatalf("%s: status %d: %s", tc.answer, resp.StatusCode, trunc(body))
		}
	}
	modelTurn(t, s, vars["OPENAI_API_KEY"])
	want := map[string]string{ // operation → model and tokens as the line carries them
		"create-message":    `claude-sonnet-4-5 true 2095 503 1024`,
		"create-response":   `gpt-5-codex false 328 52 128`,
		"call-model-v1beta": `gemini-2.5-flash false 11 12 3`,
		"response-socket":   `gpt-5-codex true 300 20 256`,
	}
	lines := waitAudit(t, e.d, "model calls' outcome lines", func(ls []auditLine) bool {
		n := 0
		for _, l := range ls {
			if ev := l.str("event"); ev == "connector.proxy.completed" && want[l.str("operation")] != "" && l.str("operation") != "response-socket" || ev == "connector.proxy.turn" {
				n++
			}
		}
		return n >= 4
	})
	seen := map[string]bool{}
	for _, l := range lines {
		ev, op := l.str("event"), l.str("operation")
		if ev != "connector.proxy.turn" && (ev != "connector.proxy.completed" || op == "response-socket") {
			if ev == "connector.proxy.proxied" && want[op] != "" && op != "response-socket" && l.str("model") == "" { // a WebSocket's GET has no body
				t.Errorf("the decision line of %s names no model: %s", op, l.Raw)
			}
			continue
		}
		if want[op] == "" {
			continue
		}
		streamed, _ := l.M["streamed"].(bool)
		got := strings.Join([]string{l.str("model"), boolText(streamed), num(l, "input_tokens"), num(l, "output_tokens"), num(l, "cached_tokens")}, " ")
		if got != want[op] || num(l, "ttfb_ms") == "0" {
			t.Errorf("%s line of %s: %s (%s), want %s and a ttfb_ms", ev, op, got, l.Raw, want[op])
		}
		seen[op] = true
	}
	if len(seen) != len(want) {
		t.Errorf("lines with usage for %v, want %v", seen, want)
	}
	tail := e.d.cli(t, "audit", "tail", "--event", "connector.proxy.*")
	for _, w := range []string{"model=claude-sonnet-4-5 tokens in=2095 out=503 cached=1024 streamed ttfb=", "model=gpt-5-codex tokens in=300 out=20 cached=256 streamed ttfb="} {
		if !strings.Contains(tail, w) {
			t.Errorf("audit tail shows no %q:\n%s", w, tail)
		}
	}
}

// modelTurn opens the Responses WebSocket and runs one turn. The stand-in
// echoes each message, so the client sends the response.create and then
// the final event it wants echoed back as the upstream's.
func modelTurn(t *testing.T, s *session, placeholder string) {
	t.Helper()
	dialer := websocket.Dialer{Proxy: http.ProxyURL(s.proxyURL(t)), TLSClientConfig: &tls.Config{RootCAs: s.caPool(t)},
		HandshakeTimeout: 30 * time.Second, EnableCompression: true}
	conn, resp, err := dialer.Dial("wss://api.openai.com/v1/responses", http.Header{"Authorization": {"Bearer " + placeholder}})
	if err != nil {
		t.Fatalf("Responses WebSocket through the proxy: %v (status %s)", err, statusOf(resp))
	}
	defer conn.Close()
	for _, msg := range []string{`{"type":"response.create","model":"gpt-5-codex","input":"hi"}`,
		`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},"output_tokens":20}}}`} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := conn.ReadMessage(); err != nil || string(got) != msg {
			t.Fatalf("echo = %q, %v", got, err)
		}
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// num is a numeric field of a line as written, "0" when absent.
func num(l auditLine, key string) string {
	if n, ok := l.M[key].(json.Number); ok {
		return n.String()
	}
	return "0"
}
