package integration

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The stand-in's Gemini API (generativelanguage.googleapis.com), in the
// shapes of https://ai.google.dev/api: POST
// /v1beta/models/{model}:generateContent, :streamGenerateContent (SSE with
// alt=sse, else a JSON array of chunks), :countTokens, and GET
// /v1beta/models[/{model}] (/v1 as well).

// geminiRequest is what the stand-in reads of a generate request.
type geminiRequest struct {
	Contents []struct {
		Parts []struct {
			FunctionResponse *struct {
				Name     string          `json:"name"`
				Response json.RawMessage `json:"response"`
			} `json:"functionResponse"`
		} `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct{ Name string } `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string          `json:"responseMimeType"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
		ResponseSchema     json.RawMessage `json:"responseSchema"`
	} `json:"generationConfig"`
}

// parseGemini fills rec's tools and tool results from the body.
func parseGemini(rec *modelRequest) {
	var req geminiRequest
	if json.Unmarshal(rec.Body, &req) != nil {
		return
	}
	if gc := req.GenerationConfig; gc.ResponseMimeType == "application/json" {
		rec.Schema = gc.ResponseJSONSchema
		if rec.Schema == nil {
			rec.Schema = gc.ResponseSchema
		}
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, f.Name)
		}
	}
	for _, c := range req.Contents {
		rec.AfterTool = false
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				rec.ToolResults = append(rec.ToolResults, string(p.FunctionResponse.Response))
				rec.AfterTool = true
			}
		}
	}
}

// geminiRoute splits /v1beta/models/{model}[:{method}] (or /v1/…).
func geminiRoute(path string) (model, method string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v1beta/models")
	if !ok {
		if rest, ok = strings.CutPrefix(path, "/v1/models"); !ok {
			return "", "", false
		}
	}
	if rest == "" {
		return "", "", true
	}
	rest, ok = strings.CutPrefix(rest, "/")
	model, method, _ = strings.Cut(rest, ":")
	return model, method, ok && model != "" && !strings.Contains(model, "/")
}

func (s *standin) serveGemini(w http.ResponseWriter, r *http.Request, rec *modelRequest) {
	model, method, ok := geminiRoute(r.URL.Path)
	rec.Model = model
	if r.Method == http.MethodPost {
		rec.Streamed = method == "streamGenerateContent"
		parseGemini(rec)
	}
	if !s.admit(rec) {
		geminiError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.")
		return
	}
	switch {
	case !ok:
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Not found: "+r.URL.Path)
	case r.Method == http.MethodGet && model == "":
		writeJSON(w, http.StatusOK, map[string]any{"models": []any{geminiModel("gemini-2.5-flash"), geminiModel("gemini-2.5-pro")}})
	case r.Method == http.MethodGet && method == "":
		writeJSON(w, http.StatusOK, geminiModel(model))
	case r.Method == http.MethodPost && method == "generateContent":
		a := s.answerFor(rec)
		writeJSON(w, http.StatusOK, geminiChunk(a, a.geminiParts(), true))
	case r.Method == http.MethodPost && method == "streamGenerateContent":
		s.streamGemini(w, r, s.answerFor(rec))
	case r.Method == http.MethodPost && method == "countTokens":
		s.mu.Lock()
		n := s.usage.Input
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": n, "promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": n}}})
	default:
		geminiError(w, http.StatusNotFound, "NOT_FOUND", "Method not found: "+method)
	}
}

func geminiError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
}

func geminiModel(id string) map[string]any {
	return map[string]any{
		"name": "models/" + id, "version": "001", "displayName": id, "inputTokenLimit": 1048576, "outputTokenLimit": 65536,
		"supportedGenerationMethods": []string{"generateContent", "countTokens"},
	}
}

func (a answer) geminiParts() []any {
	if a.Tool != "" {
		return []any{map[string]any{"functionCall": map[string]any{"name": a.Tool, "args": a.Input}}}
	}
	return []any{map[string]any{"text": a.Text}}
}

// geminiChunk is a GenerateContentResponse with parts; the last chunk of
// an answer has its finish reason and the whole usage, an earlier one only
// the prompt's.
func geminiChunk(a answer, parts []any, last bool) map[string]any {
	cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	usage := map[string]any{
		"promptTokenCount": a.Usage.Input, "totalTokenCount": a.Usage.Input,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": a.Usage.Input}},
	}
	if last {
		cand["finishReason"] = "STOP"
		usage["candidatesTokenCount"] = a.Usage.Output
		usage["totalTokenCount"] = a.Usage.Input + a.Usage.Output
	}
	if a.Usage.Cached > 0 {
		usage["cachedContentTokenCount"] = a.Usage.Cached
	}
	return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": a.Model, "responseId": a.ID}
}

// streamGemini writes the answer as chunks: SSE events ending in CRLF CRLF
// with alt=sse, else one JSON array.
func (s *standin) streamGemini(w http.ResponseWriter, r *http.Request, a answer) {
	var chunks []map[string]any
	if a.Tool != "" {
		chunks = append(chunks, geminiChunk(a, a.geminiParts(), true))
	} else {
		ws := words(a.Text)
		for i, d := range ws {
			chunks = append(chunks, geminiChunk(a, []any{map[string]any{"text": d}}, i == len(ws)-1))
		}
	}
	if r.URL.Query().Get("alt") != "sse" {
		writeJSON(w, http.StatusOK, chunks)
		return
	}
	e := newSSE(w, true)
	for _, c := range chunks {
		e.event("", c)
	}
}
