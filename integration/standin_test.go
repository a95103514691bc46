package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// standin is a stand-in for the model providers the agents and SDKs call:
// Anthropic, OpenAI (and any OpenAI-compatible host) and the Gemini API, on
// a real TLS listener with the test PKI's server certificate (which names
// api.anthropic.com, api.openai.com, generativelanguage.googleapis.com and
// llm.example.com). The daemon reaches it through upstream.resolve, never
// through a test-only code path. It answers in the shapes of the providers'
// public API references, JSON and streamed, plays the turns a test queued,
// reports the token usage the test chose, and records every request.
//
// The provider is chosen by Host: api.anthropic.com is Anthropic,
// generativelanguage.googleapis.com is Gemini, any other host speaks
// OpenAI's API. Files: standin_test.go (server, record, script),
// standin_anthropic_test.go, standin_openai_test.go, standin_gemini_test.go.
type standin struct {
	// Addr is the bound "ip:port".
	Addr string

	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu     sync.Mutex
	reqs   []modelRequest
	script []turn
	usage  modelUsage
	keys   map[string]bool // accepted keys; empty accepts any
	seq    int
	// searched are the queued tools a ToolSearch call was answered for.
	searched map[string]bool
	// ws are the open Responses WebSockets, which http.Server.Close does
	// not close (they are hijacked); wsDone counts their handlers.
	ws     map[net.Conn]bool
	wsDone sync.WaitGroup
}

// standinHosts are the hosts the stand-in answers for (those the test
// PKI's server certificate names).
func standinHosts() []string {
	return []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "llm.example.com"}
}

const (
	standinAnthropicHost = "api.anthropic.com"
	standinGeminiHost    = "generativelanguage.googleapis.com"
	// standinText is the answer to a request no queued turn matched.
	standinText = "Hello from the stand-in provider."
)

// modelUsage is the token usage the stand-in reports on every answer, as
// the provider's own fields: Anthropic input_tokens, output_tokens,
// cache_read_input_tokens; OpenAI input_tokens (prompt_tokens),
// output_tokens (completion_tokens), cached_tokens; Gemini
// promptTokenCount, candidatesTokenCount, cachedContentTokenCount. Totals
// are Input+Output.
type modelUsage struct{ Input, Output, Cached int }

// modelRequest is what the stand-in saw of one model request (one
// response.create message, for a Responses WebSocket).
type modelRequest struct {
	Method    string // "GET", "POST"; "WS" for a response.create message
	Host      string // without port
	Path      string
	Query     url.Values
	Header    http.Header // of the request (of the upgrade, for WS)
	Body      []byte
	WebSocket bool
	// Keys maps where a key was carried to the key: "x-api-key",
	// "authorization" (the Bearer token), "x-goog-api-key", "query:key".
	Keys map[string]string

	Model    string
	Streamed bool
	Tools    []string // tool names the request offered
	// CodeMode: the request offers Codex's code-mode exec tool, so a tool
	// it does not offer directly is called from exec's JavaScript.
	CodeMode    bool
	ToolResults []string // tool results it sent back, as text
	AfterTool   bool     // its last user input (system and developer messages aside) is a tool result
	// Prewarm marks a Responses request with "generate": false (Codex's
	// prewarm): answered with no output and no output tokens, and never
	// given a queued turn.
	Prewarm bool
	// Namespaces maps an offered tool that sits in a namespace tool
	// (Responses; Codex puts each MCP server's tools in one), listed in
	// Tools as NAMESPACE__NAME, to its namespace.
	Namespaces map[string]string
	// Schema is the JSON schema a structured-output request asked its
	// answer to follow; the plain answer is then an instance of it.
	Schema json.RawMessage
}

// turn is one scripted answer. A turn with Tool calls the offered tool
// named Tool (or the agent's name for an MCP tool Tool, see offeredTool)
// with Input, also when the agent offers it only through Codex's code-mode
// exec or Claude Code's ToolSearch (see callTool); otherwise it answers
// Text. The head of the queue answers the next request it matches: When,
// or by default, for a tool turn, a request offering the tool and, for a
// text turn, any request. Requests that do not match the head get
// standinText.
type turn struct {
	Tool  string
	Input map[string]any
	Text  string
	When  func(*modelRequest) bool
}

