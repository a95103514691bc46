package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// discoveryFQN is the connector the discovery test installs and removes.
const discoveryFQN = "local://test/discovery"

// curlAPI runs curl inside the session on $AILERON_API_URL/PATH (the
// variable as `aileron launch` sets it) with an optional If-None-Match, and
// returns the status, the ETag and the body.
func (e *toolsEnv) curlAPI(t *testing.T, path, ifNoneMatch string) (status, etag, body string) {
	t.Helper()
	script := `curl -sS -D "$1" -o "$2" -w '%{http_code}' -H "If-None-Match: $3" "$AILERON_API_URL/$4"`
	dir := t.TempDir()
	head, bodyFile := filepath.Join(dir, "h"), filepath.Join(dir, "b")
	out, errOut, code := e.launch(t, "sh", "-c", script, "sh", head, bodyFile, ifNoneMatch, path)
	if code != 0 {
		t.Fatalf("curl $AILERON_API_URL/%s: exit %d: %s", path, code, errOut)
	}
	h, _ := os.ReadFile(head)
	for _, l := range strings.Split(string(h), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "ETag") {
			etag = strings.TrimSpace(v)
		}
	}
	b, _ := os.ReadFile(bodyFile)
	return out, etag, string(b)
}

// discovery: curl in the session lists the installed operations with their
// fields and no secret; ETag and If-None-Match work; installing a connector
// changes the answer.
func (e *toolsEnv) discovery(t *testing.T) {
	status, tag, body := e.curlAPI(t, "operations", "")
	var list struct {
		Operations []map[string]any `json:"operations"`
	}
	if err := json.Unmarshal([]byte(body), &list); status != "200" || err != nil || !strings.HasPrefix(tag, `"sha256-`) {
		t.Fatalf("GET operations: %s %s %v: %s", status, tag, err, body)
	}
	var names []string
	for _, o := range list.Operations {
		names = append(names, o["connector_fqn"].(string)+" "+o["tool"].(string)+"/"+o["operation"].(string))
	}
	want := []string{toolsGoogleFQN + " gmail/messages.send", toolsLinearFQN + " linear/comment-create", toolsLinearFQN + " linear/get-issue"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("operations %v, want %v", names, want)
	}
	get := list.Operations[2]
	for k, v := range map[string]any{"version": "1.0.0", "summary": "Get one issue", "method": "GET", "path": "/issues/{id}",
		"hosts": []any{"api.linear.app:443"}, "approval_required": false, "credential": "api_key"} {
		if !reflect.DeepEqual(get[k], v) {
			t.Errorf("get-issue %s = %v, want %v", k, get[k], v)
		}
	}
	wantSchema := map[string]any{"type": "object", "required": []any{"id"},
		"properties": map[string]any{"id": map[string]any{"type": "string", "description": "Issue identifier, e.g. ENG-123"}}}
	if !reflect.DeepEqual(get["input_schema"], wantSchema) {
		t.Errorf("get-issue input_schema %v, want %v", get["input_schema"], wantSchema)
	}
	if strings.Contains(body, e.linearKey) || strings.Contains(body, "tools-linear") || strings.Contains(body, "{key}") {
		t.Errorf("discovery shows a credential, its binding or its format: %s", body)
	}
	if s, tag2, b := e.curlAPI(t, "operations", tag); s != "304" || tag2 != tag || b != "" {
		t.Errorf("If-None-Match: %s %s %q", s, tag2, b)
	}
	s, _, one := e.curlAPI(t, "operations/linear/get-issue?connector="+toolsLinearFQN, "")
	var got map[string]any
	if err := json.Unmarshal([]byte(one), &got); s != "200" || err != nil || !reflect.DeepEqual(got, get) {
		t.Errorf("GET operations/linear/get-issue: %s %s", s, one)
	}
	e.discoveryMCP(t, body)

	dir := t.TempDir()
	spec := `{"schema_version":"aileron.connector.v1","connector":{"fqn":"` + discoveryFQN + `","version":"0.1.0"},
	  "tools":[{"name":"disco","operations":[{"name":"ping","summary":"Ping","method":"GET","path":"/ping","hosts":["api.linear.app"]}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "aileron.connector.v1.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	e.d.cli(t, "connector", "install", dir)
	defer e.d.cli(t, "connector", "remove", discoveryFQN+"@0.1.0")
	s, tag3, after := e.curlAPI(t, "operations", tag)
	if s != "200" || tag3 == tag || !strings.Contains(after, `"operation": "ping"`) {
		t.Errorf("after an install: %s %s %s", s, tag3, after)
	}
}

// discoveryMCP: over the daemon's /v1/mcp, list_operations answers what
// GET /v1/operations answered (list, its body) and run_operation runs one.
func (e *toolsEnv) discoveryMCP(t *testing.T, list string) {
	cs := mcpSession(t, &mcp.StreamableClientTransport{Endpoint: "https://aileron.internal/v1/mcp", HTTPClient: goClient(t, e.s)})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_operations"})
	if err != nil || res.IsError {
		t.Fatalf("list_operations: %v %s", err, jsonString(res))
	}
	var got, want any
	_ = json.Unmarshal([]byte(jsonString(res.StructuredContent)), &got)
	_ = json.Unmarshal([]byte(list), &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("list_operations = %v\nwant GET /v1/operations = %v", got, want)
	}
	before := theSuite.up.Hits("api.linear.app", "/issues/ENG-7")
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_operation", Arguments: map[string]any{
		"connector_fqn": toolsLinearFQN, "tool": "linear", "operation": "get-issue", "args": map[string]any{"id": "ENG-7"}}})
	if err != nil || res.IsError || !strings.Contains(jsonString(res.StructuredContent), `"ISS-ENG-7"`) {
		t.Fatalf("run_operation get-issue: %v %s", err, jsonString(res))
	}
	if n := theSuite.up.Hits("api.linear.app", "/issues/ENG-7") - before; n != 1 {
		t.Errorf("upstream hits %d, want 1", n)
	}
}
