package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// ToolBackend is what the MCP server needs from the daemon: in-process in the
// daemon (the action runner and catalog), over HTTPS in the sandbox
// (HTTPBackend). Implementations must be safe for concurrent use.
type ToolBackend interface {
	// Actions lists the actions the caller may run.
	Actions(ctx context.Context) (actions.List, error)
	// RunAction runs action name (its manifest name, not the tool name) with
	// args, the tool call's JSON arguments decoded with encoding/json (numbers
	// are float64). A result with status pending_approval is not an error.
	RunAction(ctx context.Context, name string, args map[string]any) (actions.Result, error)
	// ActionStatus reports the state of the run waiting on approval id.
	ActionStatus(ctx context.Context, id string) (actions.Result, error)
}

// CheckActionStatusTool is the name of the MCP tool that polls an
// approval-gated run: {"approval_id": "..."} → the run's actions.Result.
const CheckActionStatusTool = "check_action_status"

const (
	defaultMCPRefresh     = 5 * time.Second
	defaultMCPIdleTimeout = time.Hour
	mcpApprovalLine       = "Requires human approval."
)

// MCPServer serves the session's installed actions as MCP tools, one per
// action (named by actions.Info.ToolName, described by its Markdown body, with
// its input schema) plus CheckActionStatusTool. A tool call answers the
// actions.Result as JSON text content and as structured content; failed and
// denied runs are tool errors (IsError), a pending run is not: its text tells
// the agent to have the human approve at the review URL, then to call
// check_action_status. Backend failures become tool errors carrying their
// message, never protocol errors.
//
// The tool list follows the backend: every Refresh the actions are listed
// again and, when the list's version changed, tools are added, replaced and
// removed, which makes the SDK send notifications/tools/list_changed to
// connected clients.
type MCPServer struct {
	// Backend lists and runs actions for Server and ServeStdio (HTTPHandler
	// takes one per request instead).
	Backend ToolBackend
	// Name and Version identify the server to clients; "" means "aileron"
	// and "dev".
	Name, Version string
	// Refresh is how often the actions are listed again; 0 means 5s.
	Refresh time.Duration
	// HTTPIdleTimeout closes a Streamable HTTP session that received no
	// request for that long (clients start a new one on the next call);
	// 0 means 1h, negative means never.
	HTTPIdleTimeout time.Duration
	// AccessWait is how long one request_access call waits for a human's
	// decision before answering that it still waits; 0 means 45s, negative
	// means not at all, and it is at most 60s.
	AccessWait time.Duration
	// Log receives problems the server works around (a listing that failed,
	// an action skipped for an invalid tool name or schema); nil discards.
	Log *zerolog.Logger
}

// Server builds an SDK server holding the current tools and keeps them in
// sync with s.Backend until ctx ends. Use it with any SDK transport (for
// instance mcp.NewInMemoryTransports in tests).
//
// Errors: a nil Backend wraps state.ErrInvalidArgument; a failure of the first
// listing is returned wrapped (later failures are logged and retried).
func (s *MCPServer) Server(ctx context.Context) (*mcp.Server, error) {
	srv, _, err := s.start(ctx, s.Backend, s.fixedBackend)
	return srv, err
}

// ServeStdio serves one MCP session over newline-delimited JSON-RPC on in and
// out (the `aileron mcp` stdio server). It returns nil when the client ends
// the session (in reaches EOF, or out is closed) and ctx.Err() when ctx ends
// first. in and out stay the caller's: they are not closed, so a read blocked
// on in returns only when the caller closes it.
//
// Errors: as Server, plus the SDK's transport errors.
func (s *MCPServer) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, synced, err := s.start(sctx, s.Backend, s.fixedBackend)
	if err != nil {
		return err
	}
	err = srv.Run(sctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	cancel()
	<-synced
	if ctx.Err() == nil && clientLeft(err) {
		return nil
	}
	return err
}

