package sandboxapi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
)

// twoStepAction looks issue ${args.id} up, then the issue the first step
// answered with; TIMEOUT is a top-level line (or none).
const twoStepAction = `+++
name = "two-step"
version = "1.0.0"
TIMEOUT
[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "self"
capabilities = ["network:api.linear.test:443", "credential:api_key"]

[[execute]]
id = "first"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"

[execute.inputs]
id = "${args.id}"

[[execute]]
id = "second"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"

[execute.inputs]
id = "${first.id}"

[[inputs]]
name = "id"
+++
Looks an issue up twice.
`

// twoStep parses twoStepAction with timeout line tl, as installed with the
// Linear test package.
func twoStep(t *testing.T, tl string) action.Installed {
	t.Helper()
	m, err := action.Parse("two-step/action.md", []byte(strings.Replace(twoStepAction, "TIMEOUT", tl, 1)))
	if err != nil {
		t.Fatal(err)
	}
	return action.Installed{Manifest: m, Connector: tdLinearFQN, ConnectorVersion: "1.0.0", Hash: tdHash("linear")}
}

// waitFor receives from ch, failing the test after 20 seconds.
func waitFor(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// runningRunID returns the id of the one running run.
func (e *sapiEnv) runningRunID(t *testing.T) string {
	t.Helper()
	var id string
	if err := e.db.QueryRowContext(context.Background(), `SELECT id FROM action_runs WHERE status = 'running'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// secondStepHits counts requests of the second step (for an issue the
// first step answered with).
func (e *sapiEnv) secondStepHits() int {
	n := 0
	for _, h := range e.upstreamHits() {
		if strings.HasPrefix(h.URI, "/issues/canon-") {
			n++
		}
	}
	return n
}

// TestActionRunAuditTree: every audit line of a run carries its run_id; the
// steps' request lines and the run's final line hang under its
// action.started line, which has an audit_id of its own.
func TestActionRunAuditTree(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{extra: []action.Installed{twoStep(t, "")}})
	res, err := e.runner.Run(context.Background(), e.sessions["s1"], "two-step", map[string]any{"id": "ENG-1"})
	if err != nil || res.Status != actions.StatusCompleted || res.RunID == "" || len(res.AuditIDs) != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	e.runner.Close() // the events are written before Run answers; Close orders them before the read below
	var root string
	var names []string
	steps := map[string]bool{}
	for _, ev := range trailOf(t, e.auditLines(), audit.Filter{}) {
		if ev.RunID != res.RunID {
			if ev.Name == audit.EventProxied || ev.Name == audit.EventCompleted {
				t.Errorf("a step line without the run id: %+v", ev)
			}
			continue
		}
		names = append(names, string(ev.Name))
		switch ev.Name {
		case audit.EventActionStarted:
			root = ev.AuditID
			if root == "" || ev.ParentAuditID != "" || ev.Session != "s1" || ev.Details["timeout"] != "2m0s" {
				t.Errorf("started line %+v", ev)
			}
		case audit.EventProxied, audit.EventCompleted:
			steps[ev.AuditID] = true
			if ev.ParentAuditID != root || root == "" {
				t.Errorf("step line %s %s has parent %q, want the started line's %q", ev.Name, ev.AuditID, ev.ParentAuditID, root)
			}
		case audit.EventActionCompleted:
			if ev.ParentAuditID != root {
				t.Errorf("completed line has parent %q, want %q", ev.ParentAuditID, root)
			}
		}
	}
	want := "action.started connector.proxy.proxied connector.proxy.completed connector.proxy.proxied connector.proxy.completed action.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("the run's lines: %s\nwant %s", got, want)
	}
	for _, id := range res.AuditIDs {
		if !steps[id] {
			t.Errorf("result audit id %s is not a step line of the run", id)
		}
	}
	// Read back by run, the lines form the tree: the root, the steps under it.
	var tree audit.RunTree
	var depths []int
	for _, ev := range trailOf(t, e.auditLines(), audit.Filter{Run: res.RunID}) {
		depths = append(depths, tree.Depth(&ev))
	}
	if got := fmt.Sprint(depths); got != "[0 1 1 1 1 1]" {
		t.Errorf("depths of the run's lines %s, want [0 1 1 1 1 1]", got)
	}
}

// trailOf writes lines to a real audit trail and reads back those f
// passes, as aileron audit tail does.
func trailOf(t *testing.T, lines []audit.Event, f audit.Filter) []audit.Event {
	t.Helper()
	dir := t.TempDir()
	l := &audit.Log{Dir: dir}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	for _, ev := range lines {
		if err := l.Write(&ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	err := audit.Tail(context.Background(), dir, false, f, func(_ []byte, ev *audit.Event) error {
		out = append(out, *ev)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestActionRunDeadlineCutsSlowStep: a step still in flight at the run's
// deadline is cancelled upstream, the run fails deadline_exceeded naming
// it, and the next step never starts.
func TestActionRunDeadlineCutsSlowStep(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{extra: []action.Installed{twoStep(t, `timeout = "1s"`)}})
	res, err := e.runner.Run(context.Background(), e.sessions["s1"], "two-step", map[string]any{"id": "stall"})
	if err != nil || res.Status != actions.StatusFailed || res.Error == nil || res.Error.Reason != "deadline_exceeded" ||
		res.Error.Step != "first" || !strings.Contains(res.Error.Message, "cancelled upstream") {
		t.Fatalf("%+v %v", res, err)
	}
	waitFor(t, e.stalled, "the slow step's request")
	waitFor(t, e.unstalled, "the upstream to see the request end")
	if n := e.secondStepHits(); n != 0 {
		t.Fatalf("the second step was sent %d times", n)
	}
	if got, err := e.runner.Result(context.Background(), e.sessions["s1"], res.RunID); err != nil || got.Status != actions.StatusFailed {
		t.Fatalf("stored %+v %v", got, err)
	}
}

// TestActionRunCancelFromSandboxAPI: the session cancels its run in flight
// (another session cannot); the step's request ends upstream, no later
// step starts, the run answers cancelled, and nothing runs it again: not a
// poll, not a second cancel, not a new runner on the same database.
func TestActionRunCancelFromSandboxAPI(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{extra: []action.Installed{twoStep(t, "")}})
	if r := e.do(t, "s1", "POST", "/v1/actions/two-step/run?cancel=later", map[string]any{"id": "x"}); r.status != 400 ||
		!strings.Contains(r.envelope(t).Message, "cancel=on_disconnect") {
		t.Fatalf("cancel=later: %d %s", r.status, r.body)
	}
	type answer struct {
		status int
		res    actions.Result
	}
	ran := make(chan answer, 1)
	go func() {
		status, res := e.runAction(t, "s1", "two-step", map[string]any{"id": "stall"})
		ran <- answer{status, res}
	}()
	waitFor(t, e.stalled, "the first step's request")
	id := e.runningRunID(t)
	if r := e.do(t, "s2", "POST", "/v1/action-runs/"+id+"/cancel", nil); r.status != 404 {
		t.Fatalf("another session's cancel: %d %s", r.status, r.body)
	}
	r := e.do(t, "s1", "POST", "/v1/action-runs/"+id+"/cancel", nil)
	var got actions.Result
	r.decode(t, &got)
	if r.status != 200 || got.Status != actions.StatusCancelled || got.RunID != id || got.Error == nil || got.Error.Reason != "cancelled" {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	waitFor(t, e.unstalled, "the upstream to see the request end")
	var a answer
	select {
	case a = <-ran:
	case <-time.After(20 * time.Second):
		t.Fatal("the run endpoint did not answer after the cancel")
	}
	if a.status != 200 || a.res.Status != actions.StatusCancelled || a.res.Error == nil || a.res.Error.Step != "first" || a.res.RunID != id {
		t.Fatalf("run answered %d %+v", a.status, a.res)
	}
	r = e.do(t, "s1", "POST", "/v1/action-runs/"+id+"/cancel", nil)
	r.decode(t, &got)
	if r.status != 200 || got.Status != actions.StatusCancelled || got.Error == nil || got.Error.Step != "first" {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
	r2 := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: e.runner.Catalog}
	t.Cleanup(func() { r2.Close() })
	if got, err := r2.Result(context.Background(), e.sessions["s1"], id); err != nil || got.Status != actions.StatusCancelled {
		t.Fatalf("after a restart: %+v %v", got, err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if n, all := e.secondStepHits(), len(e.upstreamHits()); n != 0 || all != 1 {
		t.Fatalf("upstream got %d requests, %d of the second step", all, n)
	}
}

// TestActionRunCancelWhilePending: a run cancelled while it waits for its
// approval never runs, though the approval is given afterwards, and an
// identical run cannot use that approval either.
func TestActionRunCancelWhilePending(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	_, res := e.runAction(t, "s1", "send-email", sendArgs)
	got, cancelled, err := e.runner.Cancel(context.Background(), nil, res.RunID, "cli:tester")
	if err != nil || !cancelled || got.Status != actions.StatusCancelled || !strings.Contains(got.Message, "no longer runs it") {
		t.Fatalf("%+v %v %v", got, cancelled, err)
	}
	if err := e.store.Approve(t.Context(), res.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	if _, again := e.runAction(t, "s1", "send-email", sendArgs); again.Status != actions.StatusCancelled {
		t.Fatalf("an identical run after the approval: %+v", again)
	}
	if _, r := e.actionResult(t, "s1", res.ApprovalID); r.Status != actions.StatusCancelled {
		t.Fatalf("result %+v", r)
	}
	if err := e.runner.Close(); err != nil { // waits for the approval events' work
		t.Fatal(err)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 0 {
		t.Fatalf("a cancelled run sent %d requests", n)
	}
	if _, again, err := e.runner.Cancel(context.Background(), nil, res.RunID, "cli:tester"); err != nil || again {
		t.Fatalf("cancelling a finished run again: %v %v", again, err)
	}
}

// TestActionRunCancelFromMCPClient: an MCP client cancelling its tool call
// (the go-sdk sends notifications/cancelled) cancels the run itself: the
// step in flight ends upstream and no later step starts. Both servers: the
// daemon's (Streamable HTTP, the runner in process) and the sandbox's
// (`aileron mcp`, over the sandbox API through the proxy).
func TestActionRunCancelFromMCPClient(t *testing.T) {
	for _, tc := range []struct {
		name    string
		connect func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession
	}{
		{"daemon streamable HTTP", func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
			return httpConnector().connect(t, ctx, &MCPServer{}, e.runner.Backend(e.sessions["s1"]), nil)
		}},
		{"sandbox over the sandbox API", func(t *testing.T, ctx context.Context, e *sapiEnv) *mcp.ClientSession {
			b := &HTTPBackend{APIURL: "https://" + dataplane.DefaultAPIHost + "/v1", Client: e.client(t, "s1")}
			return inMemoryConnector("2025-11-25").connect(t, ctx, &MCPServer{}, b, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSapiEnv(t, sapiOpts{extra: []action.Installed{twoStep(t, "")}})
			ctx := testCtx(t)
			cs := tc.connect(t, ctx, e)
			callCtx, cancel := context.WithCancel(ctx)
			called := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "two_step", Arguments: map[string]any{"id": "stall"}})
				called <- err
			}()
			waitFor(t, e.stalled, "the first step's request")
			id := e.runningRunID(t)
			cancel()
			if err := <-called; err == nil {
				t.Fatal("the cancelled call answered")
			}
			waitFor(t, e.unstalled, "the upstream to see the request end")
			e.waitCancelled(t, id, "first")
			if err := e.runner.Close(); err != nil {
				t.Fatal(err)
			}
			if n := e.secondStepHits(); n != 0 {
				t.Fatalf("the second step was sent %d times", n)
			}
		})
	}
}

// waitCancelled waits until run id is cancelled at step, by the client
// that started it.
func (e *sapiEnv) waitCancelled(t *testing.T, id, step string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := e.runner.Result(context.Background(), e.sessions["s1"], id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == actions.StatusCancelled && got.Error != nil && got.Error.Step == step {
			if !strings.Contains(got.Error.Message, "MCP notifications/cancelled") {
				t.Errorf("cancelled by %q", got.Error.Message)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is %+v, want cancelled at step %s", got, step)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestActionRunParkedKeepsItsTree: a run parked at a step's approval keeps
// what is left of its deadline (the wait is not part of it) and, resumed,
// stays one tree: one action.started line, every step's lines under it.
func TestActionRunParkedKeepsItsTree(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	_, res := e.runAction(t, "s1", "comment-create", map[string]any{"issueId": "ENG-7", "body": "LGTM"})
	if res.Status != actions.StatusPendingApproval || res.RunID == "" {
		t.Fatalf("%+v", res)
	}
	var deadline, auditID string
	var left int64
	err := e.db.QueryRowContext(context.Background(), `SELECT deadline, time_left_ms, audit_id FROM action_runs WHERE id = ?`,
		res.RunID).Scan(&deadline, &left, &auditID)
	if err != nil || deadline != "" || left <= 0 || left > 120000 || auditID == "" {
		t.Fatalf("parked run: deadline %q, time left %dms, audit id %q (%v)", deadline, left, auditID, err)
	}
	if err := e.store.Approve(t.Context(), res.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	e.waitRunEvent(t, audit.EventActionCompleted, "")
	e.runner.Close()
	started, steps := 0, 0
	for _, ev := range e.auditLines() {
		switch {
		case ev.RunID != res.RunID:
		case ev.Name == audit.EventActionStarted:
			started++
			if ev.AuditID != auditID {
				t.Errorf("started line %s, want the stored %s", ev.AuditID, auditID)
			}
		case ev.Name == audit.EventProxied || ev.Name == audit.EventCompleted:
			steps++
			if ev.ParentAuditID != auditID {
				t.Errorf("step line %s has parent %q, want %q", ev.Name, ev.ParentAuditID, auditID)
			}
		}
	}
	if started != 1 || steps != 4 {
		t.Fatalf("%d started lines and %d step lines, want 1 and 4", started, steps)
	}
}

// TestActionRunCancelFromAnotherNode: a cancellation made through another
// runner on the same database (another node of a fleet) reaches the node
// executing the run, which cancels the step in flight upstream.
func TestActionRunCancelFromAnotherNode(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{extra: []action.Installed{twoStep(t, "")}})
	// The other node is up before the run starts (a node starting fails
	// the runs it finds running: see Runner.Start).
	other := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: e.runner.Catalog}
	t.Cleanup(func() { other.Close() })
	if err := other.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ran := make(chan actions.Result, 1)
	go func() {
		res, err := e.runner.Run(context.Background(), e.sessions["s1"], "two-step", map[string]any{"id": "stall"})
		if err != nil {
			t.Error(err)
		}
		ran <- res
	}()
	waitFor(t, e.stalled, "the first step's request")
	id := e.runningRunID(t)
	got, cancelled, err := other.Cancel(context.Background(), nil, id, "cli:node-b")
	if err != nil || !cancelled || got.Status != actions.StatusCancelled {
		t.Fatalf("%+v %v %v", got, cancelled, err)
	}
	waitFor(t, e.unstalled, "the upstream to see the request end")
	select {
	case res := <-ran:
		if res.Status != actions.StatusCancelled || res.Error == nil || res.Error.Step != "first" ||
			!strings.Contains(res.Message, "cancelled by cli:node-b during step first") {
			t.Fatalf("%+v", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end after the cancel")
	}
	if n := e.secondStepHits(); n != 0 {
		t.Fatalf("the second step was sent %d times", n)
	}
}
