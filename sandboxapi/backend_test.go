package sandboxapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// fakeSandboxAPI serves the sandbox API's action endpoints over fb, in the
// wire format HTTPBackend speaks.
func fakeSandboxAPI(fb *fakeBackend) http.Handler {
	writeErr := func(w http.ResponseWriter, err error) {
		var ae *dataplane.Refusal
		if !errors.As(err, &ae) {
			ae = &dataplane.Refusal{Status: 500, Class: "internal", Reason: "internal", Message: err.Error()}
		}
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: ae.Status, Class: ae.Class, Reason: ae.Reason, Message: ae.Message})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/actions", func(w http.ResponseWriter, r *http.Request) {
		l, err := fb.Actions(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, l)
	})
	mux.HandleFunc("POST /v1/actions/{name}/run", func(w http.ResponseWriter, r *http.Request) {
		switch r.PathValue("name") {
		case "plain-502":
			http.Error(w, "bad gateway from somewhere", http.StatusBadGateway)
			return
		case "garbage":
			w.Write([]byte("not json"))
			return
		case "no-status":
			w.Write([]byte(`{"output":1}`))
			return
		}
		var args map[string]any
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&args) != nil {
			writeErr(w, &dataplane.Refusal{Status: 400, Class: "bad_request", Reason: "invalid_args", Message: "body must be a JSON object"})
			return
		}
		res, err := fb.RunAction(r.Context(), r.PathValue("name"), args)
		if err != nil {
			writeErr(w, err)
			return
		}
		status := http.StatusOK
		if res.Status == actions.StatusPendingApproval {
			status = http.StatusAccepted
		}
		dataplane.WriteJSON(w, status, res)
	})
	mux.HandleFunc("GET /v1/action-approvals/{id}/result", func(w http.ResponseWriter, r *http.Request) {
		res, err := fb.ActionStatus(r.Context(), r.PathValue("id"))
		if err != nil {
			writeErr(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, res)
	})
	return mux
}

func TestHTTPBackend(t *testing.T) {
	noLeaks(t)
	fb := newFakeBackend()
	fb.statuses["ap/2 x"] = actions.Result{Status: actions.StatusDenied, Error: &actions.RunError{Reason: "approval_denied", Message: "not today"}}
	srv := httptest.NewServer(fakeSandboxAPI(fb))
	defer srv.Close()
	b := &HTTPBackend{APIURL: srv.URL + "/v1/", Client: srv.Client()}

	l, err := b.Actions(t.Context())
	if err != nil || !reflect.DeepEqual(jsonNorm(t, l), jsonNorm(t, fb.list)) {
		t.Fatalf("Actions = %+v, %v; want %+v", l, err, fb.list)
	}

	cases := []struct {
		name       string
		do         func() (actions.Result, error)
		want       actions.Result
		wantStatus int // of the *dataplane.Refusal; 0 = success
		wantReason policy.Reason
		wantMsg    string
	}{
		{name: "200 completed", do: func() (actions.Result, error) {
			return b.RunAction(t.Context(), "list-issues", map[string]any{"team": "eng"})
		},
			want: fb.results["list-issues"]},
		{name: "202 pending", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "issue-create", nil) },
			want: fb.results["issue-create"]},
		{name: "status with escaped id", do: func() (actions.Result, error) { return b.ActionStatus(t.Context(), "ap/2 x") },
			want: fb.statuses["ap/2 x"]},
		{name: "error envelope", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "nope", nil) },
			wantStatus: 404, wantReason: "unknown_action", wantMsg: "no action nope"},
		{name: "envelope on status", do: func() (actions.Result, error) { return b.ActionStatus(t.Context(), "ap_zz") },
			wantStatus: 404, wantReason: "unknown_approval", wantMsg: "no approval ap_zz"},
		{name: "non-envelope error", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "plain-502", nil) },
			wantStatus: 502, wantReason: "unexpected_answer", wantMsg: "HTTP 502 Bad Gateway: bad gateway from somewhere"},
		{name: "not JSON", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "garbage", nil) }, wantMsg: "not the expected JSON"},
		{name: "no status", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "no-status", nil) }, wantMsg: "has no status"},
		{name: "empty name", do: func() (actions.Result, error) { return b.RunAction(t.Context(), "", nil) }, wantMsg: "no action name"},
		{name: "empty id", do: func() (actions.Result, error) { return b.ActionStatus(t.Context(), "") }, wantMsg: "no approval id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.do()
			if tc.wantMsg == "" {
				if err != nil || !reflect.DeepEqual(jsonNorm(t, got), jsonNorm(t, tc.want)) {
					t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrSandboxAPI) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("error %v, want ErrSandboxAPI mentioning %q", err, tc.wantMsg)
			}
			var ae *dataplane.Refusal
			if isAPI := errors.As(err, &ae); isAPI != (tc.wantStatus != 0) {
				t.Fatalf("error %v: *dataplane.Refusal %v, want %v", err, isAPI, tc.wantStatus != 0)
			}
			if ae != nil && (ae.Status != tc.wantStatus || ae.Reason != tc.wantReason) {
				t.Errorf("APIError %+v, want HTTP %d reason %s", ae, tc.wantStatus, tc.wantReason)
			}
		})
	}
	if i := slices.IndexFunc(fb.runs, func(r fakeRun) bool { return r.Name == "issue-create" }); i < 0 || fb.runs[i].Args == nil || len(fb.runs[i].Args) != 0 {
		t.Errorf("runs %+v: nil args should reach the API as an empty object", fb.runs)
	}
}