// clientLeft reports whether err is how a stdio session ends when the client
// goes away: the end of in, or out closed under a last write (a reply to the
// client's own cancellation, say).
func clientLeft(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func (s *MCPServer) fixedBackend(*mcp.CallToolRequest) (ToolBackend, error) { return s.Backend, nil }

// log returns Log, or a logger that discards.
func (s *MCPServer) log() *zerolog.Logger {
	if s.Log != nil {
		return s.Log
	}
	nop := zerolog.Nop()
	return &nop
}

// start builds a server listing tools from lister, whose calls run on the
// backend backendOf picks per call, and syncs its tools until ctx ends; the
// returned channel closes when the sync goroutine has exited.
func (s *MCPServer) start(ctx context.Context, lister ToolBackend,
	backendOf func(*mcp.CallToolRequest) (ToolBackend, error)) (*mcp.Server, <-chan struct{}, error) {
	if lister == nil {
		return nil, nil, fmt.Errorf("%w: the MCP server has no tool backend", state.ErrInvalidArgument)
	}
	list, err := lister.Actions(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("MCP server: listing the installed actions: %w", err)
	}
	srv := s.newSDKServer()
	ts := &toolSync{srv: srv, lister: lister, backendOf: backendOf, log: s.log(), have: map[string]toolEntry{}}
	srv.AddTool(checkStatusTool(), ts.checkStatus)
	addOperationTools(srv, lister, backendOf)
	addAccessTool(srv, lister, backendOf, s.accessWait())
	ts.apply(list)
	every := s.Refresh
	if every <= 0 {
		every = defaultMCPRefresh
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ts.run(ctx, every)
	}()
	return srv, done, nil
}

func (s *MCPServer) newSDKServer() *mcp.Server {
	name, version := s.Name, s.Version
	if name == "" {
		name = "aileron"
	}
	if version == "" {
		version = "dev"
	}
	return mcp.NewServer(&mcp.Implementation{Name: name, Version: version}, &mcp.ServerOptions{
		Instructions: "Aileron actions run through the session's policy and audit. A tool that " +
			"requires human approval answers status pending_approval with a review_url and an " +
			"approval_id: ask the human to approve at review_url, then call " + CheckActionStatusTool +
			" with the approval_id until the status is final (completed, denied, failed or cancelled). " +
			"A request Aileron refuses because no rule allows it can be asked for with " + RequestAccessTool +
			", with a justification the human reads.",
		// Tools only, announced with listChanged even before any is added;
		// this also drops the SDK's default logging capability.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
}

// toolSync owns the action tools of one SDK server. apply and run are only
// ever called from one goroutine at a time (start, then the sync goroutine).
type toolSync struct {
	srv       *mcp.Server
	lister    ToolBackend
	backendOf func(*mcp.CallToolRequest) (ToolBackend, error)
	log       *zerolog.Logger
	version   string
	have      map[string]toolEntry // by tool name
}

type toolEntry struct {
	action string // manifest name, for RunAction
	tool   *mcp.Tool
}

func (ts *toolSync) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		list, err := ts.lister.Actions(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			ts.log.Warn().Str("event", "mcp.list_failed").Dur("retry_in", every).Err(err).
				Msg("listing the installed actions failed; the tool list stays as it was")
		case list.Version == "" || list.Version != ts.version:
			ts.apply(list)
		}
	}
}

// apply makes the server's action tools those of list: removed ones go in
// one RemoveTools, new or changed ones are (re)added; unchanged ones are left
// alone, so a list equal to the current one notifies nobody. The SDK batches
// the resulting list_changed notifications.
func (ts *toolSync) apply(list actions.List) {
	want := make(map[string]toolEntry, len(list.Actions))
	for _, a := range list.Actions {
		tool, err := toolFor(a)
		if err != nil {
			ts.log.Warn().Str("event", "mcp.tool_skipped").Str("action", a.Name).Err(err).Msg("action is not offered as a tool")
			continue
		}
		if prev, dup := want[tool.Name]; dup {
			ts.log.Warn().Str("event", "mcp.tool_skipped").Str("action", a.Name).Str("tool", tool.Name).Str("kept", prev.action).
				Msg("two actions map to one tool name; only the first is offered")
			continue
		}
		want[tool.Name] = toolEntry{action: a.Name, tool: tool}
	}
	var gone []string
	for name := range ts.have {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		ts.srv.RemoveTools(gone...)
	}
	for _, name := range sortedKeys(want) {
		e := want[name]
		if old, ok := ts.have[name]; ok && old.action == e.action && reflect.DeepEqual(old.tool, e.tool) {
			continue
		}
		if err := addTool(ts.srv, e.tool, ts.runTool(e.action)); err != nil {
			ts.log.Warn().Str("event", "mcp.tool_skipped").Str("action", e.action).Err(err).Msg("action is not offered as a tool")
			delete(want, name)
			if _, had := ts.have[name]; had {
				ts.srv.RemoveTools(name)
			}
		}
	}
	ts.have = want
	ts.version = list.Version
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// addTool is mcp.Server.AddTool without its panics: toolFor already checks
// what the SDK requires, so a panic here means an SDK rule we do not know of,
// which costs one tool rather than the daemon.
func addTool(srv *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the MCP SDK refused the tool: %v", r)
		}
	}()
	srv.AddTool(t, h)
	return nil
}

// toolFor is the MCP tool definition of action a. Its input schema is a deep
// copy, so the backend may reuse its maps.
func toolFor(a actions.Info) (*mcp.Tool, error) {
	if a.Name == "" {
		return nil, errors.New("the action has no name")
	}
	name := a.ToolName
	if name == "" {
		name = strings.ReplaceAll(a.Name, "-", "_")
	}
	if err := checkToolName(name); err != nil {
		return nil, err
	}
	schema := map[string]any{"type": "object"}
	if a.InputSchema != nil {
		data, err := json.Marshal(a.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("its input schema is not JSON: %v", err)
		}
		schema = nil
		if err := json.Unmarshal(data, &schema); err != nil {
			return nil, fmt.Errorf("its input schema is not a JSON object: %v", err)
		}
		if schema["type"] != "object" {
			return nil, fmt.Errorf(`its input schema has type %v; a tool's input schema must have type "object"`, schema["type"])
		}
	}
	desc := strings.TrimSpace(a.Description)
	if a.ApprovalRequired {
		if desc != "" {
			desc += "\n\n"
		}
		desc += mcpApprovalLine + " The call answers status pending_approval with a review_url for the human and an approval_id for " + CheckActionStatusTool + "."
	}
	if len(a.Unpinned) > 0 {
		desc = strings.TrimSpace(desc + "\n\nUnpinned: requires " + strings.Join(a.Unpinned, ", ") + " by a placeholder hash (a development install).")
	}
	return &mcp.Tool{Name: name, Description: desc, InputSchema: schema}, nil
}

