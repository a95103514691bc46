package sandboxapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RequestAccessTool is the MCP tool with which an agent asks a human for
// access to a request no rule allows, and waits for the decision.
const RequestAccessTool = "request_access"

// defaultMCPAccessWait is how long one request_access call waits for a
// human: under the 60s a common MCP client gives a tool call.
const defaultMCPAccessWait = 45 * time.Second

// AccessBackend is what RequestAccessTool needs of a ToolBackend; a backend
// that implements it gets the tool. The sandbox API's (API.Backend) and
// HTTPBackend do. Neither can decide anything.
type AccessBackend interface {
	// RequestAccess asks for access as POST /v1/access-requests does.
	RequestAccess(ctx context.Context, req AccessRequest) (AccessAnswer, error)
	// AccessStatus waits up to waitSeconds for the decision on the
	// caller's access request id, as GET /v1/access-requests/{id} does.
	AccessStatus(ctx context.Context, id string, waitSeconds int) (AccessAnswer, error)
}

func (b sessionBackend) RequestAccess(ctx context.Context, req AccessRequest) (AccessAnswer, error) {
	ans, err := b.api.requestAccess(ctx, b.sess, req)
	return ans, b.api.refusal(ctx, err)
}

func (b sessionBackend) AccessStatus(ctx context.Context, id string, waitSeconds int) (AccessAnswer, error) {
	ans, err := b.api.accessStatus(ctx, b.sess, id, waitSeconds)
	return ans, b.api.refusal(ctx, err)
}

// refusal is err as the sandbox API would answer it: a *dataplane.Refusal,
// without the daemon's detail for an internal failure (which is logged).
// The call's ctx ending (the client cancelled it) is returned as is.
func (s *API) refusal(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	ref := dataplane.RefuseError(err, sandboxErrors())
	if ref.Status >= 500 {
		if s.Log != nil {
			s.Log.Error().Str("event", "sandbox.api_error").Str("reason", string(ref.Reason)).Err(err).Msg("sandbox API request failed")
		}
		ref.Message = "the daemon failed to process the request; its log has the details"
	}
	return &ref
}

// RequestAccess asks for access (POST {APIURL}/access-requests).
func (b *HTTPBackend) RequestAccess(ctx context.Context, req AccessRequest) (AccessAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return AccessAnswer{}, fmt.Errorf("%w: %w: %v", ErrSandboxAPI, state.ErrInvalidArgument, err)
	}
	var ans AccessAnswer
	err = b.do(ctx, http.MethodPost, "/access-requests", body, &ans, http.StatusOK, http.StatusAccepted)
	return ans, err
}

// AccessStatus waits for the decision on access request id
// (GET {APIURL}/access-requests/{id}?wait_seconds=N).
func (b *HTTPBackend) AccessStatus(ctx context.Context, id string, waitSeconds int) (AccessAnswer, error) {
	if id == "" {
		return AccessAnswer{}, fmt.Errorf("%w: %w: no proposal id", ErrSandboxAPI, state.ErrInvalidArgument)
	}
	var ans AccessAnswer
	err := b.do(ctx, http.MethodGet, "/access-requests/"+url.PathEscape(id)+"?wait_seconds="+strconv.Itoa(waitSeconds), nil, &ans,
		http.StatusOK, http.StatusAccepted)
	return ans, err
}

// accessWait is how long one request_access call waits, in seconds.
func (s *MCPServer) accessWait() int {
	switch {
	case s.AccessWait < 0:
		return 0
	case s.AccessWait == 0:
		return int(defaultMCPAccessWait / time.Second)
	}
	return int(min(s.AccessWait, MaxAccessWait) / time.Second)
}

// addAccessTool adds RequestAccessTool to srv when lister can ask for
// access; each call runs on the backend backendOf picks.
func addAccessTool(srv *mcp.Server, lister ToolBackend, backendOf func(*mcp.CallToolRequest) (ToolBackend, error), wait int) {
	if _, ok := lister.(AccessBackend); !ok {
		return
	}
	srv.AddTool(requestAccessTool(wait), func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, err := backendOf(req)
		if err != nil {
			return toolError("%s: %v", RequestAccessTool, err), nil
		}
		ab, ok := b.(AccessBackend)
		if !ok {
			return toolError("%s: this server cannot ask for access", RequestAccessTool), nil
		}
		return requestAccessCall(ctx, req, ab, wait), nil
	})
}

