package sandboxapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
	"github.com/rs/zerolog"
)

// maxSandboxBody bounds a sandbox API request body.
const maxSandboxBody = 1 << 20

// Errors only the sandbox API produces.
var (
	errNoEndpoint      = errors.New("no such endpoint")
	errMethod          = errors.New("method not allowed")
	errNoSession       = errors.New("no authenticated session")
	errBodyTooLarge    = errors.New("request body too large")
	errFeatureDisabled = errors.New("not enabled on this daemon")
)

// sandboxEndpoints is what the 404 answer lists.
const sandboxEndpoints = "GET /v1/operations, GET /v1/operations/{tool}/{operation}, " +
	"POST /v1/connector-operations/run, GET /v1/actions, POST /v1/actions/{name}/run, " +
	"GET /v1/action-approvals/{id}/result, POST /v1/action-runs/{id}/cancel, " +
	"POST /v1/access-requests, GET /v1/access-requests/{id}, /v1/mcp"

// Runner is what the sandbox API needs of the action runner: a session's
// actions, running one, and polling a run. It is all the API can reach of
// the runner; *actions.Runner implements it.
type Runner interface {
	Actions(sess *dataplane.Session) actions.List
	Run(ctx context.Context, sess *dataplane.Session, name string, args map[string]any) (actions.Result, error)
	RunAttached(ctx context.Context, sess *dataplane.Session, name string, args map[string]any) (actions.Result, error)
	Result(ctx context.Context, sess *dataplane.Session, id string) (actions.Result, error)
	Cancel(ctx context.Context, sess *dataplane.Session, id, by string) (actions.Result, bool, error)
}

var _ Runner = (*actions.Runner)(nil)

// API is the HTTP API a sandbox reaches through the proxy at
// https://aileron.internal/v1 (dataplane.Proxy.SandboxAPI), authenticated
// by the session's proxy credentials (dataplane.SessionFrom). It offers
// only what a session may do itself; there is no endpoint to decide or list
// approvals, install connectors, bind credentials or read secrets.
//
//	GET  /v1/operations[?connector=FQN] → 200 OperationList: the session's callable
//	     operations with their input and output schemas
//	GET  /v1/operations/{tool}/{operation}[?connector=FQN] → 200 OperationInfo
//	     (409 when two connectors of the session offer the pair); both answer
//	     a strong ETag, the digest of the body, and 304 to If-None-Match.
//	POST /v1/connector-operations/run  {"connector_fqn","tool","operation","args"}
//	     → 200 {"status":"ok","audit_id","upstream_status","content_type","body"[,"truncated"]}
//	       (body is the upstream's JSON value when its Content-Type is JSON, else a string);
//	     ?output=body → the upstream's status, Content-Type and raw body, with
//	       X-Aileron-Upstream-Status and X-Aileron-Audit-Id headers.
//	     A refusal by the pipeline (denied, approval pending or denied, upstream
//	     failure) answers the refusal's status and {"status":"refused","error":{…}}.
//	GET  /v1/actions                    → 200 actions.List (ETag: the catalog version)
//	POST /v1/actions/{name}/run         body: the arguments object itself (empty = {})
//	     → 200 actions.Result (completed, failed, denied, cancelled), 202 (pending_approval, running);
//	     ?cancel=on_disconnect: the client leaving before the run ends cancels the run
//	     (the sandbox's MCP server asks for it; without it the run goes on)
//	GET  /v1/action-approvals/{id}/result → 200 actions.Result
//	POST /v1/action-runs/{id}/cancel    → 200 actions.Result (cancelled, or the final
//	     state of a run that already ended); id is the result's run_id or approval_id
//	POST /v1/access-requests            {"method","url","justification"[,"wait_seconds"]}
//	     → 202 AccessAnswer while no human has decided, 200 once one has
//	     (accepted, or rejected with the human's reason); it waits up to
//	     wait_seconds (0 to 60, default 0) for the decision
//	GET  /v1/access-requests/{id}[?wait_seconds=N] → the same, for one of
//	     the session's own access requests (another session's is 404)
//	     /v1/mcp                        → the MCP field (Streamable HTTP)
//
// Every error is the envelope {"error":{"class","reason","message"[,"audit_id",
// "approval_id","review_url"]}}: 400 invalid arguments, 401 no session, 404
// unknown endpoint, connector, operation, action or run (including another
// session's), 405 wrong method, 413 body over 1 MiB, 503 shutting down.
type API struct {
	// Policy is the compiled policy operations are resolved in; nil means
	// an empty policy.
	Policy *policy.Holder
	// Catalog returns the installed actions; nil means Runner's list.
	Catalog func() *action.Catalog
	// Exec runs operation calls. Required for the run endpoint.
	Exec actions.Executor
	// Runner runs actions; nil answers the action endpoints with 404.
	Runner Runner
	// MCP serves /v1/mcp; nil answers 404.
	MCP http.Handler
	// Access records access requests and waits for their decisions; nil
	// answers the access endpoints with 404.
	Access Access
	// MaxAccessWaits bounds the access requests one session waits on at
	// once (each re-reads the database while it waits); past it, a request
	// is answered at once, as it stands. 0 means 8.
	MaxAccessWaits int
	// ApprovalWait is how long the run endpoint waits for a human to
	// decide an approval-gated operation; 0 answers approval_pending at once
	// (the client retries the identical call after approval).
	ApprovalWait time.Duration
	// Log receives internal errors; nil discards them.
	Log *zerolog.Logger

	once sync.Once
	mux  *http.ServeMux

	stopOnce sync.Once
	stopCtx  context.Context
	stop     context.CancelFunc

	waitMu sync.Mutex
	waits  map[string]int // access waits per session
}

