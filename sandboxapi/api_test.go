package sandboxapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
)

// opRun is the body of the run endpoint.
func opRun(tool, op string, args map[string]any) map[string]any {
	return map[string]any{"connector_fqn": itemsFQN, "tool": tool, "operation": op, "args": args}
}

func TestSandboxAPIRunOperation(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	tests := []struct {
		name       string
		session    string
		query      string
		body       any
		status     int
		reason     policy.Reason // error envelope reason
		has        []string      // in the message or body
		upstream   string        // URI the upstream must have seen
		upBody     string        // body the upstream must have seen
		noUpstream bool
	}{
		{name: "GET with query args", body: opRun("items", "get", map[string]any{"id": "a b", "tags": []any{"x", "y"}, "n": json.Number("12345678901234567890")}),
			status: 200, upstream: "/v1/items/a%20b?n=12345678901234567890&tags=x&tags=y"},
		{name: "POST with JSON body", body: opRun("items", "create", map[string]any{"project": "p1", "title": "T", "n": 1.5}),
			status: 200, upstream: "/v1/projects/p1/items", upBody: `{"n":1.5,"title":"T"}`},
		{name: "missing path arg", body: opRun("items", "get", map[string]any{"q": 1}), status: 400, reason: "invalid_argument",
			has: []string{`missing argument "id"`}, noUpstream: true},
		{name: "unknown operation", body: opRun("items", "nope", nil), status: 404, reason: "not_found",
			has: []string{`no operation "nope"`, "get"}, noUpstream: true},
		{name: "unknown connector", body: map[string]any{"connector_fqn": "local://x/y", "tool": "t", "operation": "o"}, status: 404,
			reason: "not_found", has: []string{"not installed", itemsFQN}, noUpstream: true},
		{name: "connector outside the session's scope", session: "scoped",
			body:   map[string]any{"connector_fqn": tdLinearFQN, "tool": "linear", "operation": "get-issue", "args": map[string]any{"id": "1"}},
			status: 404, reason: "not_found", has: []string{"not available to this session"}, noUpstream: true},
		{name: "unknown field", body: `{"connector_fqn":"local://test/items","tool":"items","operation":"get","argz":{}}`, status: 400,
			reason: "invalid_argument", has: []string{"argz"}, noUpstream: true},
		{name: "missing field", body: `{"connector_fqn":"local://test/items","operation":"get"}`, status: 400,
			reason: "invalid_argument", has: []string{`"tool" is missing`}, noUpstream: true},
		{name: "not JSON", body: `{"connector_fqn":`, status: 400, reason: "invalid_argument", noUpstream: true},
		{name: "trailing data", body: `{} {}`, status: 400, reason: "invalid_argument", noUpstream: true},
		{name: "bad output", query: "?output=raw", body: opRun("items", "get", map[string]any{"id": "1"}), status: 400,
			reason: "invalid_argument", has: []string{"output=body"}, noUpstream: true},
		{name: "too large", body: `{"connector_fqn":"` + strings.Repeat("x", 1<<20) + `"}`, status: 413, reason: "body_too_large", noUpstream: true},
		{name: "upstream error is ok", body: opRun("items", "get", map[string]any{"id": "boom"}), status: 200,
			upstream: "/v1/items/boom", has: []string{`"upstream_status": 500`, `"body": "boom"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sess := tc.session
			if sess == "" {
				sess = "s1"
			}
			before := len(e.upstreamHits())
			res := e.do(t, sess, "POST", "/v1/connector-operations/run"+tc.query, tc.body)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			text := string(res.body)
			if tc.reason != "" {
				env := res.envelope(t)
				if env.Reason != tc.reason {
					t.Errorf("reason %q, want %q", env.Reason, tc.reason)
				}
				text = env.Message
			}
			for _, s := range tc.has {
				if !strings.Contains(text, s) {
					t.Errorf("answer %s does not contain %q", text, s)
				}
			}
			hits := e.upstreamHits()[before:]
			if tc.noUpstream {
				if len(hits) != 0 {
					t.Fatalf("upstream reached: %+v", hits)
				}
				return
			}
			if len(hits) != 1 || hits[0].URI != tc.upstream || (tc.upBody != "" && string(hits[0].Body) != tc.upBody) {
				t.Fatalf("upstream saw %+v, want %s %s", hits, tc.upstream, tc.upBody)
			}
			var out struct {
				Status         string          `json:"status"`
				AuditID        string          `json:"audit_id"`
				UpstreamStatus int             `json:"upstream_status"`
				ContentType    string          `json:"content_type"`
				Body           json.RawMessage `json:"body"`
			}
			res.decode(t, &out)
			if out.Status != "ok" || out.AuditID == "" || out.ContentType == "" || len(out.Body) == 0 {
				t.Errorf("answer %s", res.body)
			}
		})
	}
}

// TestSandboxAPIRunOperationBodies: a JSON upstream body is a JSON value, a
// text body a string; output=body answers the raw upstream response.
func TestSandboxAPIRunOperationBodies(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	res := e.do(t, "s1", "POST", "/v1/connector-operations/run", opRun("items", "create", map[string]any{"project": "p", "x": "<&>"}))
	var out struct {
		UpstreamStatus int `json:"upstream_status"`
		Body           struct {
			Method, URI, Body string
			ContentType       string `json:"content_type"`
		} `json:"body"`
	}
	res.decode(t, &out)
	if out.UpstreamStatus != 200 || out.Body.Method != "POST" || out.Body.Body != `{"x":"<&>"}` || out.Body.ContentType != "application/json" {
		t.Fatalf("JSON body not passed as a value: %s", res.body)
	}

	res = e.do(t, "s1", "POST", "/v1/connector-operations/run", opRun("items", "get", map[string]any{"id": "text"}))
	var txt struct {
		UpstreamStatus int    `json:"upstream_status"`
		ContentType    string `json:"content_type"`
		Body           string `json:"body"`
	}
	res.decode(t, &txt)
	if res.status != 200 || txt.UpstreamStatus != 418 || txt.ContentType != "text/plain" || txt.Body != "plain text" {
		t.Fatalf("text body: %d %s", res.status, res.body)
	}

	res = e.do(t, "s1", "POST", "/v1/connector-operations/run?output=body", opRun("items", "get", map[string]any{"id": "text"}))
	if res.status != 200 || string(res.body) != "plain text" || res.header.Get("Content-Type") != "text/plain" ||
		res.header.Get("X-Aileron-Upstream-Status") != "418" || res.header.Get("X-Aileron-Audit-Id") == "" ||
		res.header.Get("X-Upstream") != "" {
		t.Fatalf("output=body: %d %v %s", res.status, res.header, res.body)
	}
	// A refusal keeps the envelope even with output=body.
	res = e.do(t, "s1", "POST", "/v1/connector-operations/run?output=body", opRun("items", "delete", map[string]any{"id": "1"}))
	if env := res.envelope(t); res.status != http.StatusForbidden || env.Reason != "approval_pending" {
		t.Fatalf("refusal with output=body: %d %s", res.status, res.body)
	}
}

func TestSandboxAPIRunOperationApprovalGated(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	call := opRun("items", "delete", map[string]any{"id": "i1", "force": true})
	res := e.do(t, "s1", "POST", "/v1/connector-operations/run", call)
	env := res.envelope(t)
	if res.status != http.StatusForbidden || env.Reason != "approval_pending" || env.ApprovalID == "" ||
		env.ReviewURL != "https://aileron.test/approvals/"+env.ApprovalID || env.AuditID == "" {
		t.Fatalf("first call: %d %s", res.status, res.body)
	}
	var top struct{ Status string }
	res.decode(t, &top)
	if top.Status != "refused" || res.header.Get("X-Aileron-Approval-Id") != env.ApprovalID {
		t.Errorf("refusal status %q header %q", top.Status, res.header.Get("X-Aileron-Approval-Id"))
	}
	if n := e.countHits("DELETE", "api.example.com"); n != 0 {
		t.Fatalf("sent before approval: %d", n)
	}
	// Another session's identical call does not join this approval.
	other := e.do(t, "s2", "POST", "/v1/connector-operations/run", call).envelope(t)
	if other.ApprovalID == env.ApprovalID {
		t.Fatal("session s2 joined s1's approval")
	}
	if err := e.store.Approve(t.Context(), env.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	res = e.do(t, "s1", "POST", "/v1/connector-operations/run", call)
	if res.status != 200 {
		t.Fatalf("after approval: %d %s", res.status, res.body)
	}
	if n := e.countHits("DELETE", "api.example.com"); n != 1 {
		t.Fatalf("sent %d times, want 1", n)
	}
	// The approval released one request; the next identical call asks anew.
	res = e.do(t, "s1", "POST", "/v1/connector-operations/run", call)
	if env2 := res.envelope(t); env2.Reason != "approval_pending" || env2.ApprovalID == env.ApprovalID {
		t.Fatalf("third call: %d %s", res.status, res.body)
	}
	if n := e.countHits("DELETE", "api.example.com"); n != 1 {
		t.Fatalf("sent %d times, want 1", n)
	}
}

func TestSandboxAPIListActions(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	tests := []struct {
		session string
		want    []string
	}{
		{"s1", []string{"comment-create", "get-issue", "send-email"}},
		{"scoped", []string{"send-email"}},
	}
	for _, tc := range tests {
		res := e.do(t, tc.session, "GET", "/v1/actions", nil)
		var list actions.List
		res.decode(t, &list)
		var names []string
		for _, a := range list.Actions {
			names = append(names, a.Name)
		}
		if res.status != 200 || strings.Join(names, ",") != strings.Join(tc.want, ",") || list.Version == "" {
			t.Fatalf("%s: %d %v %s", tc.session, res.status, names, res.body)
		}
		if res.header.Get("ETag") != `"`+list.Version+`"` {
			t.Errorf("ETag %q", res.header.Get("ETag"))
		}
	}
	var list actions.List
	e.do(t, "s1", "GET", "/v1/actions", nil).decode(t, &list)
	send := list.Actions[2]
	if send.ToolName != "send_email" || !send.ApprovalRequired || send.Connector != tdGoogleFQN || send.InputSchema["type"] != "object" ||
		!strings.Contains(send.Description, "Sends an e-mail") {
		t.Errorf("send-email: %+v", send)
	}
}

// TestSandboxAPIWithoutSession: the handler answers nothing without the
// session the proxy puts in the context.
func TestSandboxAPIWithoutSession(t *testing.T) {
	api := &API{Runner: &actions.Runner{}}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/actions"}, {"GET", "/v1/operations"}, {"GET", "/v1/operations/items/get"}, {"POST", "/v1/connector-operations/run"}, {"POST", "/v1/actions/get-issue/run"},
		{"GET", "/v1/action-approvals/ap_x/result"}, {"POST", "/v1/mcp"},
	} {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}")))
		var env dataplane.Refusal
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != http.StatusUnauthorized ||
			env.Reason != "proxy_auth_required" {
			t.Errorf("%s %s: %d %s (%v)", tc.method, tc.path, w.Code, w.Body, err)
		}
	}
}

func TestSandboxAPIUnknownEndpointsAndMethods(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	tests := []struct {
		method, path string
		status       int
		reason       policy.Reason
	}{
		{"GET", "/v1/nope", 404, "no_route"},
		{"GET", "/", 404, "no_route"},
		{"GET", "/v1/connector-operations/run", 405, "method_not_allowed"},
		{"POST", "/v1/actions", 405, "method_not_allowed"},
		{"POST", "/v1/operations", 405, "method_not_allowed"},
		{"DELETE", "/v1/operations/items/get", 405, "method_not_allowed"},
		{"GET", "/v1/operations/items", 404, "no_route"},
		{"GET", "/v1/actions/get-issue/run", 405, "method_not_allowed"},
		{"POST", "/v1/action-approvals/x/result", 405, "method_not_allowed"},
		{"GET", "/v1/mcp", 404, "not_enabled"},
		{"GET", "/v1/action-approvals/ap_unknown/result", 404, "not_found"},
		{"POST", "/v1/actions/no-such-action/run", 404, "not_found"},
	}
	for _, tc := range tests {
		res := e.do(t, "s1", tc.method, tc.path, nil)
		env := res.envelope(t)
		if res.status != tc.status || env.Reason != tc.reason {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, res.status, env.Reason, tc.status, tc.reason)
		}
		if tc.reason == "no_route" && (!strings.Contains(env.Message, "POST /v1/connector-operations/run") ||
			!strings.Contains(env.Message, "GET /v1/operations/{tool}/{operation}")) {
			t.Errorf("%s %s: message does not list the endpoints: %s", tc.method, tc.path, env.Message)
		}
	}
}

// TestSandboxAPIHasNoAdminEndpoints is invariant 7: nothing a sandbox
// reaches approves, denies or lists approvals, installs, binds or reads
// secrets.
func TestSandboxAPIHasNoAdminEndpoints(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	res := e.do(t, "s1", "POST", "/v1/connector-operations/run", opRun("items", "delete", map[string]any{"id": "keep"}))
	id := res.envelope(t).ApprovalID
	if id == "" {
		t.Fatalf("no approval: %s", res.body)
	}
	paths := []string{
		"/v1/approvals", "/v1/approvals/" + id, "/v1/approvals/" + id + "/approve", "/v1/approvals/" + id + "/deny",
		"/v1/action-approvals/" + id, "/v1/action-approvals/" + id + "/approve", "/v1/action-approvals/" + id + "/deny",
		"/v1/action-approvals/" + id + "/result/approve", "/v1/credentials", "/v1/credentials/linear", "/v1/bindings",
		"/v1/connectors", "/v1/connectors/install", "/v1/sessions", "/v1/sessions/s2", "/v1/policy/reload", "/v1/secrets",
		"/admin/approvals", "/admin/approvals/" + id + "/approve", "/approvals/" + id, "/v1/actions/../approvals/" + id + "/approve",
		"/v1//approvals/" + id + "/approve", "/v1/actions/send-email", "/v1/actions/send-email/approve", "/v1/vault",
	}
	for _, p := range paths {
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			res := e.do(t, "s1", m, p, map[string]any{"approve": true, "reason": "x", "by": "sandbox"})
			// The proxy itself refuses non-canonical paths before the API sees them.
			proxyRefused := res.status == 403 && res.envelope(t).Reason == "non_canonical_path"
			if res.status != 404 && res.status != 405 && !proxyRefused {
				t.Errorf("%s %s: %d %s", m, p, res.status, res.body)
			}
		}
	}
	a, err := e.store.Get(t.Context(), id)
	if err != nil || a.State != dataplane.ApprovalStatePending {
		t.Fatalf("approval %s is %q (%v), want pending", id, a.State, err)
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
}