// checkToolName applies the MCP tool name rules (1-128 of A-Z a-z 0-9 _ - .)
// and keeps CheckActionStatusTool for the server itself.
func checkToolName(name string) error {
	if reservedToolName(name) {
		return fmt.Errorf("tool name %q is reserved for one of the server's own tools; rename the action", name)
	}
	if name == "" || len(name) > 128 {
		return fmt.Errorf("tool name %q must be 1 to 128 characters long", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("tool name %q contains %q; MCP tool names use only letters, digits, '_', '-' and '.'", name, r)
		}
	}
	return nil
}

func checkStatusTool() *mcp.Tool {
	return &mcp.Tool{
		Name: CheckActionStatusTool,
		Description: "Reports the state of an action run that required human approval: " +
			"pending_approval (not decided yet: ask the human to approve at review_url, then call again), " +
			"running, completed (with its output), denied or failed.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approval_id": map[string]any{
					"type":        "string",
					"description": "The approval_id a pending_approval result returned.",
				},
			},
			"required":             []any{"approval_id"},
			"additionalProperties": false,
		},
	}
}

// runTool is the handler of the tool of action name.
func (ts *toolSync) runTool(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := decodeToolArgs(req)
		if err != nil {
			return toolError("action %s was not run: %v", name, err), nil
		}
		b, err := ts.backendOf(req)
		if err != nil {
			return toolError("action %s was not run: %v", name, err), nil
		}
		res, err := b.RunAction(ctx, name, args)
		if err != nil {
			return toolError("action %s could not be run: %v", name, err), nil
		}
		return actionToolResult(res), nil
	}
}

func (ts *toolSync) checkStatus(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := decodeToolArgs(req)
	if err != nil {
		return toolError("%s: %v", CheckActionStatusTool, err), nil
	}
	id, _ := args["approval_id"].(string)
	if id == "" {
		return toolError(`%s needs {"approval_id": "..."}: the approval_id string of a pending_approval result`, CheckActionStatusTool), nil
	}
	b, err := ts.backendOf(req)
	if err != nil {
		return toolError("%s: %v", CheckActionStatusTool, err), nil
	}
	res, err := b.ActionStatus(ctx, id)
	if err != nil {
		return toolError("could not check approval %s: %v", id, err), nil
	}
	return actionToolResult(res), nil
}

// decodeToolArgs decodes a call's arguments, which must be a JSON object (or
// absent: no arguments).
func decodeToolArgs(req *mcp.CallToolRequest) (map[string]any, error) {
	args := map[string]any{}
	if req == nil || req.Params == nil || len(req.Params.Arguments) == 0 {
		return args, nil
	}
	var v any
	if err := json.Unmarshal(req.Params.Arguments, &v); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON: %v", err)
	}
	switch v := v.(type) {
	case nil:
		return args, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("the arguments must be a JSON object, not %T", v)
	}
}

// toolError is a tool result with IsError set (the model sees the message;
// the protocol call itself succeeded).
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// actionToolResult renders res: guidance for the model when the run is not
// final, then the actions.Result JSON (also as structured content).
func actionToolResult(res actions.Result) *mcp.CallToolResult {
	data, err := json.Marshal(res)
	if err != nil {
		return toolError("the action's result (status %q) could not be encoded as JSON: %v", res.Status, err)
	}
	out := &mcp.CallToolResult{
		StructuredContent: json.RawMessage(data),
		IsError:           res.Status == actions.StatusFailed || res.Status == actions.StatusDenied || res.Status == actions.StatusCancelled,
	}
	if g := guidance(res); g != "" {
		out.Content = append(out.Content, &mcp.TextContent{Text: g})
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: string(data)})
	return out
}

func guidance(res actions.Result) string {
	switch res.Status {
	case actions.StatusPendingApproval:
		g := "This action needs human approval before it runs. Ask the human to review and approve it"
		if res.ReviewURL != "" {
			g += " at " + res.ReviewURL
		}
		g += fmt.Sprintf(`, then call %s with {"approval_id": %q} to get its result.`, CheckActionStatusTool, res.ApprovalID)
		if res.Message != "" {
			g += "\n" + res.Message
		}
		return g
	case actions.StatusRunning:
		return fmt.Sprintf(`The action was approved and is still running; call %s with {"approval_id": %q} again shortly.`,
			CheckActionStatusTool, res.ApprovalID)
	case actions.StatusDenied:
		return "The human denied this action; it was not run. Do not retry it unchanged; ask the human how to proceed."
	case actions.StatusCancelled:
		return "This action run was cancelled; no later step was sent. It is not retried by itself: run it again only if that is still wanted."
	}
	return ""
}
