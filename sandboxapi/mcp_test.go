package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// fakeBackend is the far side of the MCP server: a ToolBackend whose actions,
// results and approval states the test sets.
type fakeBackend struct {
	mu       sync.Mutex
	list     actions.List
	results  map[string]actions.Result // by action name
	errs     map[string]error          // by action name
	statuses map[string]actions.Result // by approval id
	listErr  error
	runs     []fakeRun
}

type fakeRun struct {
	Name string
	Args map[string]any
}

func listIssuesSchema() map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{"team": map[string]any{"type": "string", "description": "Team key."}},
		"required":   []any{"team"},
	}
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		list: actions.List{Version: "v1", Actions: []actions.Info{
			{Name: "issue-create", ToolName: "issue_create", Description: "Creates an issue.", Version: "1.0.0",
				Connector: "github://acme/linear", ApprovalRequired: true,
				InputSchema: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}},
			{Name: "list-issues", ToolName: "list_issues", Description: "Lists the team's issues.", Version: "1.0.0",
				Connector: "github://acme/linear", InputSchema: listIssuesSchema()},
			{Name: "fail-hard", ToolName: "fail_hard", Description: "Always errs.", Connector: "github://acme/linear"},
		}},
		results: map[string]actions.Result{
			"list-issues":  {Status: actions.StatusCompleted, AuditIDs: []string{"au_1"}, Output: map[string]any{"issues": []any{"ENG-1"}}},
			"issue-create": {Status: actions.StatusPendingApproval, ApprovalID: "ap_1", ReviewURL: "https://aileron.example/approvals/ap_1", Message: "waiting for a human"},
		},
		errs:     map[string]error{"fail-hard": errors.New("the daemon refused: unknown_action")},
		statuses: map[string]actions.Result{"ap_1": {Status: actions.StatusPendingApproval, ApprovalID: "ap_1", ReviewURL: "https://aileron.example/approvals/ap_1"}},
	}
}

func (f *fakeBackend) Actions(context.Context) (actions.List, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.list, f.listErr
}

func (f *fakeBackend) RunAction(_ context.Context, name string, args map[string]any) (actions.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs = append(f.runs, fakeRun{Name: name, Args: args})
	if err := f.errs[name]; err != nil {
		return actions.Result{}, err
	}
	res, ok := f.results[name]
	if !ok {
		return actions.Result{}, &dataplane.Refusal{Status: 404, Class: "not_found", Reason: "unknown_action", Message: "no action " + name}
	}
	return res, nil
}

func (f *fakeBackend) ActionStatus(_ context.Context, id string) (actions.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res, ok := f.statuses[id]
	if !ok {
		return actions.Result{}, &dataplane.Refusal{Status: 404, Class: "not_found", Reason: "unknown_approval", Message: "no approval " + id}
	}
	return res, nil
}

func (f *fakeBackend) setStatus(id string, r actions.Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[id] = r
}

func (f *fakeBackend) setList(l actions.List) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.list = l
}

func (f *fakeBackend) lastRun() fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.runs) == 0 {
		return fakeRun{}
	}
	return f.runs[len(f.runs)-1]
}

// noLeaks registers first so it runs after every other cleanup.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// mcpConnector connects an SDK client to s over one transport.
type mcpConnector struct {
	name    string
	connect func(t *testing.T, ctx context.Context, s *MCPServer, b ToolBackend, opts *mcp.ClientOptions) *mcp.ClientSession
}

