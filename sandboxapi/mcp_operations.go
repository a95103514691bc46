package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP tools that list and run connector operations.
const (
	ListOperationsTool = "list_operations"
	RunOperationTool   = "run_operation"
)

// OperationBackend is what the operation tools need of a ToolBackend; a
// backend that implements it gets ListOperationsTool and RunOperationTool.
// The sandbox API's (API.Backend) and HTTPBackend do.
type OperationBackend interface {
	// Operations lists the caller's operations (GET /v1/operations), only
	// connector fqn's when it is not "".
	Operations(ctx context.Context, fqn string) (OperationList, error)
	// RunOperation runs one operation as POST /v1/connector-operations/run
	// does. A refusal by the pipeline is an error wrapping a
	// *dataplane.Refusal.
	RunOperation(ctx context.Context, req OperationRequest) (OperationResult, error)
}

// Backend is the ToolBackend of session sess in the daemon: actions from
// tools (the runner's, normally) and the operations of the sandbox API, run
// through the same path as POST /v1/connector-operations/run.
func (s *API) Backend(sess *dataplane.Session, tools ToolBackend) ToolBackend {
	return sessionBackend{ToolBackend: tools, api: s, sess: sess}
}

type sessionBackend struct {
	ToolBackend
	api  *API
	sess *dataplane.Session
}

func (b sessionBackend) Operations(_ context.Context, fqn string) (OperationList, error) {
	return b.api.Operations(b.sess, fqn)
}

func (b sessionBackend) RunOperation(ctx context.Context, req OperationRequest) (OperationResult, error) {
	res, err := b.api.runCall(ctx, b.sess, req)
	if err != nil {
		ref := dataplane.RefuseError(err, sandboxErrors())
		return OperationResult{}, &ref
	}
	if res.Refusal != nil {
		ref := *res.Refusal
		ref.AuditID, ref.Outcome = res.AuditID, "refused"
		return OperationResult{}, &ref
	}
	ct := res.Header.Get("Content-Type")
	return OperationResult{Status: "ok", AuditID: res.AuditID, UpstreamStatus: res.Status, ContentType: ct,
		Body: responseBody(res, ct), Truncated: res.Truncated}, nil
}

// Operations lists the session's operations (GET {APIURL}/operations).
func (b *HTTPBackend) Operations(ctx context.Context, fqn string) (OperationList, error) {
	path := "/operations"
	if fqn != "" {
		path += "?connector=" + url.QueryEscape(fqn)
	}
	var l OperationList
	err := b.do(ctx, http.MethodGet, path, nil, &l, http.StatusOK)
	return l, err
}

// RunOperation runs one operation (POST {APIURL}/connector-operations/run).
func (b *HTTPBackend) RunOperation(ctx context.Context, req OperationRequest) (OperationResult, error) {
	if req.Args == nil {
		req.Args = map[string]any{}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return OperationResult{}, fmt.Errorf("%w: %w: the arguments are not JSON: %v", ErrSandboxAPI, state.ErrInvalidArgument, err)
	}
	var res OperationResult
	err = b.do(ctx, http.MethodPost, "/connector-operations/run", body, &res, http.StatusOK)
	return res, err
}

// reservedToolName reports the names of the server's own tools, which no
// action may take.
func reservedToolName(name string) bool {
	return name == CheckActionStatusTool || name == ListOperationsTool || name == RunOperationTool || name == RequestAccessTool
}

// addOperationTools adds the operation tools to srv when lister offers
// operations; each call runs on the backend backendOf picks.
func addOperationTools(srv *mcp.Server, lister ToolBackend, backendOf func(*mcp.CallToolRequest) (ToolBackend, error)) {
	if _, ok := lister.(OperationBackend); !ok {
		return
	}
	ops := func(req *mcp.CallToolRequest) (OperationBackend, error) {
		b, err := backendOf(req)
		if err != nil {
			return nil, err
		}
		ob, ok := b.(OperationBackend)
		if !ok {
			return nil, errors.New("this server does not run connector operations")
		}
		return ob, nil
	}
	srv.AddTool(listOperationsTool(), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return listOperations(ctx, req, ops), nil
	})
	srv.AddTool(runOperationTool(), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return runOperation(ctx, req, ops), nil
	})
}

func stringProp(desc string) map[string]any {
	return map[string]any{"type": "string", "description": desc}
}