// ServeHTTP implements http.Handler.
// A path that is not clean (dot segments, "//") is answered 404, never
// redirected.
func (s *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.once.Do(s.routes)
	if p := r.URL.Path; p == "" || path.Clean(p) != strings.TrimSuffix(p, "/") && path.Clean(p) != p {
		s.writeError(w, fmt.Errorf("%w: %s %s; the sandbox API serves %s", errNoEndpoint, r.Method, clipPath(p), sandboxEndpoints))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *API) routes() {
	m := http.NewServeMux()
	route := func(method, path string, h func(http.ResponseWriter, *http.Request, *dataplane.Session)) {
		m.HandleFunc(method+" "+path, s.authed(h))
		m.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", method)
			s.writeError(w, fmt.Errorf("%w: %s %s; use %s", errMethod, r.Method, r.URL.Path, method))
		})
	}
	route(http.MethodGet, "/v1/operations", s.listOperations)
	route(http.MethodGet, "/v1/operations/{tool}/{operation}", s.getOperation)
	route(http.MethodPost, "/v1/connector-operations/run", s.runOperation)
	route(http.MethodGet, "/v1/actions", s.listActions)
	route(http.MethodPost, "/v1/actions/{name}/run", s.runAction)
	route(http.MethodGet, "/v1/action-approvals/{id}/result", s.actionResult)
	route(http.MethodPost, "/v1/action-runs/{id}/cancel", s.cancelRun)
	route(http.MethodPost, "/v1/access-requests", s.postAccessRequest)
	route(http.MethodGet, "/v1/access-requests/{id}", s.getAccessRequest)
	mcp := s.authed(func(w http.ResponseWriter, r *http.Request, _ *dataplane.Session) {
		if s.MCP == nil {
			s.writeError(w, fmt.Errorf("%w: this daemon does not serve MCP over HTTP", errFeatureDisabled))
			return
		}
		s.MCP.ServeHTTP(w, r)
	})
	m.HandleFunc("/v1/mcp", mcp)
	m.HandleFunc("/v1/mcp/", mcp)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, fmt.Errorf("%w: %s %s; the sandbox API serves %s", errNoEndpoint, r.Method, clipPath(r.URL.Path), sandboxEndpoints))
	})
	s.mux = m
}

// clipPath bounds a request path quoted in a message.
func clipPath(p string) string {
	if len(p) > 200 {
		p = p[:200] + "…"
	}
	return strconv.Quote(p)
}

// authed passes the request's session to h, answering 401 without one.
func (s *API) authed(h func(http.ResponseWriter, *http.Request, *dataplane.Session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := dataplane.SessionFrom(r.Context())
		if !ok {
			s.writeError(w, fmt.Errorf("%w: the sandbox API answers only through the proxy, with the session's proxy credentials", errNoSession))
			return
		}
		h(w, r, sess)
	}
}

func (s *API) policy() *policy.Policy {
	if s.Policy == nil {
		return nil
	}
	return s.Policy.Load()
}

// actionsFor lists the actions sess may run.
func (s *API) actionsFor(sess *dataplane.Session) actions.List {
	if s.Catalog == nil && s.Runner != nil {
		return s.Runner.Actions(sess)
	}
	var cat *action.Catalog
	if s.Catalog != nil {
		cat = s.Catalog()
	}
	return actions.ListFor(cat, sess)
}

