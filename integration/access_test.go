package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cliProposal is a proposal as `aileron proposals list --json` shows it.
type cliProposal struct {
	ID, Session, Method, Host, Template, State, Justification, Reason string
	Count                                                             int64
}

// proposalsOf lists the proposals of session ("" for all) with the CLI.
func proposalsOf(ctx context.Context, d *daemon, session string) ([]cliProposal, error) {
	args := []string{"proposals", "list", "--json"}
	if session != "" {
		args = append(args, "--session", session)
	}
	out, errOut, err := d.run(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("proposals list: %v: %s", err, errOut)
	}
	var list struct{ Proposals []cliProposal }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, fmt.Errorf("proposals list --json: %v: %s", err, out)
	}
	return list.Proposals, nil
}

// waitAsked waits until session has a proposal asked for with
// justification, as the admin CLI lists it, and returns it.
func waitAsked(t *testing.T, d *daemon, session, justification string) cliProposal {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for {
		list, err := proposalsOf(ctx, d, session)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			if p.Justification == justification {
				return p
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no proposal of session %s asked for with %q: %+v", session, justification, list)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// toolText is the text content of a tool result.
func toolText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// callAsync calls tool name in the background (request_access waits for
// the human) and returns a channel for its result.
func callAsync(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) <-chan *mcp.CallToolResult {
	c := make(chan *mcp.CallToolResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "CallTool: " + err.Error()}}}
		}
		c <- res
	}()
	return c
}

// TestAccessRequests drives asking for access end to end with the real
// daemon: the MCP tool request_access in `aileron mcp` inside `aileron
// launch` asks with a justification the admin CLI shows, and receives the
// human's reason for a rejection; over /v1/mcp it receives an acceptance
// (`aileron proposals accept`), after which the request goes through;
// the sandbox API asks and waits; bad requests are refused; another
// session sees none of it; nothing is sent upstream; every ask is audited.
func TestAccessRequests(t *testing.T) {
	e := argsEnv(t)
	e.s = e.d.newSession(t, "--name", "asker")
	before := theSuite.up.Hits("api.us.example.com", "/v1/reports/42")

	cmd := exec.Command(theSuite.bin, "launch", "--session", e.s.ID, "--", theSuite.bin, "mcp")
	cmd.Env = cleanEnv(e.d.home)
	cs := mcpSession(t, &mcp.CommandTransport{Command: cmd})
	const why = "to read report 42\nfor the weekly summary \u202e"
	asked := callAsync(t, cs, "request_access", map[string]any{"method": "GET", "url": "https://api.us.example.com/v1/reports/42?token=hunter2",
		"justification": why})
	p := waitAsked(t, e.d, e.s.ID, why)
	show := e.d.cli(t, "proposals", "show", p.ID)
	if !strings.Contains(show, `asked      to read report 42\nfor the weekly summary \u202e`) || strings.Contains(show, "\u202e") ||
		!strings.Contains(show, "template   /v1/reports/{id}") || strings.Contains(show, "hunter2") {
		t.Fatalf("proposals show %s:\n%s", p.ID, show)
	}
	e.d.cli(t, "proposals", "reject", p.ID, "--reason", "use the export instead")
	res := <-asked
	if !res.IsError || !strings.Contains(toolText(res), "Access rejected by a human. Their reason: use the export instead.") {
		t.Fatalf("request_access after the rejection: %s", toolText(res))
	}

	// Over /v1/mcp: an acceptance reaches the agent with its rule.
	hc := mcpSession(t, &mcp.StreamableClientTransport{Endpoint: "https://aileron.internal/v1/mcp", HTTPClient: goClient(t, e.s)})
	asked = callAsync(t, hc, "request_access", map[string]any{"method": "post", "url": "https://api.us.example.com/v1/notes",
		"justification": "to leave a note"})
	p = waitAsked(t, e.d, e.s.ID, "to leave a note")
	accepted := e.d.cli(t, "proposals", "accept", p.ID, "--approval", "none", "--connector", "asker")
	res = <-asked
	if res.IsError || !strings.Contains(toolText(res), "Access granted: POST https://api.us.example.com/v1/notes is allowed now; send the request again.") ||
		!strings.Contains(toolText(res), `"connector":"local://learned/asker@`) {
		t.Fatalf("request_access after the acceptance (%s): %s", accepted, toolText(res))
	}
	// And the request it asked for now goes through.
	notes := theSuite.up.Hits("api.us.example.com", "/v1/notes")
	if st, _, b := goDo(t, goClient(t, e.s), "POST", "https://api.us.example.com/v1/notes", `{"text":"hi"}`); st == 403 {
		t.Fatalf("the accepted request is still refused: %d %s", st, b)
	}
	if theSuite.up.Hits("api.us.example.com", "/v1/notes") != notes+1 {
		t.Error("the accepted request did not reach the upstream once")
	}

	e.sandboxAPIAsks(t)
	if theSuite.up.Hits("api.us.example.com", "/v1/reports/42") != before {
		t.Error("asking for access sent a request upstream")
	}
	lines := waitAudit(t, e.d, "the asks' proposal.requested lines", func(ls []auditLine) bool {
		n := 0
		for _, l := range ls {
			if l.str("event") == "proposal.requested" && l.str("session") == e.s.ID {
				n++
			}
		}
		return n == 4
	})
	for _, l := range lines {
		if l.str("event") == "proposal.requested" && l.detail("proposal_id") == "" {
			t.Errorf("proposal.requested without a proposal id: %s", l.Raw)
		}
		if strings.Contains(string(l.Raw), "hunter2") {
			t.Errorf("an audit line keeps the query value: %s", l.Raw)
		}
	}
}