// afterToolResult is a turn's When for an answer to a tool's result.
func afterToolResult(r *modelRequest) bool { return r.AfterTool }

// answer is a turn resolved for one request.
type answer struct {
	Text  string
	Tool  string // the tool's name as the request offered it
	Input map[string]any
	// Code is the JavaScript of a call to Codex's code-mode exec tool
	// (Tool "exec") that calls the turn's tool with Input.
	Code   string
	CallID string
	// Namespace is the tool's namespace, when the request offered it in
	// one; Tool is then NAMESPACE__NAME.
	Namespace string
	ID        string // the response's or message's id
	Model     string
	Usage     modelUsage
	// Prewarm: no output (see modelRequest.Prewarm).
	Prewarm bool
}

// startStandin starts a stand-in on ip (a loopback address, or one in the
// test's own namespace) with the test PKI's server certificate; it is
// closed in t's cleanup.
func startStandin(t *testing.T, ip string) *standin {
	t.Helper()
	pki := theSuite.pkiDir
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "server.pem"), filepath.Join(pki, "server-key.pem"))
	if err != nil {
		t.Fatalf("load the stand-in's certificate: %v (regenerate with `go run gen.go` in %s)", err, pki)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen for the stand-in provider on %s: %v", ip, err)
	}
	s := &standin{Addr: ln.Addr().String(), ln: ln, done: make(chan struct{}), usage: modelUsage{Input: 21, Output: 8}}
	s.srv = &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(s.Close)
	return s
}

// Close stops the server, its open connections included.
func (s *standin) Close() {
	_ = s.srv.Close()
	<-s.done
	s.mu.Lock()
	for c := range s.ws {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wsDone.Wait()
}

// trackWS registers an open WebSocket's connection for Close, and reports
// false (the caller closes it) when the stand-in is already closed.
func (s *standin) trackWS(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return false
	default:
	}
	if s.ws == nil {
		s.ws = map[net.Conn]bool{}
	}
	s.ws[c] = true
	s.wsDone.Add(1)
	return true
}

func (s *standin) untrackWS(c net.Conn) {
	s.mu.Lock()
	delete(s.ws, c)
	s.mu.Unlock()
	s.wsDone.Done()
}

// Resolve maps each provider host:443 to the stand-in, for upstream.resolve.
func (s *standin) Resolve() map[string]string {
	m := map[string]string{}
	for _, h := range standinHosts() {
		m[h+":443"] = s.Addr
	}
	return m
}

// Configure points a daemon configuration at the stand-in: the provider
// hosts resolve to it, the test root verifies it, and its address is an
// allowed egress.
func (s *standin) Configure(cfg map[string]any) {
	up, _ := cfg["upstream"].(map[string]any)
	if up == nil {
		up = map[string]any{}
		cfg["upstream"] = up
	}
	res := map[string]string{}
	if old, ok := up["resolve"].(map[string]string); ok {
		for k, v := range old {
			res[k] = v
		}
	}
	for k, v := range s.Resolve() {
		res[k] = v
	}
	up["resolve"] = res
	up["ca_files"] = []string{filepath.Join(theSuite.pkiDir, "root.pem")}
	eg, _ := cfg["egress"].(map[string]any)
	if eg == nil {
		eg = map[string]any{}
		cfg["egress"] = eg
	}
	host, _, _ := net.SplitHostPort(s.Addr)
	cidrs, _ := eg["allow_cidrs"].([]string)
	eg["allow_cidrs"] = append(cidrs, host+"/32")
}

// SetUsage sets the usage reported from now on.
func (s *standin) SetUsage(u modelUsage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = u
}

// AcceptKeys makes the stand-in answer 401, in the provider's error shape,
// to a request that carries none of keys (as the real APIs refuse a wrong
// key). Without it any key is accepted.
func (s *standin) AcceptKeys(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = map[string]bool{}
	for _, k := range keys {
		s.keys[k] = true
	}
}

// Queue appends scripted turns.
func (s *standin) Queue(turns ...turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, turns...)
}

// Pending returns how many queued turns are still unplayed.
func (s *standin) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.script)
}

