package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sdkCase is one call testdata/sdks/sdk.mjs makes with an official SDK:
// exactly one request, to path, with the key where the SDK puts it (keyAt,
// as modelRequest.Keys names places), streamed or not; in and out name the
// usage fields the SDK parsed (out is empty for a call that generates no
// text: a token count, embeddings).
type sdkCase struct {
	name, keyAt, path string
	stream            bool
	in, out           string
}

// sdkProvider is a provider the SDK test binds with `aileron provider add
// ARGS…` (default: its name), with the calls its official SDK makes.
type sdkProvider struct {
	name, host string
	args       []string
	cases      []sdkCase
}

func sdkProviders() []sdkProvider {
	return []sdkProvider{
		{"anthropic", "api.anthropic.com", nil, []sdkCase{
			{"anthropic-json", "authorization", "/v1/messages", false, "input_tokens", "output_tokens"},
			{"anthropic-stream", "authorization", "/v1/messages", true, "input_tokens", "output_tokens"},
			{"anthropic-x-api-key-json", "x-api-key", "/v1/messages", false, "input_tokens", "output_tokens"},
			{"anthropic-x-api-key-stream", "x-api-key", "/v1/messages", true, "input_tokens", "output_tokens"},
			{"anthropic-count-tokens", "authorization", "/v1/messages/count_tokens", false, "input_tokens", ""},
		}},
		{"openai", "api.openai.com", nil, []sdkCase{
			{"openai-responses-json", "authorization", "/v1/responses", false, "input_tokens", "output_tokens"},
			{"openai-responses-stream", "authorization", "/v1/responses", true, "input_tokens", "output_tokens"},
			{"openai-responses-ws", "authorization", "/v1/responses", true, "input_tokens", "output_tokens"},
			{"openai-chat-json", "authorization", "/v1/chat/completions", false, "prompt_tokens", "completion_tokens"},
			{"openai-chat-stream", "authorization", "/v1/chat/completions", true, "prompt_tokens", "completion_tokens"},
			{"openai-embeddings", "authorization", "/v1/embeddings", false, "prompt_tokens", ""},
		}},
		{"gemini", "generativelanguage.googleapis.com", nil, []sdkCase{
			{"gemini-json", "x-goog-api-key", "/v1beta/models/gemini-2.5-flash:generateContent", false, "promptTokenCount", "candidatesTokenCount"},
			{"gemini-count-tokens", "x-goog-api-key", "/v1beta/models/gemini-2.5-flash:countTokens", false, "totalTokens", ""},
			{"gemini-stream", "x-goog-api-key", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", true, "promptTokenCount", "candidatesTokenCount"},
		}},
		// The OpenAI SDK at an OpenAI-compatible host, its key in LLM_API_KEY.
		{"llm", "llm.example.com", []string{"openai-compatible", "--name", "llm", "--host", "llm.example.com"}, []sdkCase{
			{"compatible-chat-json", "authorization", "/v1/chat/completions", false, "prompt_tokens", "completion_tokens"},
			{"compatible-chat-stream", "authorization", "/v1/chat/completions", true, "prompt_tokens", "completion_tokens"},
			{"compatible-responses-stream", "authorization", "/v1/responses", true, "input_tokens", "output_tokens"},
		}},
	}
}

// TestSDKs runs the official Node SDKs (@anthropic-ai/sdk, openai,
// @google/genai, pinned in testdata/npm) with /usr/bin/node through the
// proxy, in a session whose environment is only what `aileron session env`
// gives, against the stand-in provider. Each provider has one binding made
// by `aileron provider add` with the key on stdin; every SDK call (JSON,
// SSE, OpenAI's Responses WebSocket; token counts, embeddings; the OpenAI
// SDK at an OpenAI-compatible host too), wherever
// the SDK puts its key, gets its answer and usage, and the stand-in sees
// the real key in that place and nothing of the session's. The Anthropic
// SDK 1.x sends ANTHROPIC_API_KEY as Authorization: Bearer; x-api-key (as
// Claude Code sends it) is the SDK with the header set in defaultHeaders.
func TestSDKs(t *testing.T) {
	npm := npmClients(t)
	requireTool(t, "/usr/bin/node")
	st := startStandin(t, "127.0.0.2")
	usage := modelUsage{Input: 17, Output: 5, Cached: 2}
	st.SetUsage(usage)
	cfg := map[string]any{"proxy": map[string]any{"listen": "127.0.0.1:0"}, "log": map[string]any{"level": "debug"}}
	st.Configure(cfg)
	d := theSuite.startTestDaemon(t, cfg, nil)

	keys := map[string]string{}
	for _, p := range sdkProviders() {
		keys[p.name] = "sk-" + p.name + "-real-" + randomHex(t)
		theSuite.secrets.add(p.name+" key of the SDK test", keys[p.name])
		args := p.args
		if args == nil {
			args = []string{p.name}
		}
		providerAdd(t, d, keys[p.name], args...)
	}
	st.AcceptKeys(keys["anthropic"], keys["openai"], keys["gemini"], keys["llm"])
	s := d.newSession(t, "--name", "sdks")
	vars := sessionVars(t, s)
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "LLM_API_KEY"} {
		if !strings.HasPrefix(vars[k], "aileron-placeholder-") {
			t.Fatalf("session env gives %s=%q, want a placeholder", k, vars[k])
		}
	}

	for _, p := range sdkProviders() {
		t.Run(p.name, func(t *testing.T) { checkSDK(t, st, npm, vars, p, keys[p.name], usage) })
	}
	u := s.proxyURL(t)
	token, _ := u.User.Password()
	for what, leak := range map[string]string{"a placeholder": "aileron-placeholder-", "the session id": s.ID, "the session token": token} {
		if got := st.Carrying(leak); len(got) != 0 {
			t.Errorf("%d requests reached the stand-in carrying %s: %s", len(got), what, summary(got))
		}
	}
}

