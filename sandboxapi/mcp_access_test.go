package sandboxapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// accessConnectors are the daemon's /v1/mcp and the sandbox's `aileron
// mcp`, as in TestMCPOperationTools, with a server whose request_access
// waits wait.
func accessConnectors(wait time.Duration) []opsConnector {
	return []opsConnector{
		{name: "daemon /v1/mcp", connect: func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
			h := (&MCPServer{Refresh: time.Hour, AccessWait: wait}).HTTPHandler(func(r *http.Request) (ToolBackend, error) {
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
		}},
		{name: "sandbox aileron mcp", connect: func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
			b := &HTTPBackend{APIURL: "https://" + dataplane.DefaultAPIHost + "/v1", Client: e.client(t, "s1")}
			return stdioConnector().connect(t, ctx, &MCPServer{Refresh: time.Hour, AccessWait: wait}, b, nil)
		}},
	}
}

// callInBackground calls tool name and returns a channel for its result.
func callInBackground(ctx context.Context, cs *mcp.ClientSession, name string, args any) <-chan *mcp.CallToolResult {
	return inBackground(func() *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "CallTool: " + err.Error()}}}
		}
		return res
	})
}

// TestMCPRequestAccess: request_access asks with a justification the
// admin side reads and waits; a rejection reaches the agent with the
// human's reason (a tool error), an acceptance with the rule; asking anew
// for a decided request answers at once; nothing is sent upstream.
func TestMCPRequestAccess(t *testing.T) {
	for _, c := range accessConnectors(20 * time.Second) {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			e := newSapiEnv(t, sapiOpts{})
			admin := e.withAccess()
			ctx := testCtx(t)
			cs := c.connect(t, ctx, e)
			tool := toolNames(t, ctx, cs)[RequestAccessTool]
			if tool == nil || !strings.Contains(tool.Description, "justification") || !strings.Contains(tool.Description, "20 seconds") {
				t.Fatalf("request_access tool: %+v", tool)
			}

			args := map[string]any{"method": "GET", "url": "https://api.example.com/v1/reports/42", "justification": "to read report 42\nfor the summary"}
			asked := callInBackground(ctx, cs, RequestAccessTool, args)
			p := waitProposal(t, admin, "s1", "to read report 42\nfor the summary")
			if p.Template != "/v1/reports/{id}" || p.Method != "GET" || p.Host != "api.example.com" {
				t.Fatalf("the admin side sees %+v", p)
			}
			if _, err := admin.Reject(t.Context(), p.ID, "cli:alice", "use the export instead"); err != nil {
				t.Fatal(err)
			}
			res := <-asked
			var ans AccessAnswer
			decodeStructured(t, res, &ans)
			if !res.IsError || ans.State != AccessRejected || ans.Reason != "use the export instead" ||
				!strings.Contains(texts(res), "Their reason: use the export instead") {
				t.Fatalf("request_access after a rejection: %s", texts(res))
			}
			res = call(t, ctx, cs, RequestAccessTool, args) // decided: answered at once
			if !res.IsError || !strings.Contains(texts(res), "use the export instead") {
				t.Fatalf("request_access again: %s", texts(res))
			}

			args = map[string]any{"method": "POST", "url": "https://api.example.com/v1/notes", "justification": "to leave a note"}
			asked = callInBackground(ctx, cs, RequestAccessTool, args)
			p = waitProposal(t, admin, "s1", "to leave a note")
			acceptDirectly(t, e.db, p.ID, "POST", "/v1/notes")
			res = <-asked
			if res.IsError || !strings.Contains(texts(res), "Access granted: POST https://api.example.com/v1/notes is allowed now, "+
				"each request held until a human approves it; send the request again.") {
				t.Fatalf("request_access after an acceptance: %s", texts(res))
			}
			if n := len(e.upstreamHits()); n != 0 {
				t.Errorf("request_access sent %d requests upstream", n)
			}
		})
	}
}

// TestMCPRequestAccessKeepsWaiting: with no decision the tool says to call
// again with the proposal id, which keeps waiting on it; another session's
// id and bad arguments are tool errors.
func TestMCPRequestAccessKeepsWaiting(t *testing.T) {
	for _, c := range accessConnectors(-1) {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			e := newSapiEnv(t, sapiOpts{})
			admin := e.withAccess()
			ctx := testCtx(t)
			cs := c.connect(t, ctx, e)
			res := call(t, ctx, cs, RequestAccessTool, map[string]any{"method": "DELETE", "url": "https://api.example.com/v1/items/9",
				"justification": "to clean up"})
			var ans AccessAnswer
			decodeStructured(t, res, &ans)
			if res.IsError || ans.State != AccessOpen || !strings.Contains(texts(res), `Still waiting: no human has decided yet. `+
				`Call request_access again with {"proposal_id": "`+ans.ProposalID+`"}`) {
				t.Fatalf("request_access with no decision: %s", texts(res))
			}
			res = call(t, ctx, cs, RequestAccessTool, map[string]any{"proposal_id": ans.ProposalID})
			if res.IsError || !strings.Contains(texts(res), "Still waiting") {
				t.Fatalf("request_access {proposal_id}: %s", texts(res))
			}
			if _, err := admin.Reject(t.Context(), ans.ProposalID, "cli:alice", "not now"); err != nil {
				t.Fatal(err)
			}
			res = call(t, ctx, cs, RequestAccessTool, map[string]any{"proposal_id": ans.ProposalID})
			if !res.IsError || !strings.Contains(texts(res), "not now") {
				t.Fatalf("request_access {proposal_id} after the rejection: %s", texts(res))
			}

			theirs, err := admin.Ask(t.Context(), "s2", "GET", "api.example.com", 443, "/private", "s2's own")
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				args map[string]any
				has  string
			}{
				{"another session's", map[string]any{"proposal_id": theirs.ID}, "no such proposal: " + theirs.ID},
				{"no justification", map[string]any{"method": "GET", "url": "https://api.example.com/x"}, `needs {"method", "url", "justification"}`},
				{"http", map[string]any{"method": "GET", "url": "http://api.example.com/x", "justification": "j"}, "https only"},
				{"unknown argument", map[string]any{"proposal_id": ans.ProposalID, "decision": "accept"}, "unknown field"},
			} {
				res := call(t, ctx, cs, RequestAccessTool, tc.args)
				if !res.IsError || !strings.Contains(texts(res), tc.has) {
					t.Errorf("%s: %s; want a tool error saying %q", tc.name, texts(res), tc.has)
				}
			}
			if p, _ := admin.Get(t.Context(), theirs.ID); p.State != "open" {
				t.Errorf("s2's proposal: %+v", p)
			}
		})
	}
}