func TestHTTPBackendUnreachableOrMisconfigured(t *testing.T) {
	noLeaks(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	client := srv.Client()
	srv.Close()
	cases := []struct {
		name string
		b    *HTTPBackend
		want []error
		msg  string
	}{
		{"closed server", &HTTPBackend{APIURL: url + "/v1", Client: client}, []error{ErrSandboxAPI}, "AILERON_API_URL, HTTPS_PROXY"},
		{"not a URL", &HTTPBackend{APIURL: "aileron.internal/v1"}, []error{ErrSandboxAPI, state.ErrInvalidArgument}, "not an http(s) base URL"},
		{"empty", &HTTPBackend{}, []error{ErrSandboxAPI, state.ErrInvalidArgument}, "AILERON_API_URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.b.Actions(t.Context())
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("error %v does not wrap %v", err, want)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want it to mention %q", err, tc.msg)
			}
		})
	}
}

func TestHTTPBackendFromEnv(t *testing.T) {
	cases := []struct {
		env     string
		wantErr bool
	}{
		{"https://aileron.internal/v1", false},
		{"", true},
		{"ftp://aileron.internal/v1", true},
		{"https://aileron.internal/v1?x=1", true},
	}
	for _, tc := range cases {
		b, err := HTTPBackendFromEnv(func(k string) string {
			if k == "AILERON_API_URL" {
				return tc.env
			}
			return ""
		})
		if tc.wantErr {
			if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), "AILERON_API_URL") {
				t.Errorf("%q: error %v, want state.ErrInvalidArgument naming AILERON_API_URL", tc.env, err)
			}
			continue
		}
		if err != nil || b.APIURL != tc.env {
			t.Errorf("%q: %+v, %v", tc.env, b, err)
		}
	}
}

// TestHTTPBackendBehindMCP is the sandbox's `aileron mcp`: an MCP client
// calls tools that HTTPBackend forwards to the sandbox API.
func TestHTTPBackendBehindMCP(t *testing.T) {
	noLeaks(t)
	ctx := testCtx(t)
	fb := newFakeBackend()
	srv := httptest.NewServer(fakeSandboxAPI(fb))
	defer srv.Close()
	b := &HTTPBackend{APIURL: srv.URL + "/v1", Client: srv.Client()}
	cs := stdioConnector().connect(t, ctx, &MCPServer{Refresh: time.Hour}, b, nil)

	res := call(t, ctx, cs, "issue_create", map[string]any{"title": "Bug"})
	if ar := structured(t, res); res.IsError || ar.Status != actions.StatusPendingApproval || ar.ApprovalID != "ap_1" {
		t.Fatalf("issue_create = %+v", ar)
	}
	fb.setStatus("ap_1", actions.Result{Status: actions.StatusCompleted, ApprovalID: "ap_1", Output: "ENG-3"})
	if ar := structured(t, call(t, ctx, cs, CheckActionStatusTool, map[string]any{"approval_id": "ap_1"})); ar.Status != actions.StatusCompleted || ar.Output != "ENG-3" {
		t.Errorf("after approval = %+v", ar)
	}
	res = call(t, ctx, cs, "fail_hard", nil)
	if !res.IsError || !strings.Contains(texts(res), "the daemon refused: unknown_action") {
		t.Errorf("fail_hard = %q, want the API's message", texts(res))
	}
}

var _ ToolBackend = (*HTTPBackend)(nil)
var _ http.Handler = (*MCPHTTPHandler)(nil)