func inMemoryConnector(protocol string) mcpConnector {
	return mcpConnector{name: "in-memory " + protocol, connect: func(t *testing.T, ctx context.Context, s *MCPServer, b ToolBackend, opts *mcp.ClientOptions) *mcp.ClientSession {
		s.Backend = b
		srv, err := s.Server(ctx)
		if err != nil {
			t.Fatalf("Server: %v", err)
		}
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		if err != nil {
			t.Fatalf("server Connect: %v", err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
		if err != nil {
			t.Fatalf("client Connect: %v", err)
		}
		t.Cleanup(func() { cs.Close(); ss.Wait() })
		return cs
	}}
}

func stdioConnector() mcpConnector {
	return mcpConnector{name: "stdio pipes", connect: func(t *testing.T, ctx context.Context, s *MCPServer, b ToolBackend, opts *mcp.ClientOptions) *mcp.ClientSession {
		s.Backend = b
		clientIn, serverOut := io.Pipe()
		serverIn, clientOut := io.Pipe()
		served := make(chan error, 1)
		go func() { served <- s.ServeStdio(ctx, serverIn, serverOut) }()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
		if err != nil {
			t.Fatalf("client Connect: %v", err)
		}
		t.Cleanup(func() {
			cs.Close() // closes clientOut: the server reads EOF
			if err := <-served; err != nil {
				t.Errorf("ServeStdio after the client left = %v, want nil", err)
			}
		})
		return cs
	}}
}

func httpConnector() mcpConnector {
	return mcpConnector{name: "streamable HTTP", connect: func(t *testing.T, ctx context.Context, s *MCPServer, b ToolBackend, opts *mcp.ClientOptions) *mcp.ClientSession {
		h := s.HTTPHandler(func(*http.Request) (ToolBackend, error) { return b, nil })
		srv := httptest.NewServer(h)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: srv.Client()}, nil)
		if err != nil {
			t.Fatalf("client Connect: %v", err)
		}
		t.Cleanup(func() { cs.Close(); h.Close(); srv.Close() })
		return cs
	}}
}

func allConnectors() []mcpConnector {
	return []mcpConnector{inMemoryConnector("2026-07-28"), inMemoryConnector("2025-11-25"), stdioConnector(), httpConnector()}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		tools[tool.Name] = tool
	}
	return tools
}

// jsonNorm is v after a JSON round trip, for comparing schemas and outputs.
func jsonNorm(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func structured(t *testing.T, res *mcp.CallToolResult) actions.Result {
	t.Helper()
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var ar actions.Result
	if err := json.Unmarshal(data, &ar); err != nil {
		t.Fatalf("structured content %s: %v", data, err)
	}
	return ar
}

func texts(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return res
}

func TestMCPToolsOverEveryTransport(t *testing.T) {
	noLeaks(t)
	for _, c := range allConnectors() {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			fb := newFakeBackend()
			cs := c.connect(t, ctx, &MCPServer{Refresh: time.Hour}, fb, nil)

			tools := toolNames(t, ctx, cs)
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range tools {
					if !yield(n) {
						return
					}
				}
			})
			if want := []string{"check_action_status", "fail_hard", "issue_create", "list_issues"}; !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v", names, want)
			}
			if d := tools["issue_create"].Description; !strings.Contains(d, "Creates an issue.") || !strings.Contains(d, mcpApprovalLine) {
				t.Errorf("issue_create description = %q, want the body and %q", d, mcpApprovalLine)
			}
			if d := tools["list_issues"].Description; d != "Lists the team's issues." {
				t.Errorf("list_issues description = %q", d)
			}
			if got, want := jsonNorm(t, tools["list_issues"].InputSchema), jsonNorm(t, listIssuesSchema()); !reflect.DeepEqual(got, want) {
				t.Errorf("list_issues schema = %v, want %v", got, want)
			}
			if got := jsonNorm(t, tools["check_action_status"].InputSchema).(map[string]any)["required"]; !reflect.DeepEqual(got, []any{"approval_id"}) {
				t.Errorf("check_action_status requires %v", got)
			}

			// A read action completes at once.
			res := call(t, ctx, cs, "list_issues", map[string]any{"team": "eng"})
			if ar := structured(t, res); res.IsError || ar.Status != actions.StatusCompleted ||
				!reflect.DeepEqual(jsonNorm(t, ar.Output), jsonNorm(t, map[string]any{"issues": []any{"ENG-1"}})) {
				t.Errorf("list_issues = %+v (IsError %v)", ar, res.IsError)
			}
			if run := fb.lastRun(); run.Name != "list-issues" || !reflect.DeepEqual(run.Args, map[string]any{"team": "eng"}) {
				t.Errorf("backend ran %+v, want list-issues {team: eng}", run)
			}

			// An approval-gated action is pending, which is not an error...
			res = call(t, ctx, cs, "issue_create", map[string]any{"title": "Bug"})
			ar := structured(t, res)
			if res.IsError || ar.Status != actions.StatusPendingApproval || ar.ApprovalID != "ap_1" {
				t.Fatalf("issue_create = %+v (IsError %v), want pending_approval ap_1", ar, res.IsError)
			}
			for _, want := range []string{ar.ReviewURL, CheckActionStatusTool, `"ap_1"`, "waiting for a human"} {
				if !strings.Contains(texts(res), want) {
					t.Errorf("pending text %q does not mention %q", texts(res), want)
				}
			}
			// ...and check_action_status follows it to completion.
			if ar := structured(t, call(t, ctx, cs, CheckActionStatusTool, map[string]any{"approval_id": "ap_1"})); ar.Status != actions.StatusPendingApproval {
				t.Errorf("status before the decision = %q", ar.Status)
			}
			fb.setStatus("ap_1", actions.Result{Status: actions.StatusCompleted, ApprovalID: "ap_1", Output: "ENG-2", AuditIDs: []string{"au_2"}})
			res = call(t, ctx, cs, CheckActionStatusTool, map[string]any{"approval_id": "ap_1"})
			if ar := structured(t, res); res.IsError || ar.Status != actions.StatusCompleted || ar.Output != "ENG-2" {
				t.Errorf("status after approval = %+v (IsError %v)", ar, res.IsError)
			}
		})
	}
}