// Requests returns a copy of every request recorded so far, in order.
func (s *standin) Requests() []modelRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]modelRequest(nil), s.reqs...)
}

// Carrying returns the recorded requests in which text appears: in a
// header's name or value, the query or the body.
func (s *standin) Carrying(text string) []modelRequest {
	var out []modelRequest
	for _, r := range s.Requests() {
		hit := strings.Contains(r.Query.Encode(), text) || strings.Contains(r.Path, text) || bytes.Contains(r.Body, []byte(text))
		for k, vs := range r.Header {
			for _, v := range vs {
				hit = hit || strings.Contains(k, text) || strings.Contains(v, text)
			}
		}
		if hit {
			out = append(out, r)
		}
	}
	return out
}

// summary lists requests as "METHOD host/path" for messages.
func summary(reqs []modelRequest) string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method+" "+r.Host+r.Path)
	}
	return strings.Join(out, ", ")
}

// ServeHTTP records the request and hands it to its provider's handler.
func (s *standin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	rec := newModelRequest(r, body)
	host := rec.Host
	switch {
	case host == standinAnthropicHost:
		s.serveAnthropic(w, r, rec)
	case host == standinGeminiHost:
		s.serveGemini(w, r, rec)
	default:
		s.serveOpenAI(w, r, rec)
	}
}

// newModelRequest records the transport facts of r; the provider handler
// fills in the model and the rest from the body.
func newModelRequest(r *http.Request, body []byte) *modelRequest {
	rec := &modelRequest{
		Method: r.Method, Host: hostOnly(r.Host), Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: body, Keys: map[string]string{},
	}
	if v := r.Header.Get("X-Api-Key"); v != "" {
		rec.Keys["x-api-key"] = v
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		rec.Keys["authorization"] = v
	}
	if v := r.Header.Get("X-Goog-Api-Key"); v != "" {
		rec.Keys["x-goog-api-key"] = v
	}
	if v := r.URL.Query().Get("key"); v != "" {
		rec.Keys["query:key"] = v
	}
	return rec
}

// admit records rec and reports whether its key is accepted; the caller
// answers 401 when it is not.
func (s *standin) admit(rec *modelRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, *rec)
	if len(s.keys) == 0 {
		return true
	}
	for _, k := range rec.Keys {
		if s.keys[k] {
			return true
		}
	}
	return false
}

// answerFor plays the head of the script if it matches rec, else the
// plain text answer.
func (s *standin) answerFor(rec *modelRequest) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	a := answer{Text: standinText, Model: rec.Model, Usage: s.usage, ID: fmt.Sprintf("standin%04d", s.seq)}
	if rec.Prewarm {
		a.Text, a.Prewarm, a.Usage.Output = "", true, 0
		return a
	}
	if len(rec.Schema) > 0 {
		a.Text = schemaExample(rec.Schema)
	}
	if len(s.script) == 0 {
		return a
	}
	head := s.script[0]
	if head.When != nil && !head.When(rec) {
		return a
	}
	if head.Tool == "" {
		s.script = s.script[1:]
		a.Text = head.Text
		return a
	}
	return s.callTool(rec, head, a)
}

// callTool answers rec with a call of head's tool: directly when rec
// offers it, else through Codex's code-mode exec tool. When Claude Code
// defers the tool behind its ToolSearch tool (as it does MCP tools), the
// answer is first a ToolSearch call that loads it, once, and the turn stays
// queued. Otherwise a keeps the plain answer and the turn stays queued.
func (s *standin) callTool(rec *modelRequest, head turn, a answer) answer {
	a.Input, a.CallID = head.Input, "call_"+a.ID
	if a.Input == nil {
		a.Input = map[string]any{}
	}
	switch tool := offeredTool(rec.Tools, head.Tool); {
	case tool != "":
		a.Tool, a.Namespace = tool, rec.Namespaces[tool]
	case rec.CodeMode:
		a.Tool, a.Code = "exec", codeModeCall(head.Tool, a.inputJSON())
	case offeredTool(rec.Tools, "ToolSearch") != "" && !s.searched[head.Tool]:
		if s.searched == nil {
			s.searched = map[string]bool{}
		}
		s.searched[head.Tool] = true
		query := head.Tool // keywords, unless the full name is known
		if strings.Contains(head.Tool, "__") {
			query = "select:" + head.Tool
		}
		a.Text, a.Tool, a.Input = "", "ToolSearch", map[string]any{"query": query, "max_results": 5}
		return a
	default:
		return a
	}
	s.script = s.script[1:]
	delete(s.searched, head.Tool)
	a.Text = ""
	return a
}

