package integration

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// The stand-in's OpenAI API (api.openai.com and any OpenAI-compatible
// host), in the shapes of https://platform.openai.com/docs/api-reference:
// POST /v1/responses (JSON, or SSE with stream: true), the Responses
// WebSocket (GET /v1/responses upgraded: each response.create message is
// answered with the streaming events as text frames),
// POST /v1/chat/completions (JSON, or SSE ending with a usage chunk when
// stream_options.include_usage), POST /v1/embeddings and GET /v1/models.
// An upgrade is recorded as a GET with WebSocket set, each response.create
// as a "WS" request with the upgrade's headers.

// openaiRequest is what the stand-in reads of a Responses, Chat
// Completions or Embeddings request.
type openaiRequest struct {
	Type          string `json:"type"` // "response.create" on the WebSocket
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools []openaiTool `json:"tools"`
	// Structured outputs: Responses' text.format and Chat Completions'
	// response_format, of type json_schema.
	Text struct {
		Format struct{ Schema json.RawMessage }
	} `json:"text"`
	ResponseFormat struct {
		JSONSchema struct{ Schema json.RawMessage } `json:"json_schema"`
	} `json:"response_format"`
	Input          json.RawMessage `json:"input"`
	Generate       *bool           `json:"generate"` // false: a warm-up that answers nothing (Codex)
	EncodingFormat string          `json:"encoding_format"`
	Messages       []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// openaiTool is a tool a request offers: a function (Chat Completions
// nests its name in function), a custom (freeform) tool, or a namespace of
// tools.
type openaiTool struct {
	Type        string `json:"type"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Function    struct{ Name string }
	Tools       []openaiTool `json:"tools"`
}

// addOpenAITools records the names of tools, a namespace's as
// NAMESPACE__NAME in rec.Namespaces too (Codex puts each MCP server's tools
// in one), and whether Codex's code-mode exec tool is among them: Codex then
// offers its nested tools (MCP tools included) only as functions of the
// JavaScript that exec runs, listed in its ALL_TOOLS.
func (rec *modelRequest) addOpenAITools(tools []openaiTool, namespace string) {
	for _, t := range tools {
		name := t.Name
		if name == "" {
			name = t.Function.Name
		}
		if t.Type == "namespace" {
			rec.addOpenAITools(t.Tools, name)
			continue
		}
		if t.Type == "custom" && t.Name == "exec" && strings.Contains(t.Description, "ALL_TOOLS") {
			rec.CodeMode = true
		}
		if namespace != "" {
			if rec.Namespaces == nil {
				rec.Namespaces = map[string]string{}
			}
			name = namespace + "__" + name
			rec.Namespaces[name] = namespace
		}
		rec.Tools = append(rec.Tools, name)
	}
}

// parseOpenAI fills rec from body and returns what it read.
func parseOpenAI(rec *modelRequest, body []byte) openaiRequest {
	var req openaiRequest
	if json.Unmarshal(body, &req) != nil {
		return req
	}
	rec.Model, rec.Streamed = req.Model, req.Stream
	rec.Prewarm = req.Generate != nil && !*req.Generate
	rec.Schema = req.Text.Format.Schema
	if rec.Schema == nil {
		rec.Schema = req.ResponseFormat.JSONSchema.Schema
	}
	rec.addOpenAITools(req.Tools, "")
	var items []struct {
		Type   string          `json:"type"`
		Role   string          `json:"role"`
		Output json.RawMessage `json:"output"`
		Tools  []openaiTool    `json:"tools"` // of an additional_tools item (Codex)
	}
	if json.Unmarshal(req.Input, &items) == nil {
		for _, it := range items {
			rec.addOpenAITools(it.Tools, "")
			switch {
			case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
				rec.ToolResults = append(rec.ToolResults, textOf(it.Output))
				rec.AfterTool = true
			case it.Role == "user" || it.Role == "assistant": // not a developer message between
				rec.AfterTool = false
			}
		}
	}
	for _, m := range req.Messages {
		switch m.Role {
		case "tool":
			rec.ToolResults = append(rec.ToolResults, textOf(m.Content))
			rec.AfterTool = true
		case "user", "assistant":
			rec.AfterTool = false
		}
	}
	return req
}

func (s *standin) serveOpenAI(w http.ResponseWriter, r *http.Request, rec *modelRequest) {
	p := r.URL.Path
	ws := p == "/v1/responses" && websocket.IsWebSocketUpgrade(r)
	rec.WebSocket = ws
	var req openaiRequest
	if r.Method == http.MethodPost {
		req = parseOpenAI(rec, rec.Body)
	}
	if !s.admit(rec) {
		openaiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	switch {
	case ws:
		s.serveResponsesWS(w, r, rec)
	case r.Method == http.MethodPost && p == "/v1/responses":
		a := s.answerFor(rec)
		events := responsesEvents(a)
		if !rec.Streamed {
			writeJSON(w, http.StatusOK, events[len(events)-1]["response"])
			return
		}
		e := newSSE(w, false)
		for _, ev := range events {
			e.event(ev["type"].(string), ev)
		}
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		s.serveChat(w, rec, req)
	case r.Method == http.MethodPost && p == "/v1/embeddings":
		s.serveEmbeddings(w, rec, req)
	case r.Method == http.MethodGet && p == "/v1/models":
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{openaiModel("gpt-5"), openaiModel("gpt-5-mini")}})
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/models/"):
		writeJSON(w, http.StatusOK, openaiModel(strings.TrimPrefix(p, "/v1/models/")))
	default:
		openaiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Invalid URL ("+r.Method+" "+p+")")
	}
}

func openaiError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

func openaiModel(id string) map[string]any {
	return map[string]any{"id": id, "object": "model", "created": 1754000000, "owned_by": "openai"}
}

// serveResponsesWS answers each response.create message with the events
// of a streamed response, one text frame each.
func (s *standin) serveResponsesWS(w http.ResponseWriter, r *http.Request, up *modelRequest) {
	c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	if !s.trackWS(c.NetConn()) {
		return
	}
	defer s.untrackWS(c.NetConn())
	for {
		typ, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		rec := &modelRequest{
			Method: "WS", Host: up.Host, Path: up.Path, Query: up.Query, Header: up.Header,
			Body: msg, WebSocket: true, Keys: up.Keys,
		}
		req := parseOpenAI(rec, msg)
		rec.Streamed = true
		s.admit(rec)
		if typ != websocket.TextMessage || req.Type != "response.create" {
			ev := map[string]any{"type": "error", "error": map[string]any{
				"type": "invalid_request_error", "code": "unknown_event", "message": "expected a response.create text frame",
			}}
			if c.WriteJSON(ev) != nil {
				return
			}
			continue
		}
		for _, ev := range responsesEvents(s.answerFor(rec)) {
			if c.WriteJSON(ev) != nil {
				return
			}
		}
	}
}

// responseObject is a Response object with the given status, output and
// usage.
func responseObject(a answer, status string, output []any, usage any) map[string]any {
	return map[string]any{
		"id": "resp_" + a.ID, "object": "response", "created_at": time.Now().Unix(), "status": status,
		"background": false, "error": nil, "incomplete_details": nil, "instructions": nil,
		"max_output_tokens": nil, "model": a.Model, "output": output, "parallel_tool_calls": true,
		"previous_response_id": nil, "reasoning": map[string]any{"effort": nil, "summary": nil},
		"store": false, "temperature": 1.0, "text": map[string]any{"format": map[string]any{"type": "text"}},
		"tool_choice": "auto", "tools": []any{}, "top_p": 1.0, "truncation": "disabled",
		"usage": usage, "user": nil, "metadata": map[string]any{},
	}
}

// responsesEvents are the events of a streamed response, each with its
// sequence_number; the last is response.completed, whose response is the
// whole answer (the JSON answer too). A prewarm's has no output.
func responsesEvents(a answer) []map[string]any {
	var evs []map[string]any
	add := func(typ string, kv map[string]any) {
		kv["type"], kv["sequence_number"] = typ, len(evs)
		evs = append(evs, kv)
	}
	add("response.created", map[string]any{"response": responseObject(a, "in_progress", []any{}, nil)})
	add("response.in_progress", map[string]any{"response": responseObject(a, "in_progress", []any{}, nil)})
	usage := map[string]any{
		"input_tokens": a.Usage.Input, "input_tokens_details": map[string]any{"cached_tokens": a.Usage.Cached},
		"output_tokens": a.Usage.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": a.Usage.Input + a.Usage.Output,
	}
	if a.Prewarm {
		add("response.completed", map[string]any{"response": responseObject(a, "completed", []any{}, usage)})
		return evs
	}
	var item map[string]any
	if a.Code != "" {
		itemID := "ctc_" + a.ID
		item = map[string]any{"type": "custom_tool_call", "id": itemID, "call_id": a.CallID, "name": a.Tool, "input": a.Code, "status": "completed"}
		add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "custom_tool_call", "id": itemID, "call_id": a.CallID, "name": a.Tool, "input": "", "status": "in_progress",
		}})
		add("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": a.Code})
		add("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": 0, "input": a.Code})
	} else if a.Tool != "" {
		itemID, args := "fc_"+a.ID, a.inputJSON()
		item = map[string]any{"type": "function_call", "id": itemID, "call_id": a.CallID, "name": a.Tool, "arguments": args, "status": "completed"}
		added := map[string]any{"type": "function_call", "id": itemID, "call_id": a.CallID, "name": a.Tool, "arguments": "", "status": "in_progress"}
		if a.Namespace != "" { // a call of a namespace's tool names both
			for _, it := range []map[string]any{item, added} {
				it["name"], it["namespace"] = strings.TrimPrefix(a.Tool, a.Namespace+"__"), a.Namespace
			}
		}
		add("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		add("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": args})
		add("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "arguments": args})
	} else {
		itemID := "msg_" + a.ID
		part := map[string]any{"type": "output_text", "text": a.Text, "annotations": []any{}, "logprobs": []any{}}
		item = map[string]any{"type": "message", "id": itemID, "status": "completed", "role": "assistant", "content": []any{part}}
		add("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": itemID, "status": "in_progress", "role": "assistant", "content": []any{},
		}})
		at := map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0}
		with := func(kv map[string]any) map[string]any {
			for k, v := range at {
				kv[k] = v
			}
			return kv
		}
		add("response.content_part.added", with(map[string]any{"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}}))
		for _, d := range words(a.Text) {
			add("response.output_text.delta", with(map[string]any{"delta": d, "logprobs": []any{}}))
		}
		add("response.output_text.done", with(map[string]any{"text": a.Text, "logprobs": []any{}}))
		add("response.content_part.done", with(map[string]any{"part": part}))
	}
	add("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	add("response.completed", map[string]any{"response": responseObject(a, "completed", []any{item}, usage)})
	return evs
}

// serveChat answers a Chat Completions request.
func (s *standin) serveChat(w http.ResponseWriter, rec *modelRequest, req openaiRequest) {
	a := s.answerFor(rec)
	usage := map[string]any{
		"prompt_tokens": a.Usage.Input, "completion_tokens": a.Usage.Output, "total_tokens": a.Usage.Input + a.Usage.Output,
		"prompt_tokens_details":     map[string]any{"cached_tokens": a.Usage.Cached},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0},
	}
	finish := "stop"
	var calls []any
	if a.Tool != "" {
		finish = "tool_calls"
		calls = []any{map[string]any{"index": 0, "id": a.CallID, "type": "function", "function": map[string]any{"name": a.Tool, "arguments": a.inputJSON()}}}
	}
	chat := func(object string, choices []any) map[string]any {
		return map[string]any{"id": "chatcmpl-" + a.ID, "object": object, "created": time.Now().Unix(), "model": a.Model, "system_fingerprint": "fp_standin", "choices": choices}
	}
	if !rec.Streamed {
		msg := map[string]any{"role": "assistant", "content": a.Text, "refusal": nil}
		if calls != nil {
			msg["content"], msg["tool_calls"] = nil, calls
		}
		c := chat("chat.completion", []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}})
		c["usage"] = usage
		writeJSON(w, http.StatusOK, c)
		return
	}
	e := newSSE(w, false)
	chunk := func(delta map[string]any, finish any) {
		c := chat("chat.completion.chunk", []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}})
		if req.StreamOptions.IncludeUsage {
			c["usage"] = nil
		}
		e.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	if calls != nil {
		chunk(map[string]any{"tool_calls": calls}, nil)
	}
	for _, d := range words(a.Text) {
		chunk(map[string]any{"content": d}, nil)
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions.IncludeUsage {
		c := chat("chat.completion.chunk", []any{})
		c["usage"] = usage
		e.event("", c)
	}
	e.event("", "[DONE]")
}

// serveEmbeddings answers an Embeddings request with one 8-dimensional
// vector per input, as floats or, for encoding_format "base64" (the
// OpenAI SDK's default), as base64 little-endian float32s.
func (s *standin) serveEmbeddings(w http.ResponseWriter, rec *modelRequest, req openaiRequest) {
	s.mu.Lock()
	u := s.usage
	s.mu.Unlock()
	n := 1
	var many []json.RawMessage
	// A string or a token array is one input; an array of those, several.
	if json.Unmarshal(req.Input, &many) == nil && len(many) > 0 && (many[0][0] == '"' || many[0][0] == '[') {
		n = len(many)
	}
	var data []any
	for i := range n {
		vec := make([]float32, 8)
		for j := range vec {
			vec[j] = float32(i+1) / float32(j+2)
		}
		var emb any = vec
		if req.EncodingFormat == "base64" {
			raw := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			emb = base64.StdEncoding.EncodeToString(raw)
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": emb})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "data": data, "model": rec.Model,
		"usage": map[string]any{"prompt_tokens": u.Input, "total_tokens": u.Input},
	})
}