func TestMCPToolErrors(t *testing.T) {
	noLeaks(t)
	for _, c := range allConnectors() {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			cs := c.connect(t, ctx, &MCPServer{Refresh: time.Hour}, newFakeBackend(), nil)
			cases := []struct {
				tool     string
				args     any
				wantText string
			}{
				{"fail_hard", map[string]any{}, "the daemon refused: unknown_action"},
				{"list_issues", []any{1, 2}, "must be a JSON object"},
				{CheckActionStatusTool, map[string]any{}, "approval_id"},
				{CheckActionStatusTool, map[string]any{"approval_id": 7}, "approval_id"},
				{CheckActionStatusTool, map[string]any{"approval_id": "ap_nope"}, "no approval ap_nope (unknown_approval, HTTP 404)"},
			}
			for _, tc := range cases {
				res := call(t, ctx, cs, tc.tool, tc.args)
				if !res.IsError || !strings.Contains(texts(res), tc.wantText) {
					t.Errorf("%s(%v) = IsError %v, %q; want a tool error mentioning %q", tc.tool, tc.args, res.IsError, texts(res), tc.wantText)
				}
			}
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"}); err == nil {
				t.Error("calling an unknown tool succeeded, want the SDK's protocol error")
			}
		})
	}
}

func TestMCPToolListChanged(t *testing.T) {
	noLeaks(t)
	for _, c := range allConnectors() {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			fb := newFakeBackend()
			changed := make(chan struct{}, 1)
			opts := &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			}}
			cs := c.connect(t, ctx, &MCPServer{Refresh: 5 * time.Millisecond}, fb, opts)
			if _, ok := toolNames(t, ctx, cs)["list_issues"]; !ok {
				t.Fatal("list_issues missing before the change")
			}

			next := newFakeBackend().list
			next.Version = "v2"
			next.Actions = slices.DeleteFunc(next.Actions, func(a actions.Info) bool { return a.Name == "list-issues" })
			next.Actions[0].Description = "Creates a Linear issue."
			next.Actions = append(next.Actions, actions.Info{Name: "comment-add", ToolName: "comment_add", Description: "Comments."})
			fb.setList(next)

			for {
				select {
				case <-changed:
				case <-ctx.Done():
					t.Fatal("no notifications/tools/list_changed after the action set changed")
				}
				tools := toolNames(t, ctx, cs)
				_, gone := tools["list_issues"]
				if ic := tools["issue_create"]; !gone && tools["comment_add"] != nil && ic != nil && strings.HasPrefix(ic.Description, "Creates a Linear issue.") {
					return
				}
			}
		})
	}
}