func requestAccessTool(wait int) *mcp.Tool {
	return &mcp.Tool{
		Name: RequestAccessTool,
		Description: "Asks the human who runs this session for access to an HTTPS request that Aileron refuses because " +
			"no rule allows it (reason host_not_allowed or no_matching_operation; the refusal names a proposal_id). " +
			"Give the request's method, its full https:// URL and a justification: the human reads it before deciding. " +
			fmt.Sprintf("Waits up to %d seconds and answers the decision: accepted (send the request again), ", wait) +
			"rejected (with the human's reason: do not send it again), or still waiting (call again with only the " +
			"proposal_id to keep waiting). It cannot grant anything by itself.",
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"method":        stringProp("The request's HTTP method, such as GET or POST."),
				"url":           stringProp("The request's full https:// URL (the query is not kept)."),
				"justification": stringProp("Why the access is needed, for the human who decides: what for, and what it will do. At most 1024 bytes."),
				"proposal_id":   stringProp("Keep waiting for the decision on this earlier request (from a previous answer) instead of asking anew."),
			},
			"additionalProperties": false,
		},
	}
}

// accessArgs are RequestAccessTool's arguments.
type accessArgs struct {
	Method        string `json:"method"`
	URL           string `json:"url"`
	Justification string `json:"justification"`
	ProposalID    string `json:"proposal_id"`
}

func requestAccessCall(ctx context.Context, req *mcp.CallToolRequest, b AccessBackend, wait int) *mcp.CallToolResult {
	var in accessArgs
	if req != nil && req.Params != nil && len(req.Params.Arguments) > 0 {
		dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return toolError(`%s needs {"method", "url", "justification"}, or {"proposal_id"} to keep waiting: %v`, RequestAccessTool, err)
		}
	}
	var ans AccessAnswer
	var err error
	switch {
	case in.ProposalID != "":
		ans, err = b.AccessStatus(ctx, in.ProposalID, wait)
	case in.Method == "" || in.URL == "" || strings.TrimSpace(in.Justification) == "":
		return toolError(`%s needs {"method", "url", "justification"}: the request's method and full https:// URL, and why it is needed; or {"proposal_id"} to keep waiting`, RequestAccessTool)
	default:
		ans, err = b.RequestAccess(ctx, AccessRequest{Method: in.Method, URL: in.URL, Justification: in.Justification, WaitSeconds: wait})
	}
	if err != nil {
		var ref *dataplane.Refusal
		if errors.As(err, &ref) {
			return toolError("%s: %s (%s)", RequestAccessTool, ref.Message, ref.Reason)
		}
		return toolError("%s: %v", RequestAccessTool, err)
	}
	return accessToolResult(ans)
}

// accessToolResult renders ans: what it means for the agent, then the
// answer as JSON (also as structured content). A rejection is a tool error.
func accessToolResult(ans AccessAnswer) *mcp.CallToolResult {
	data, err := json.Marshal(ans)
	if err != nil {
		return toolError("the answer could not be encoded as JSON: %v", err)
	}
	var lead string
	switch ans.State {
	case AccessOpen:
		lead = fmt.Sprintf("Still waiting: no human has decided yet. Call %s again with {\"proposal_id\": %q} to keep waiting.",
			RequestAccessTool, ans.ProposalID)
	case AccessAccepted:
		lead = "Access granted: " + ans.Message + "."
	case AccessRejected:
		lead = "Access rejected by a human. Their reason: " + ans.Reason + ". Do not send this request again; find another way or ask the human."
	}
	return &mcp.CallToolResult{IsError: ans.State == AccessRejected, StructuredContent: json.RawMessage(data),
		Content: []mcp.Content{&mcp.TextContent{Text: lead + "\n" + string(data)}}}
}