// OperationRequest is the body of POST /v1/connector-operations/run and the
// arguments of the MCP tool run_operation.
type OperationRequest struct {
	ConnectorFQN string         `json:"connector_fqn"`
	Tool         string         `json:"tool"`
	Operation    string         `json:"operation"`
	Args         map[string]any `json:"args"`
}

// OperationResult answers a call the pipeline completed (the run endpoint's
// answer and run_operation's result).
type OperationResult struct {
	Status         string          `json:"status"`
	AuditID        string          `json:"audit_id"`
	UpstreamStatus int             `json:"upstream_status"`
	ContentType    string          `json:"content_type"`
	Body           json.RawMessage `json:"body"`
	Truncated      bool            `json:"truncated,omitempty"`
}

func (s *API) runOperation(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	raw := false
	switch out := r.URL.Query().Get("output"); out {
	case "":
	case "body":
		raw = true
	default:
		s.writeError(w, fmt.Errorf("%w: output=%s; the only value is output=body", state.ErrInvalidArgument, strconv.Quote(out)))
		return
	}
	var req OperationRequest
	if err := decodeSandboxBody(w, r, &req, true); err != nil {
		s.writeError(w, err)
		return
	}
	for _, f := range []struct{ name, v string }{{"connector_fqn", req.ConnectorFQN}, {"tool", req.Tool}, {"operation", req.Operation}} {
		if f.v == "" {
			s.writeError(w, fmt.Errorf("%w: request body: %q is missing; send {\"connector_fqn\", \"tool\", \"operation\", \"args\"}", state.ErrInvalidArgument, f.name))
			return
		}
	}
	res, err := s.runCall(r.Context(), sess, req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if res.Refusal != nil {
		writeCallRefusal(w, res)
		return
	}
	ct := res.Header.Get("Content-Type")
	if raw {
		h := w.Header()
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		h.Set(dataplane.HeaderUpstreamStatus, strconv.Itoa(res.Status))
		h.Set(dataplane.HeaderAuditID, res.AuditID)
		h.Set("Cache-Control", "no-store")
		if res.Truncated {
			h.Set(dataplane.HeaderTruncated, "true")
		}
		w.WriteHeader(http.StatusOK) // the upstream's status is in the header, never the daemon's own
		_, _ = w.Write(res.Body)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, OperationResult{Status: "ok", AuditID: res.AuditID, UpstreamStatus: res.Status,
		ContentType: ct, Body: responseBody(res, ct), Truncated: res.Truncated})
}

// responseBody is the upstream body as a JSON value: itself when it is JSON
// and announced as such, else a JSON string.
func responseBody(res dataplane.CallResult, ct string) json.RawMessage {
	if actions.IsJSON(ct) && !res.Truncated && json.Valid(res.Body) {
		var b bytes.Buffer
		if json.Compact(&b, res.Body) == nil {
			return b.Bytes()
		}
	}
	text, _ := json.Marshal(strings.ToValidUTF8(string(res.Body), "\uFFFD"))
	return text
}

// writeCallRefusal answers a refusal by the pipeline with its status and
// the envelope, as the proxy would have, marked "status": "refused".
func writeCallRefusal(w http.ResponseWriter, res dataplane.CallResult) {
	ref := *res.Refusal
	ref.AuditID, ref.Outcome = res.AuditID, "refused"
	if ref.Status < 400 {
		ref.Status = http.StatusBadGateway
	}
	dataplane.WriteRefusal(w, ref)
}

func (s *API) listActions(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	list := s.actionsFor(sess)
	etag := `"` + list.Version + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, list)
}

func (s *API) runAction(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	if s.Runner == nil {
		s.writeError(w, fmt.Errorf("%w: this daemon does not run actions", errFeatureDisabled))
		return
	}
	var args map[string]any
	if err := decodeSandboxBody(w, r, &args, false); err != nil {
		s.writeError(w, err)
		return
	}
	run := s.Runner.Run
	switch c := r.URL.Query().Get("cancel"); c {
	case "":
	case "on_disconnect":
		run = s.Runner.RunAttached
	default:
		s.writeError(w, fmt.Errorf("%w: cancel=%s; the only value is cancel=on_disconnect", state.ErrInvalidArgument, strconv.Quote(c)))
		return
	}
	res, err := run(r.Context(), sess, r.PathValue("name"), args)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeActionResult(w, r, res)
}