func TestMCPHTTPCallRunsOnItsRequestsBackend(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	a, b := newFakeBackend(), newFakeBackend()
	b.results["list-issues"] = actions.Result{Status: actions.StatusCompleted, Output: "from b"}
	h := (&MCPServer{Refresh: time.Hour}).HTTPHandler(func(r *http.Request) (ToolBackend, error) {
		switch r.Header.Get("X-Test-Caller") {
		case "a":
			return a, nil
		case "b":
			return b, nil
		}
		return nil, errors.New("unknown caller")
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()

	var mu sync.Mutex
	caller := "a"
	client := srv.Client()
	base := client.Transport
	client.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		r.Header.Set("X-Test-Caller", caller)
		r.Header.Set(mcpCallRefHeader, "forged") // the handler must not trust this
		mu.Unlock()
		return base.RoundTrip(r)
	})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	if ar := structured(t, call(t, ctx, cs, "list_issues", map[string]any{"team": "eng"})); ar.Status != actions.StatusCompleted || ar.Output == "from b" {
		t.Errorf("call as a = %+v, want a's result", ar)
	}
	mu.Lock()
	caller = "b"
	mu.Unlock()
	if ar := structured(t, call(t, ctx, cs, "list_issues", map[string]any{"team": "eng"})); ar.Output != "from b" {
		t.Errorf("call as b on a's session = %+v, want b's result", ar)
	}
	if a.lastRun().Name != "list-issues" || b.lastRun().Name != "list-issues" || len(a.runs) != 1 {
		t.Errorf("runs: a %v, b %v; want one each", a.runs, b.runs)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMCPHTTPRefusesWithoutBackend(t *testing.T) {
	noLeaks(t)
	h := (&MCPServer{}).HTTPHandler(func(*http.Request) (ToolBackend, error) { return nil, errors.New("no session in context") })
	defer h.Close()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/mcp", strings.NewReader(`{}`)))
	var env dataplane.Refusal
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || rec.Code != http.StatusForbidden ||
		env.Reason != "mcp_unavailable" || !strings.Contains(env.Message, "no session in context") {
		t.Errorf("answer %d %s, want 403 with reason mcp_unavailable naming the cause", rec.Code, rec.Body)
	}
}

func TestMCPServerStartErrors(t *testing.T) {
	noLeaks(t)
	listFails := newFakeBackend()
	listFails.listErr = errors.New("daemon unreachable")
	cases := []struct {
		name    string
		backend ToolBackend
		want    error
		wantMsg string
	}{
		{"no backend", nil, state.ErrInvalidArgument, "no tool backend"},
		{"first listing fails", listFails, listFails.listErr, "listing the installed actions"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &MCPServer{Backend: tc.backend}
			_, err := s.Server(t.Context())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Server = %v, want %v mentioning %q", err, tc.want, tc.wantMsg)
			}
			if err := s.ServeStdio(t.Context(), strings.NewReader(""), io.Discard); !errors.Is(err, tc.want) {
				t.Errorf("ServeStdio = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestMCPToolFor(t *testing.T) {
	cases := []struct {
		name    string
		in      actions.Info
		wantErr string
		check   func(*mcp.Tool) bool
	}{
		{"no schema means any object", actions.Info{Name: "ping", ToolName: "ping"}, "",
			func(tl *mcp.Tool) bool { return reflect.DeepEqual(tl.InputSchema, map[string]any{"type": "object"}) }},
		{"tool name derived", actions.Info{Name: "send-email"}, "", func(tl *mcp.Tool) bool { return tl.Name == "send_email" }},
		{"approval line", actions.Info{Name: "x", ApprovalRequired: true}, "",
			func(tl *mcp.Tool) bool { return strings.HasPrefix(tl.Description, mcpApprovalLine) }},
		{"no name", actions.Info{ToolName: "x"}, "no name", nil},
		{"reserved", actions.Info{Name: "check-action-status"}, "reserved", nil},
		{"bad character", actions.Info{Name: "a b", ToolName: "a b"}, `contains ' '`, nil},
		{"too long", actions.Info{Name: "x", ToolName: strings.Repeat("x", 129)}, "1 to 128", nil},
		{"schema not an object", actions.Info{Name: "x", InputSchema: map[string]any{"type": "array"}}, `type "object"`, nil},
		{"schema not JSON", actions.Info{Name: "x", InputSchema: map[string]any{"type": "object", "f": func() {}}}, "not JSON", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool, err := toolFor(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("toolFor = %v, want an error mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(tool) {
				t.Errorf("toolFor = %+v, %v", tool, err)
			}
		})
	}
}

func TestMCPSkipsUnusableActions(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	fb := newFakeBackend()
	fb.list.Actions = append(fb.list.Actions,
		actions.Info{Name: "dup", ToolName: "list_issues"},
		actions.Info{Name: "arr", InputSchema: map[string]any{"type": "array"}})
	logs := &testkit.Log{}
	s := &MCPServer{Refresh: time.Hour, Log: logs.Logger()}
	tools := toolNames(t, ctx, inMemoryConnector("2025-11-25").connect(t, ctx, s, fb, nil))
	if len(tools) != 4 || tools["arr"] != nil || tools["list_issues"].Description != "Lists the team's issues." {
		t.Errorf("tools %v: want the 4 valid ones, the first list_issues kept", slices.Collect(func(y func(string) bool) {
			for n := range tools {
				y(n)
			}
		}))
	}
	if n := strings.Count(logs.String(), `"event":"mcp.tool_skipped"`); n != 2 {
		t.Errorf("logged %d problems, want 2: %s", n, logs)
	}
}

func TestMCPActionToolResult(t *testing.T) {
	cases := []struct {
		res       actions.Result
		wantError bool
		wantText  string
	}{
		{actions.Result{Status: actions.StatusCompleted, Output: 1}, false, `"status":"completed"`},
		{actions.Result{Status: actions.StatusPendingApproval, ApprovalID: "ap_9", ReviewURL: "https://r/ap_9"}, false, "approve it at https://r/ap_9"},
		{actions.Result{Status: actions.StatusRunning, ApprovalID: "ap_9"}, false, "still running"},
		{actions.Result{Status: actions.StatusDenied, Error: &actions.RunError{Reason: "approval_denied", Message: "no"}}, true, "denied"},
		{actions.Result{Status: actions.StatusFailed, Error: &actions.RunError{Reason: "upstream_status", Message: "500", Step: "issue"}}, true, `"step":"issue"`},
		{actions.Result{Status: actions.StatusCancelled, RunID: "ar_1", Error: &actions.RunError{Reason: "cancelled", Message: "cancelled by x", Step: "issue"}}, true, "not retried by itself"},
		{actions.Result{Status: actions.StatusCompleted, Output: make(chan int)}, true, "could not be encoded"},
	}
	for _, tc := range cases {
		got := actionToolResult(tc.res)
		if got.IsError != tc.wantError || !strings.Contains(texts(got), tc.wantText) {
			t.Errorf("%s: IsError %v, text %q; want %v and %q", tc.res.Status, got.IsError, texts(got), tc.wantError, tc.wantText)
		}
	}
}

func FuzzMCPDecodeToolArgs(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"a":1,"b":[true,null]}`, `[1]`, `"x"`, `{"a":`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args, err := decodeToolArgs(&mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Arguments: data}})
		if err != nil {
			return
		}
		if args == nil {
			t.Fatal("nil args without an error")
		}
		if _, err := json.Marshal(args); err != nil {
			t.Fatalf("decoded args do not re-encode: %v", err)
		}
	})
}

// TestMCPHTTPSessionBelongsToItsOpener: another sandbox session holding an
// MCP session's id can neither use it nor end it; it gets 404.
func TestMCPHTTPSessionBelongsToItsOpener(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	fb := newFakeBackend()
	h := (&MCPServer{Refresh: time.Hour}).HTTPHandler(func(*http.Request) (ToolBackend, error) { return fb, nil })
	h.ownerOf = func(r *http.Request) string { return r.Header.Get("X-Test-Session") }
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Close()
	opener := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Header.Set("X-Test-Session", "s_a")
		return http.DefaultTransport.RoundTrip(r)
	})}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: opener}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := cs.ID()
	if id == "" {
		t.Fatal("the client has no MCP session id")
	}
	intruder := func(method, body string) int {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL, strings.NewReader(body))
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Test-Session", "s_b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := intruder(http.MethodPost, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); st != http.StatusNotFound {
		t.Errorf("another session listing the tools: %d, want 404", st)
	}
	if st := intruder(http.MethodDelete, ""); st != http.StatusNotFound {
		t.Errorf("another session ending it: %d, want 404", st)
	}
	if tools := toolNames(t, ctx, cs); len(tools) == 0 {
		t.Error("the opener lost its session")
	}
}
