package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// providerHosts are the model providers' hosts (the test PKI covers them),
// resolved to the test's fake upstream.
var providerHosts = []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com", "llm.example.com"}

// providerEnv starts a daemon of t's own whose provider hosts all reach one
// recording fake upstream (the "far internet"), with the credential tests'
// client scripts.
func (s *suite) providerEnv(t *testing.T) *credEnv {
	t.Helper()
	dir := t.TempDir()
	cert, rootPath, roots, err := newRuntimePKI(dir, providerHosts)
	if err != nil {
		t.Fatal(err)
	}
	up, err := startCredUpstream(cert, &s.secrets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(up.Close)
	for name, src := range map[string]string{"client.py": credClientPy, "client.js": credClientJS} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res := map[string]string{"llm.example.com:8443": up.Addr}
	for _, h := range providerHosts {
		res[h+":443"] = up.Addr
	}
	cfg := map[string]any{
		"proxy":    map[string]any{"listen": "127.0.0.1:0"},
		"upstream": map[string]any{"resolve": res, "ca_files": []string{rootPath}},
		"egress":   map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
	}
	return &credEnv{d: s.startTestDaemon(t, cfg, nil), up: up, roots: roots, scripts: dir}
}

// addProvider runs `aileron provider add ARGS…` with key on stdin, as a
// user would.
func addProvider(t *testing.T, e *credEnv, key string, args ...string) string {
	t.Helper()
	out, errOut, err := e.d.runInput(context.Background(), key+"\n", append([]string{"provider", "add"}, args...)...)
	if err != nil {
		t.Fatalf("aileron provider add %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// placed is where a provider request carries its key and where the
// upstream must see the real one.
type placed struct {
	name          string
	method, url   string
	header        map[string]string
	where, wantAt string // where: "header NAME" or "query NAME"; wantAt: the value the upstream must see there
	key           string // the real key, which must appear nowhere else
}

// TestProviders adds the providers with `aileron provider add` (key on
// stdin), then sends requests through curl and Python requests with the
// session's placeholder as x-api-key, Authorization: Bearer,
// x-goog-api-key and ?key=: the upstream sees the real key in that same
// place and nowhere else. The agents' own endpoints are refused and
// audited; a placeholder where the spec allows none is refused.
func TestProviders(t *testing.T) {
	e := theSuite.providerEnv(t)
	anthropicKey := newSecret("anthropic key", "sk-ant-api03-", "")
	openaiKey := newSecret("openai key", "sk-proj-", "")
	geminiKey := newSecret("gemini key", "AIza", "")
	vllmKey := newSecret("vllm key", "vllm-", "")
	addProvider(t, e, "sk-ant-api03-old-"+randHex(8), "anthropic")
	addProvider(t, e, anthropicKey, "anthropic") // again: the key is updated
	addProvider(t, e, openaiKey, "openai")
	addProvider(t, e, geminiKey, "gemini")
	out := addProvider(t, e, vllmKey, "openai-compatible", "--name", "vllm", "--host", "llm.example.com:8443")
	if !strings.Contains(out, "OPENAI_BASE_URL=https://llm.example.com:8443/v1") || !strings.Contains(out, "VLLM_API_KEY") {
		t.Errorf("provider add openai-compatible does not name its variables: %q", out)
	}
	checkProviderList(t, e)
	_, errOut, err := e.d.runInput(context.Background(), "k\n", "provider", "add", "openai-compatible", "--name", "router",
		"--host", "router.example.com", "--env", "OPENAI_API_KEY")
	if err == nil || !strings.Contains(errOut, "OPENAI_API_KEY already carries the placeholder of credential openai") ||
		!strings.Contains(errOut, "--env") {
		t.Errorf("provider add with a taken variable: %v, %q; want a refusal naming the variable and the fix", err, errOut)
	}
	if strings.Contains(e.d.cli(t, "connector", "list"), "openai-compatible/router") {
		t.Error("a refused provider add installed its package")
	}

	s := e.d.newSession(t)
	vars := sessionVars(t, s)
	for _, v := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "VLLM_API_KEY"} {
		if !strings.HasPrefix(vars[v], "aileron-placeholder-") {
			t.Errorf("session env gives %s = %q, want a placeholder", v, vars[v])
		}
	}
	if vars["GEMINI_API_KEY"] != vars["GOOGLE_API_KEY"] || vars["OPENAI_API_KEY"] != vars["CODEX_API_KEY"] {
		t.Error("the variables of one binding got different placeholders")
	}
	const gen = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
	cases := []placed{
		{name: "anthropic x-api-key", method: "POST", url: "https://api.anthropic.com/v1/messages",
			header: map[string]string{"x-api-key": "${ANTHROPIC_API_KEY}"}, where: "header X-Api-Key", wantAt: anthropicKey, key: anthropicKey},
		{name: "anthropic bearer", method: "POST", url: "https://api.anthropic.com/v1/messages",
			header: map[string]string{"Authorization": "Bearer ${ANTHROPIC_API_KEY}"}, where: "header Authorization", wantAt: "Bearer " + anthropicKey, key: anthropicKey},
		{name: "anthropic no key", method: "GET", url: "https://api.anthropic.com/v1/models",
			where: "header X-Api-Key", wantAt: anthropicKey, key: anthropicKey},
		{name: "openai bearer", method: "POST", url: "https://api.openai.com/v1/chat/completions",
			header: map[string]string{"Authorization": "Bearer ${CODEX_API_KEY}"}, where: "header Authorization", wantAt: "Bearer " + openaiKey, key: openaiKey},
		{name: "gemini x-goog-api-key", method: "POST", url: gen,
			header: map[string]string{"x-goog-api-key": "${GEMINI_API_KEY}"}, where: "header X-Goog-Api-Key", wantAt: geminiKey, key: geminiKey},
		{name: "gemini query key", method: "POST", url: gen + "?key=${GOOGLE_API_KEY}",
			where: "query key", wantAt: geminiKey, key: geminiKey},
		{name: "openai-compatible bearer", method: "POST", url: "https://llm.example.com:8443/v1/chat/completions",
			header: map[string]string{"Authorization": "Bearer ${VLLM_API_KEY}"}, where: "header Authorization", wantAt: "Bearer " + vllmKey, key: vllmKey},
	}
	for _, c := range credClients("curl", "python_requests") {
		for _, pc := range cases {
			t.Run(c.name+"/"+pc.name, func(t *testing.T) {
				id := rid(t, pc.name)
				body := ""
				if pc.method == http.MethodPost {
					body = `{"model":"m"}`
				}
				res := c.send(t, e, s, credReq{id: id, method: pc.method, url: pc.url, body: body, header: pc.header})
				if res.Status != http.StatusOK {
					t.Fatalf("status %d: %s", res.Status, trunc(res.Body))
				}
				expectKeyOnlyAt(t, e, pc, id)
			})
		}
		t.Run(c.name+"/refused", func(t *testing.T) { providerRefusals(t, e, s, c) })
	}
	t.Run("responses_websocket", func(t *testing.T) { providerWebSocket(t, e, s, openaiKey) })
	t.Run("subscription", func(t *testing.T) { providerSubscription(t, e) })
}

// expectKeyOnlyAt checks the one request id reached the upstream with
// pc.wantAt at pc.where, and the key (or a placeholder) nowhere else.
func expectKeyOnlyAt(t *testing.T, e *credEnv, pc placed, id string) {
	t.Helper()
	host := hostOnly(strings.SplitN(strings.TrimPrefix(pc.url, "https://"), "/", 2)[0])
	rec, err := e.onlyRecord(host, id)
	if err != nil {
		t.Fatal(err)
	}
	kind, name, _ := strings.Cut(pc.where, " ")
	h := rec.Header.Clone()
	q := parseQuery(rec.RawQuery)
	var got []string
	if kind == "header" {
		got = h.Values(name)
		h.Del(name)
	} else {
		got = q[name]
		delete(q, name)
	}
	if len(got) != 1 || got[0] != pc.wantAt {
		t.Errorf("%s: the upstream saw %s, want exactly the real key there", pc.where, describeValues(got))
	}
	rest, _ := json.Marshal(map[string]any{"headers": h, "query": q, "path": rec.Path})
	if strings.Contains(string(rest), pc.key) || strings.Contains(string(rest), "aileron-placeholder-") {
		t.Errorf("the key or a placeholder reached the upstream outside %s: %s", pc.where, rest)
	}
}

// parseQuery splits a raw query into decoded values by name.
func parseQuery(raw string) map[string][]string {
	out := map[string][]string{}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		out[k] = append(out[k], v)
	}
	return out
}

// providerRefusals sends what Claude Code calls beside the model (its own
// settings and event logging) and a placeholder where the Anthropic spec
// allows none: each is refused, never reaches the upstream, and is audited.
func providerRefusals(t *testing.T, e *credEnv, s *session, c credClient) {
	for _, r := range []struct {
		name, method, url, reason string
		header                    map[string]string
	}{
		{"claude code settings", "GET", "https://api.anthropic.com/api/claude_code/settings", "no_matching_operation", nil},
		{"claude code policy limits", "GET", "https://api.anthropic.com/api/claude_code/policy_limits", "no_matching_operation", nil},
		{"event logging", "POST", "https://api.anthropic.com/api/event_logging/batch", "no_matching_operation", nil},
		{"settings with the placeholder", "GET", "https://api.anthropic.com/api/claude_code/settings", "placeholder_misuse",
			map[string]string{"x-api-key": "${ANTHROPIC_API_KEY}"}},
		{"placeholder in a place the spec does not allow", "POST", "https://api.anthropic.com/v1/messages", "placeholder_misuse",
			map[string]string{"x-goog-api-key": "${ANTHROPIC_API_KEY}"}},
		{"another provider's placeholder", "POST", "https://api.anthropic.com/v1/messages", "placeholder_misuse",
			map[string]string{"x-api-key": "${OPENAI_API_KEY}"}},
	} {
		id := rid(t, r.name)
		res := c.send(t, e, s, credReq{id: id, method: r.method, url: r.url, header: r.header})
		assertDenial(t, c.name+" "+r.name, res.Status, res.Body, http.StatusForbidden, "capability_denied", r.reason)
		e.expectNeverReached(t, "api.anthropic.com", id)
		path := strings.TrimPrefix(r.url, "https://api.anthropic.com")
		waitAudit(t, e.d, r.name+" refused", func(lines []auditLine) bool {
			for _, l := range lines {
				if l.M["path"] == path && l.M["reason"] == r.reason && l.M["session"] == s.ID {
					return true
				}
			}
			return false
		})
	}
}

// checkProviderList checks `provider list --json` shows every provider
// installed and bound with its variables.
func checkProviderList(t *testing.T, e *credEnv) {
	t.Helper()
	var got struct {
		Providers []struct {
			Name      string   `json:"name"`
			Installed bool     `json:"installed"`
			Bound     bool     `json:"bound"`
			Env       []string `json:"env"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(e.d.cli(t, "provider", "list", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY,CODEX_API_KEY",
		"gemini": "GEMINI_API_KEY,GOOGLE_API_KEY", "vllm": "VLLM_API_KEY"}
	for _, p := range got.Providers {
		if env, ok := want[p.Name]; ok && p.Installed && p.Bound && strings.Join(p.Env, ",") == env {
			delete(want, p.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("provider list --json lacks %v installed and bound: %+v", want, got.Providers)
	}
	table := e.d.cli(t, "provider", "list")
	for _, row := range [][]string{{"gemini", "hub://aileron/gemini", "yes", "yes", "GEMINI_API_KEY,GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"},
		{"vllm", "local://openai-compatible/vllm", "yes", "yes", "VLLM_API_KEY", "OPENAI_BASE_URL"}} {
		if !containsFields(table, row) {
			t.Errorf("provider list lacks the row %v:\n%s", row, table)
		}
	}
}

// containsFields reports whether a line of text has exactly the fields
// want, however they are spaced.
func containsFields(text string, want []string) bool {
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Join(strings.Fields(line), " ") == strings.Join(want, " ") {
			return true
		}
	}
	return false
}

// providerSubscription rebinds Anthropic to a Claude Code subscription
// token: a new session gets CLAUDE_CODE_OAUTH_TOKEN, and the token goes as
// Authorization: Bearer, never as x-api-key.
func providerSubscription(t *testing.T, e *credEnv) {
	token := newSecret("claude code token", "sk-ant-oat01-", "")
	addProvider(t, e, token, "anthropic", "--subscription")
	s := e.d.newSession(t)
	vars := sessionVars(t, s)
	if !strings.HasPrefix(vars["CLAUDE_CODE_OAUTH_TOKEN"], "aileron-placeholder-") || vars["ANTHROPIC_API_KEY"] != "" {
		t.Fatalf("session env after --subscription: CLAUDE_CODE_OAUTH_TOKEN=%q ANTHROPIC_API_KEY=%q", vars["CLAUDE_CODE_OAUTH_TOKEN"], vars["ANTHROPIC_API_KEY"])
	}
	for _, c := range credClients("curl", "python_requests") {
		pc := placed{name: "subscription", method: "POST", url: "https://api.anthropic.com/v1/messages",
			header: map[string]string{"Authorization": "Bearer ${CLAUDE_CODE_OAUTH_TOKEN}"}, where: "header Authorization", wantAt: "Bearer " + token, key: token}
		id := rid(t, c.name+" subscription")
		res := c.send(t, e, s, credReq{id: id, method: pc.method, url: pc.url, body: `{"model":"m"}`, header: pc.header})
		if res.Status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", c.name, res.Status, trunc(res.Body))
		}
		expectKeyOnlyAt(t, e, pc, id)
	}
}

// providerWebSocket opens the Responses WebSocket (GET /v1/responses,
// upgraded) with the placeholder as Authorization: Bearer: the upstream
// sees the real key there and nowhere else, and a message goes both ways.
func providerWebSocket(t *testing.T, e *credEnv, s *session, key string) {
	dialer := websocket.Dialer{Proxy: http.ProxyURL(s.proxyURL(t)), TLSClientConfig: &tls.Config{RootCAs: s.caPool(t)},
		HandshakeTimeout: 30 * time.Second}
	id := rid(t, "ws")
	h := http.Header{"Authorization": {"Bearer " + sessionVars(t, s)["OPENAI_API_KEY"]}, "X-Test-Req": {id}}
	conn, resp, err := dialer.Dial("wss://api.openai.com/v1/responses", h)
	if err != nil {
		t.Fatalf("Responses WebSocket through the proxy: %v (status %s)", err, statusOf(resp))
	}
	defer conn.Close()
	msg := []byte(`{"type":"response.create","model":"m"}`)
	if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
		t.Fatal(err)
	}
	if _, got, err := conn.ReadMessage(); err != nil || string(got) != string(msg) {
		t.Fatalf("echo = %q, %v", got, err)
	}
	expectKeyOnlyAt(t, e, placed{url: "https://api.openai.com/v1/responses", where: "header Authorization", wantAt: "Bearer " + key, key: key}, id)
}