// writeActionResult answers an action run: 202 while it waits or runs (with
// X-Aileron-Approval-Id and X-Aileron-Message for the shims), 200 once it
// ended. With ?output=body a completed run answers its output alone.
func writeActionResult(w http.ResponseWriter, r *http.Request, res actions.Result) {
	status := http.StatusOK
	if res.Status == actions.StatusPendingApproval || res.Status == actions.StatusRunning {
		status = http.StatusAccepted
		if res.ApprovalID != "" {
			w.Header().Set(dataplane.HeaderApprovalID, res.ApprovalID)
		}
		w.Header().Set(dataplane.HeaderMessage, dataplane.HeaderLine(res.Message))
	}
	if res.Error != nil {
		w.Header().Set(dataplane.HeaderMessage, dataplane.HeaderLine(res.Error.Message))
	}
	if r.URL.Query().Get("output") == "body" && res.Status == actions.StatusCompleted {
		dataplane.WriteJSON(w, status, res.Output)
		return
	}
	if res.Status == actions.StatusFailed || res.Status == actions.StatusDenied || res.Status == actions.StatusCancelled {
		w.Header().Set(dataplane.HeaderUpstreamStatus, "0") // the shim exits 1: the action did not complete
	}
	dataplane.WriteJSON(w, status, res)
}

func (s *API) actionResult(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	if s.Runner == nil {
		s.writeError(w, fmt.Errorf("%w: this daemon does not run actions", errFeatureDisabled))
		return
	}
	res, err := s.Runner.Result(r.Context(), sess, r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, res)
}

// cancelRun cancels one of the session's action runs.
func (s *API) cancelRun(w http.ResponseWriter, r *http.Request, sess *dataplane.Session) {
	if s.Runner == nil {
		s.writeError(w, fmt.Errorf("%w: this daemon does not run actions", errFeatureDisabled))
		return
	}
	res, _, err := s.Runner.Cancel(r.Context(), sess, r.PathValue("id"), "session "+sess.ID+" (sandbox API)")
	if err != nil {
		s.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, res)
}

// decodeSandboxBody reads one JSON object (at most 1 MiB, numbers kept as
// json.Number, nothing after it) into v; strict rejects unknown fields. An
// empty body decodes as {}. Failures wrap state.ErrInvalidArgument or
// errBodyTooLarge.
func decodeSandboxBody(w http.ResponseWriter, r *http.Request, v any, strict bool) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSandboxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return fmt.Errorf("%w: the body is over %d bytes", errBodyTooLarge, maxSandboxBody)
	}
	if err != nil {
		return fmt.Errorf("%w: reading the request body: %v", state.ErrInvalidArgument, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body must be a JSON object: %v", state.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: request body holds more than one JSON value", state.ErrInvalidArgument)
	}
	return nil
}

// sandboxErrors is consulted in order; the first sentinel err wraps wins.
func sandboxErrors() []dataplane.ErrorRule {
	return []dataplane.ErrorRule{
		{Target: errNoSession, Status: http.StatusUnauthorized, Class: dataplane.ClassProxyAuth, Reason: policy.ReasonProxyAuth},
		{Target: errBodyTooLarge, Status: http.StatusRequestEntityTooLarge, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonBodyTooLarge},
		{Target: state.ErrInvalidArgument, Status: http.StatusBadRequest, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidArgument},
		{Target: errMethod, Status: http.StatusMethodNotAllowed, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonMethodNotAllowed},
		{Target: errNoEndpoint, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNoRoute},
		{Target: errFeatureDisabled, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNotEnabled},
		{Target: state.ErrNotFound, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNotFound},
		{Target: state.ErrConflict, Status: http.StatusConflict, Class: dataplane.ClassConflict, Reason: policy.ReasonConflict},
		{Target: actions.ErrClosed, Status: http.StatusServiceUnavailable, Class: dataplane.ClassUnavailable, Reason: policy.ReasonShuttingDown},
		{Target: dataplane.ErrApprovalLimit, Status: http.StatusTooManyRequests, Class: dataplane.ClassLimited, Reason: policy.ReasonApprovalLimit},
	}
}

// writeError is the sandbox API's single error path: it classifies err by
// the sentinel it wraps and answers with the refusal envelope. Anything
// unclassified is a 500, logged, and answered without the daemon's detail.
func (s *API) writeError(w http.ResponseWriter, err error) {
	ref := dataplane.RefuseError(err, sandboxErrors())
	if ref.Status >= 500 {
		if s.Log != nil {
			s.Log.Error().Str("event", "sandbox.api_error").Str("reason", string(ref.Reason)).Err(err).Msg("sandbox API request failed")
		}
		if ref.Status == http.StatusInternalServerError {
			ref.Message = "the daemon failed to process the request; its log has the details"
		}
	}
	dataplane.WriteRefusal(w, ref)
}