func listOperationsTool() *mcp.Tool {
	return &mcp.Tool{
		Name: ListOperationsTool,
		Description: "Lists the connector operations this session may call, each with its connector_fqn, tool, operation, " +
			"summary, method, path, hosts, approval_required, input_schema (the JSON Schema of run_operation's args) " +
			"and output_schema when declared. Narrow it with connector_fqn and tool.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"connector_fqn": stringProp("Only this connector's operations."),
				"tool":          stringProp("Only this tool's operations."),
			},
			"additionalProperties": false,
		},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}
}

func runOperationTool() *mcp.Tool {
	return &mcp.Tool{
		Name: RunOperationTool,
		Description: "Runs one connector operation through Aileron (policy, approval, credentials, audit) and answers " +
			"{status, audit_id, upstream_status, content_type, body}. args must fit the operation's input_schema " +
			"from " + ListOperationsTool + "; a refusal (invalid_arguments, approval_pending, denied, …) is a tool error " +
			"with Aileron's reason and message.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"connector_fqn": stringProp("The operation's connector_fqn, as " + ListOperationsTool + " shows it."),
				"tool":          stringProp("The operation's tool."),
				"operation":     stringProp("The operation's name."),
				"args":          map[string]any{"type": "object", "description": "The operation's arguments: an object fitting its input_schema."},
			},
			"required":             []any{"connector_fqn", "tool", "operation"},
			"additionalProperties": false,
		},
	}
}

func listOperations(ctx context.Context, req *mcp.CallToolRequest, ops func(*mcp.CallToolRequest) (OperationBackend, error)) *mcp.CallToolResult {
	args, err := decodeToolArgs(req)
	if err != nil {
		return toolError("%s: %v", ListOperationsTool, err)
	}
	fqn, _ := args["connector_fqn"].(string)
	tool, _ := args["tool"].(string)
	b, err := ops(req)
	if err != nil {
		return toolError("%s: %v", ListOperationsTool, err)
	}
	list, err := b.Operations(ctx, fqn)
	if err != nil {
		return toolError("%s: %v", ListOperationsTool, err)
	}
	if tool != "" {
		kept := list.Operations[:0]
		for _, o := range list.Operations {
			if o.Tool == tool {
				kept = append(kept, o)
			}
		}
		list.Operations = kept
	}
	return jsonToolResult(list, false)
}

func runOperation(ctx context.Context, req *mcp.CallToolRequest, ops func(*mcp.CallToolRequest) (OperationBackend, error)) *mcp.CallToolResult {
	var in OperationRequest
	if req != nil && req.Params != nil && len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return toolError(`%s needs {"connector_fqn", "tool", "operation", "args"}: %v`, RunOperationTool, err)
		}
	}
	if in.ConnectorFQN == "" || in.Tool == "" || in.Operation == "" {
		return toolError(`%s needs {"connector_fqn", "tool", "operation", "args"}; %s lists the operations`, RunOperationTool, ListOperationsTool)
	}
	b, err := ops(req)
	if err != nil {
		return toolError("%s: %v", RunOperationTool, err)
	}
	res, err := b.RunOperation(ctx, in)
	if err != nil {
		return operationRefused(in, err)
	}
	return jsonToolResult(res, res.UpstreamStatus < 200 || res.UpstreamStatus > 299)
}

// operationRefused is the tool error of a call that did not complete: the
// refusal's envelope when there is one, with guidance for a pending approval.
func operationRefused(in OperationRequest, err error) *mcp.CallToolResult {
	name := in.Tool + "/" + in.Operation
	var ref *dataplane.Refusal
	if !errors.As(err, &ref) {
		return toolError("operation %s was not run: %v", name, err)
	}
	data, _ := json.Marshal(ref) // strings only
	var b strings.Builder
	if ref.ApprovalID != "" && ref.Reason == policy.ReasonApprovalPending {
		b.WriteString("This operation needs human approval before it runs. Ask the human to review and approve it")
		if ref.ReviewURL != "" {
			b.WriteString(" at " + ref.ReviewURL)
		}
		fmt.Fprintf(&b, ", then call %s again with the identical arguments.\n", RunOperationTool)
	}
	fmt.Fprintf(&b, "operation %s was refused: %s (%s)\n%s", name, ref.Message, ref.Reason, data)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
}

// jsonToolResult answers v as JSON text and as structured content.
func jsonToolResult(v any, isError bool) *mcp.CallToolResult {
	data, err := json.Marshal(v)
	if err != nil {
		return toolError("the answer could not be encoded as JSON: %v", err)
	}
	return &mcp.CallToolResult{IsError: isError, StructuredContent: json.RawMessage(data),
		Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}
}