// sandboxAPIAsks: POST /v1/access-requests asks and waits for the human,
// GET keeps waiting, bad requests are refused 400, and another session's
// request is 404.
func (e *toolsEnv) sandboxAPIAsks(t *testing.T) {
	c := goClient(t, e.s)
	st, _, b := goDo(t, c, "POST", "https://aileron.internal/v1/access-requests",
		`{"method":"DELETE","url":"https://api.us.example.com/v1/items/9","justification":"to clean up item 9"}`)
	var ans struct {
		ProposalID string `json:"proposal_id"`
		State      string `json:"state"`
		Template   string `json:"template"`
		Reason     string `json:"reason"`
	}
	if err := json.Unmarshal(b, &ans); err != nil || st != 202 || ans.State != "open" || ans.Template != "/v1/items/{id}" {
		t.Fatalf("POST /v1/access-requests: %d %s", st, b)
	}
	type answer struct {
		st int
		b  []byte
	}
	waited := make(chan answer, 1)
	go func() {
		req, _ := json.Marshal(map[string]any{"method": "DELETE", "url": "https://api.us.example.com/v1/items/10",
			"justification": "to clean up item 10", "wait_seconds": 60})
		resp, err := c.Post("https://aileron.internal/v1/access-requests", "application/json", strings.NewReader(string(req)))
		if err != nil {
			waited <- answer{0, []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		waited <- answer{resp.StatusCode, data}
	}()
	waitAsked(t, e.d, e.s.ID, "to clean up item 10")
	e.d.cli(t, "proposals", "reject", ans.ProposalID, "--reason", "items are kept")
	got := <-waited
	if err := json.Unmarshal(got.b, &ans); err != nil || got.st != 200 || ans.State != "rejected" || ans.Reason != "items are kept" {
		t.Fatalf("POST /v1/access-requests waiting: %d %s", got.st, got.b)
	}
	st, _, b = goDo(t, c, "GET", "https://aileron.internal/v1/access-requests/"+ans.ProposalID+"?wait_seconds=5", "")
	if st != 200 || !strings.Contains(string(b), `"items are kept"`) {
		t.Fatalf("GET /v1/access-requests/%s: %d %s", ans.ProposalID, st, b)
	}
	other := e.d.newSession(t, "--name", "other")
	if st, _, b := goDo(t, goClient(t, other), "GET", "https://aileron.internal/v1/access-requests/"+ans.ProposalID, ""); st != 404 {
		t.Errorf("another session's GET: %d %s", st, b)
	}
	for _, body := range []string{
		`{"method":"GET","url":"http://api.us.example.com/x","justification":"j"}`,
		`{"method":"GET","url":"https://user:pw@api.us.example.com/x","justification":"j"}`,
		`{"method":"GET","url":"https://api.us.example.com/x","justification":""}`,
		`{"method":"GET","url":"https://api.us.example.com/x","justification":"j","wait_seconds":3600}`,
	} {
		if st, _, b := goDo(t, c, "POST", "https://aileron.internal/v1/access-requests", body); st != 400 || !strings.Contains(string(b), "invalid_argument") {
			t.Errorf("POST %s: %d %s", body, st, b)
		}
	}
	for _, try := range []struct{ method, url string }{
		{"POST", "https://aileron.internal/v1/access-requests/" + ans.ProposalID + "/accept"},
		{"POST", "https://aileron.internal/v1/proposals/" + ans.ProposalID + "/accept"},
		{"PATCH", "https://aileron.internal/v1/access-requests/" + ans.ProposalID},
	} {
		if st, _, b := goDo(t, c, try.method, try.url, `{"state":"accepted"}`); st != 404 && st != 405 {
			t.Errorf("%s %s from the sandbox: %d %s", try.method, try.url, st, b)
		}
	}
}
