package integration

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The stand-in's Anthropic API (api.anthropic.com), in the shapes of
// https://docs.anthropic.com/en/api/messages and its streaming events:
// POST /v1/messages (JSON, or SSE with stream: true),
// POST /v1/messages/count_tokens and GET /v1/models.

// anthropicRequest is what the stand-in reads of a Messages request.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Tools    []struct{ Name string }
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	// Structured outputs: output_config.format (and the beta's
	// output_format) of type json_schema.
	OutputFormat struct{ Schema json.RawMessage } `json:"output_format"`
	OutputConfig struct {
		Format struct{ Schema json.RawMessage }
	} `json:"output_config"`
}

// parseAnthropic fills rec's model, stream, tools and tool results.
func parseAnthropic(rec *modelRequest) {
	var req anthropicRequest
	if json.Unmarshal(rec.Body, &req) != nil {
		return
	}
	rec.Model, rec.Streamed = req.Model, req.Stream
	rec.Schema = req.OutputConfig.Format.Schema
	if rec.Schema == nil {
		rec.Schema = req.OutputFormat.Schema
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	for _, m := range req.Messages {
		if m.Role == "user" || m.Role == "assistant" { // not a system message between
			rec.AfterTool = false
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				rec.ToolResults = append(rec.ToolResults, textOf(b.Content))
				rec.AfterTool = m.Role == "user"
			}
		}
	}
}

func (s *standin) serveAnthropic(w http.ResponseWriter, r *http.Request, rec *modelRequest) {
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/messages") {
		parseAnthropic(rec)
	}
	if !s.admit(rec) {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		a := s.answerFor(rec)
		if rec.Streamed {
			streamAnthropic(w, a)
			return
		}
		writeJSON(w, http.StatusOK, anthropicMessage(a, a.content(), a.stopReason(), a.usageJSON(a.Usage.Output)))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		s.mu.Lock()
		n := s.usage.Input
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": n})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		models := []map[string]any{
			{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude Sonnet 4.5", "created_at": "2025-09-29T00:00:00Z"},
			{"type": "model", "id": "claude-haiku-4-5", "display_name": "Claude Haiku 4.5", "created_at": "2025-10-15T00:00:00Z"},
		}
		writeJSON(w, http.StatusOK, map[string]any{"data": models, "has_more": false, "first_id": "claude-sonnet-4-5", "last_id": "claude-haiku-4-5"})
	default:
		anthropicError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.Method+" "+r.URL.Path)
	}
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// anthropicMessage is a Message object.
func anthropicMessage(a answer, content []map[string]any, stop any, usage map[string]any) map[string]any {
	return map[string]any{
		"id": "msg_" + a.ID, "type": "message", "role": "assistant", "model": a.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
	}
}

func (a answer) content() []map[string]any {
	if a.Tool != "" {
		return []map[string]any{{"type": "tool_use", "id": "toolu_" + a.ID, "name": a.Tool, "input": a.Input}}
	}
	return []map[string]any{{"type": "text", "text": a.Text}}
}

func (a answer) stopReason() string {
	if a.Tool != "" {
		return "tool_use"
	}
	return "end_turn"
}

// usageJSON is Anthropic's usage object with output output tokens.
func (a answer) usageJSON(output int) map[string]any {
	return map[string]any{
		"input_tokens": a.Usage.Input, "output_tokens": output,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": a.Usage.Cached,
	}
}

// streamAnthropic writes the Messages stream: message_start (input usage),
// one content block with its deltas, message_delta (stop reason and the
// output usage), message_stop.
func streamAnthropic(w http.ResponseWriter, a answer) {
	e := newSSE(w, false)
	e.event("message_start", map[string]any{"type": "message_start", "message": anthropicMessage(a, []map[string]any{}, nil, a.usageJSON(1))})
	block := map[string]any{"type": "text", "text": ""}
	var deltas []map[string]any
	if a.Tool != "" {
		block = map[string]any{"type": "tool_use", "id": "toolu_" + a.ID, "name": a.Tool, "input": map[string]any{}}
		js := a.inputJSON()
		half := len(js) / 2
		for _, part := range []string{js[:half], js[half:]} {
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": part})
		}
	} else {
		for _, part := range words(a.Text) {
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": part})
		}
	}
	e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block})
	e.event("ping", map[string]any{"type": "ping"})
	for _, d := range deltas {
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": d})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": a.stopReason(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.Usage.Output},
	})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
