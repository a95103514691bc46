package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// opsConnector connects an MCP client to the env's session s1 the way an
// agent does.
type opsConnector struct {
	name    string
	connect func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession
}

// daemonMCP is /v1/mcp of the sandbox API, wired as the daemon wires it,
// reached through the proxy as session s1.
func daemonMCP() opsConnector {
	return opsConnector{name: "daemon /v1/mcp", connect: func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
		h := (&MCPServer{Refresh: time.Hour}).HTTPHandler(func(r *http.Request) (ToolBackend, error) {
			sess, ok := dataplane.SessionFrom(r.Context())
			if !ok {
				return nil, errors.New("no session")
			}
			return e.api.Backend(sess, e.runner.Backend(sess)), nil
		})
		e.api.MCP = h
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: "https://" + dataplane.DefaultAPIHost + "/v1/mcp", HTTPClient: e.client(t, "s1")}, nil)
		if err != nil {
			t.Fatalf("client Connect: %v", err)
		}
		t.Cleanup(func() { cs.Close(); h.Close() })
		return cs
	}}
}

// sandboxMCP is `aileron mcp` in the sandbox: stdio, over HTTPBackend
// through the proxy as session s1.
func sandboxMCP() opsConnector {
	return opsConnector{name: "sandbox aileron mcp", connect: func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
		b := &HTTPBackend{APIURL: "https://" + dataplane.DefaultAPIHost + "/v1", Client: e.client(t, "s1")}
		return stdioConnector().connect(t, ctx, &MCPServer{Refresh: time.Hour}, b, nil)
	}}
}

// TestMCPOperationTools: list_operations answers what GET /v1/operations
// does, run_operation runs through the run endpoint's path, and refusals
// are tool errors carrying Aileron's reason.
func TestMCPOperationTools(t *testing.T) {
	for _, c := range []opsConnector{daemonMCP(), sandboxMCP()} {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			e := newSapiEnv(t, sapiOpts{})
			e.installNotes(t, "1.2.0", "Send a note")
			ctx := testCtx(t)
			cs := c.connect(t, ctx, e)

			tools := toolNames(t, ctx, cs)
			run, list := tools[RunOperationTool], tools[ListOperationsTool]
			if run == nil || list == nil || tools[CheckActionStatusTool] == nil || tools["send_email"] == nil {
				t.Fatalf("tools %v", tools)
			}
			schema := jsonNorm(t, run.InputSchema).(map[string]any)
			if !reflect.DeepEqual(schema["required"], []any{"connector_fqn", "tool", "operation"}) {
				t.Errorf("run_operation schema %v", schema)
			}

			var want OperationList
			e.do(t, "s1", "GET", "/v1/operations", nil).decode(t, &want)
			res := call(t, ctx, cs, ListOperationsTool, nil)
			if res.IsError || !reflect.DeepEqual(jsonNorm(t, res.StructuredContent), jsonNorm(t, want)) {
				t.Fatalf("list_operations = %s\nwant %v", texts(res), jsonNorm(t, want))
			}
			if strings.Contains(texts(res), "purge") {
				t.Errorf("list_operations shows the internal operation: %s", texts(res))
			}
			res = call(t, ctx, cs, ListOperationsTool, map[string]any{"tool": "notes"})
			if got := jsonNorm(t, res.StructuredContent); !reflect.DeepEqual(got, jsonNorm(t, OperationList{Operations: want.Operations[len(want.Operations)-1:]})) {
				t.Errorf("list_operations {tool: notes} = %v", got)
			}
			res = call(t, ctx, cs, ListOperationsTool, map[string]any{"connector_fqn": "local://x/y"})
			if !res.IsError || !strings.Contains(texts(res), "not available to this session") {
				t.Errorf("unknown connector: %s", texts(res))
			}

			res = call(t, ctx, cs, RunOperationTool, map[string]any{"connector_fqn": itemsFQN, "tool": "items", "operation": "get",
				"args": map[string]any{"id": "a b"}})
			var out OperationResult
			decodeStructured(t, res, &out)
			hits := e.upstreamHits()
			if res.IsError || out.Status != "ok" || out.AuditID == "" || out.UpstreamStatus != 200 ||
				len(hits) != 1 || hits[0].URI != "/v1/items/a%20b" {
				t.Fatalf("run_operation items/get = %s; upstream saw %+v", texts(res), hits)
			}

			for _, tc := range []struct {
				name string
				args map[string]any
				has  []string
			}{
				{"approval", map[string]any{"connector_fqn": itemsFQN, "tool": "items", "operation": "delete", "args": map[string]any{"id": "x"}},
					[]string{"approval_pending", "needs human approval", "https://aileron.test/approvals/", "call run_operation again"}},
				{"unknown", map[string]any{"connector_fqn": itemsFQN, "tool": "items", "operation": "nope"}, []string{"not_found", `no operation "nope"`}},
				{"out of args", map[string]any{"connector_fqn": itemsFQN, "tool": "items", "operation": "get"}, []string{"invalid_argument", `"id"`}},
				{"missing tool", map[string]any{"connector_fqn": itemsFQN, "operation": "get"}, []string{"list_operations"}},
			} {
				res := call(t, ctx, cs, RunOperationTool, tc.args)
				for _, s := range tc.has {
					if !res.IsError || !strings.Contains(texts(res), s) {
						t.Errorf("%s: %s lacks %q", tc.name, texts(res), s)
					}
				}
			}
			if n := len(e.upstreamHits()); n != 1 {
				t.Errorf("upstream reached %d times, want once", n)
			}
		})
	}
}

func decodeStructured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("structured content %s: %v (%s)", data, err, texts(res))
	}
}

// TestMCPActionCannotTakeOperationToolNames: the operation tools' names
// are the server's own.
func TestMCPActionCannotTakeOperationToolNames(t *testing.T) {
	for _, name := range []string{ListOperationsTool, RunOperationTool, CheckActionStatusTool, RequestAccessTool} {
		if err := checkToolName(name); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("checkToolName(%q) = %v", name, err)
		}
	}
}