// schemaExample returns a JSON instance of a JSON schema (or of the
// Gemini API's upper-case variant): each required property (every one,
// when none is marked), an enum's first value, the first of anyOf or oneOf,
// an empty array, "stand-in" for a string, a number's minimum or 1.
func schemaExample(raw json.RawMessage) string {
	var schema map[string]any
	if json.Unmarshal(raw, &schema) != nil {
		return "{}"
	}
	out, _ := json.Marshal(exampleOf(schema, 0))
	return string(out)
}

func exampleOf(schema map[string]any, depth int) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return exampleOf(alt, depth+1)
			}
		}
	}
	typ, _ := schema["type"].(string)
	if types, ok := schema["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return "stand-in"
	case "integer", "number":
		if m, ok := schema["minimum"].(float64); ok {
			return m
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	obj := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	if depth > 16 {
		return obj
	}
	required, _ := schema["required"].([]any)
	if len(required) == 0 {
		for name := range props {
			required = append(required, name)
		}
	}
	for _, name := range required {
		n, _ := name.(string)
		if p, ok := props[n].(map[string]any); ok {
			obj[n] = exampleOf(p, depth+1)
		}
	}
	return obj
}

// codeModeCall is the JavaScript for Codex's exec tool that finds the
// tool named want (or ending in "__"+want) in ALL_TOOLS, calls it with the
// JSON input, and returns its result as text; a missing tool throws an
// error naming the tools there are.
func codeModeCall(want, input string) string {
	w, _ := json.Marshal(want)
	return "const want = " + string(w) + ";\n" +
		"const names = ALL_TOOLS.map((t) => t.name);\n" +
		"const name = names.find((n) => n === want || n.endsWith('__' + want));\n" +
		"if (!name) throw new Error(`no tool ${want} among ${names.join(', ')}`);\n" +
		"text(JSON.stringify(await tools[name](" + input + ")));\n"
}

// offeredTool returns the name among offered that is want or an MCP
// tool's name for it: mcp__SERVER__want (Claude Code, Codex) or
// mcp_SERVER_want (Gemini CLI); else "".
func offeredTool(offered []string, want string) string {
	if want == "" {
		return ""
	}
	for _, name := range offered {
		if name == want || strings.HasSuffix(name, "__"+want) ||
			strings.HasPrefix(name, "mcp_") && strings.HasSuffix(name, "_"+want) { // Gemini CLI: mcp_SERVER_TOOL
			return name
		}
	}
	return ""
}

// words splits text into the chunks a stream sends, each word with its
// following space, so a stream has several deltas.
func words(text string) []string {
	if text == "" {
		return []string{""}
	}
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			return append(out, text)
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// inputJSON is a tool call's input as a JSON string.
func (a answer) inputJSON() string {
	raw, _ := json.Marshal(a.Input)
	return string(raw)
}

// sseWriter writes server-sent events, each flushed as it is written.
type sseWriter struct {
	w http.ResponseWriter
	// crlf ends events with "\r\n\r\n", as the Gemini API does.
	crlf bool
}

func newSSE(w http.ResponseWriter, crlf bool) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, crlf: crlf}
}

// event writes one event: an "event:" line when name is set, and data as
// JSON (a string is written as is).
func (e *sseWriter) event(name string, data any) {
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	raw, ok := data.(string)
	if !ok {
		j, _ := json.Marshal(data)
		raw = string(j)
	}
	b.WriteString("data: " + raw)
	if e.crlf {
		b.WriteString("\r\n\r\n")
	} else {
		b.WriteString("\n\n")
	}
	_, _ = io.WriteString(e.w, b.String())
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// textOf returns the text of a content value that is a string, an object
// with "text", or an array of parts with "text".
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var part struct{ Text string }
	if json.Unmarshal(raw, &part) == nil && part.Text != "" {
		return part.Text
	}
	var parts []struct{ Text string }
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return string(raw)
}