// checkSDK runs provider p's SDK calls and checks each got the stand-in's
// answer and usage, and that the stand-in saw one request per call with
// the real key, only, in the place the SDK put its placeholder.
func checkSDK(t *testing.T, st *standin, npm string, vars map[string]string, p sdkProvider, key string, usage modelUsage) {
	before := len(st.Requests())
	for i, res := range runSDK(t, npm, vars, p.cases) {
		c, want := p.cases[i], standinText
		if c.out == "" { // a token count or embeddings: no text, no output tokens
			want = ""
		}
		if res.Case != c.name || res.Text != want {
			t.Errorf("%s: the SDK returned %q for case %q, want %q", c.name, res.Text, res.Case, want)
		}
		if res.Usage[c.in] != float64(usage.Input) || (c.out != "" && res.Usage[c.out] != float64(usage.Output)) {
			t.Errorf("%s: the SDK parsed usage %v, want %s=%d and %s=%d", c.name, res.Usage, c.in, usage.Input, c.out, usage.Output)
		}
	}
	var calls []modelRequest // the model calls: a WebSocket's upgrade is not one
	for _, r := range st.Requests()[before:] {
		if len(r.Keys) != 1 || r.Keys["authorization"]+r.Keys["x-api-key"]+r.Keys["x-goog-api-key"] != key {
			t.Errorf("%s %s%s: the stand-in saw keys in %v, want only the real key", r.Method, r.Host, r.Path, keyPlaces(r.Keys, key))
		}
		if !(r.WebSocket && r.Method == http.MethodGet) {
			calls = append(calls, r)
		}
	}
	if len(calls) != len(p.cases) {
		t.Fatalf("the stand-in saw %d model calls, want one per case (%d): %s", len(calls), len(p.cases), summary(calls))
	}
	for i, r := range calls {
		c := p.cases[i]
		if r.Host != p.host || r.Path != c.path || r.Streamed != c.stream {
			t.Errorf("%s: the stand-in saw %s%s streamed=%v, want %s%s streamed=%v", c.name, r.Host, r.Path, r.Streamed, p.host, c.path, c.stream)
		}
		if r.Keys[c.keyAt] != key {
			t.Errorf("%s: the stand-in saw keys in %v, want the real key in %s", c.name, keyPlaces(r.Keys, key), c.keyAt)
		}
	}
}

// providerAdd runs `aileron provider add ARGS…` on d with key on stdin.
func providerAdd(t *testing.T, d *daemon, key string, args ...string) {
	t.Helper()
	out, errOut, err := d.runInput(context.Background(), key+"\n", append([]string{"provider", "add"}, args...)...)
	if err != nil {
		t.Fatalf("aileron provider add %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
}

// keyPlaces names where each key was, saying only whether it was want.
func keyPlaces(keys map[string]string, want string) map[string]string {
	out := map[string]string{}
	for place, k := range keys {
		switch {
		case k == want:
			out[place] = "the real key"
		case strings.HasPrefix(k, "aileron-placeholder-"):
			out[place] = "a placeholder"
		default:
			out[place] = "another value"
		}
	}
	return out
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// sdkResult is one line sdk.mjs prints.
type sdkResult struct {
	Case  string         `json:"case"`
	Text  string         `json:"text"`
	Usage map[string]any `json:"usage"`
}

// runSDK runs sdk.mjs for cases with /usr/bin/node, whose environment is
// vars (the session's) with only PATH and a fresh HOME added.
func runSDK(t *testing.T, npm string, vars map[string]string, cases []sdkCase) []sdkResult {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "sdks", "sdk.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{script, npm}
	for _, c := range cases {
		args = append(args, c.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // hang guard only
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/node", args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	theSuite.seen.add("node sdk.mjs "+strings.Join(args[2:], " "), nil, []byte(out.String()+errb.String()))
	if err != nil {
		t.Fatalf("node sdk.mjs %s: %v\nstdout: %s\nstderr: %s", strings.Join(args[2:], " "), err, out.String(), errb.String())
	}
	var res []sdkResult
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r sdkResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("sdk.mjs printed %q, not a JSON result line: %v", line, err)
		}
		res = append(res, r)
	}
	if len(res) != len(cases) {
		t.Fatalf("sdk.mjs printed %d results for %d cases:\n%s", len(res), len(cases), out.String())
	}
	return res
}
