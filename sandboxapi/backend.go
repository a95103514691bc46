package sandboxapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
)

// ErrSandboxAPI is wrapped by every HTTPBackend error: the API could not be
// reached, answered an error (then a *dataplane.Refusal is wrapped too, carrying the
// envelope's class, reason and message) or answered something unreadable.
var ErrSandboxAPI = errors.New("sandbox API request failed")

// maxSandboxAnswer bounds an answer of the sandbox API (an action's output
// holds an upstream body of up to 8 MiB, JSON-escaped).
const maxSandboxAnswer = 32 << 20

// HTTPBackend is the ToolBackend of `aileron mcp` in the sandbox: it speaks
// the sandbox API at APIURL (AILERON_API_URL, normally
// https://aileron.internal/v1): GET {APIURL}/actions,
// POST {APIURL}/actions/{name}/run,
// GET {APIURL}/action-approvals/{id}/result, and for the operation tools
// GET {APIURL}/operations and POST {APIURL}/connector-operations/run, and
// for request_access POST {APIURL}/access-requests and
// GET {APIURL}/access-requests/{id}. It is safe for concurrent use.
type HTTPBackend struct {
	// APIURL is the sandbox API's base URL, ending in /v1.
	APIURL string
	// Client sends the requests. Nil means http.DefaultClient, which goes
	// through HTTPS_PROXY (credentials in its userinfo become
	// Proxy-Authorization) and trusts the system roots, which on Unix are
	// read from SSL_CERT_FILE / SSL_CERT_DIR when set — the session's
	// environment as `aileron launch` sets it.
	Client *http.Client
}

// HTTPBackendFromEnv is the HTTPBackend of AILERON_API_URL as getenv reports
// it (nil means os.Getenv).
//
// Errors: an unset or unusable AILERON_API_URL wraps state.ErrInvalidArgument.
func HTTPBackendFromEnv(getenv func(string) string) (*HTTPBackend, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	b := &HTTPBackend{APIURL: getenv("AILERON_API_URL")}
	if b.APIURL == "" {
		return nil, fmt.Errorf("%w: AILERON_API_URL is not set; run the agent under `aileron launch` (or set it to the session's sandbox API, normally https://aileron.internal/v1)", state.ErrInvalidArgument)
	}
	if _, err := b.base(); err != nil {
		return nil, err
	}
	return b, nil
}

// Actions lists the session's actions (GET {APIURL}/actions).
func (b *HTTPBackend) Actions(ctx context.Context) (actions.List, error) {
	var l actions.List
	err := b.do(ctx, http.MethodGet, "/actions", nil, &l, http.StatusOK)
	return l, err
}

// RunAction runs action name with args (POST
// {APIURL}/actions/{name}/run?cancel=on_disconnect); a 202 answer is the
// pending_approval result. ctx ending before the answer (the MCP client's
// notifications/cancelled) ends the request, which cancels the run.
func (b *HTTPBackend) RunAction(ctx context.Context, name string, args map[string]any) (actions.Result, error) {
	if name == "" {
		return actions.Result{}, fmt.Errorf("%w: %w: no action name", ErrSandboxAPI, state.ErrInvalidArgument)
	}
	if args == nil {
		args = map[string]any{}
	}
	body, err := json.Marshal(args)
	if err != nil {
		return actions.Result{}, fmt.Errorf("%w: %w: the arguments of action %s are not JSON: %v", ErrSandboxAPI, state.ErrInvalidArgument, name, err)
	}
	var res actions.Result
	err = b.do(ctx, http.MethodPost, "/actions/"+url.PathEscape(name)+"/run?cancel=on_disconnect", body, &res, http.StatusOK, http.StatusAccepted)
	return res, err
}

// ActionStatus reports the run waiting on approval id
// (GET {APIURL}/action-approvals/{id}/result).
func (b *HTTPBackend) ActionStatus(ctx context.Context, id string) (actions.Result, error) {
	if id == "" {
		return actions.Result{}, fmt.Errorf("%w: %w: no approval id", ErrSandboxAPI, state.ErrInvalidArgument)
	}
	var res actions.Result
	err := b.do(ctx, http.MethodGet, "/action-approvals/"+url.PathEscape(id)+"/result", nil, &res, http.StatusOK)
	return res, err
}

// base is APIURL checked and without a trailing slash.
func (b *HTTPBackend) base() (string, error) {
	u, err := url.Parse(b.APIURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: AILERON_API_URL %q is not an http(s) base URL like https://aileron.internal/v1", state.ErrInvalidArgument, b.APIURL)
	}
	return strings.TrimRight(b.APIURL, "/"), nil
}

// do sends one request and decodes an answer with one of the ok statuses into
// out (an actions.Result must carry a status).
func (b *HTTPBackend) do(ctx context.Context, method, path string, body []byte, out any, ok ...int) error {
	base, err := b.base()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSandboxAPI, err)
	}
	target := base + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrSandboxAPI, method, target, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	client := b.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v (is the daemon running, and are AILERON_API_URL, HTTPS_PROXY and SSL_CERT_FILE those of the session?)",
			ErrSandboxAPI, method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSandboxAnswer+1))
	if err != nil {
		return fmt.Errorf("%w: %s %s: reading the answer: %v", ErrSandboxAPI, method, target, err)
	}
	if len(data) > maxSandboxAnswer {
		return fmt.Errorf("%w: %s %s: the answer is over %d MiB", ErrSandboxAPI, method, target, maxSandboxAnswer>>20)
	}
	if !intIn(resp.StatusCode, ok) {
		return fmt.Errorf("%w: %s %s: %w", ErrSandboxAPI, method, target, dataplane.ParseRefusal(resp.StatusCode, data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s %s: the HTTP %d answer is not the expected JSON: %v", ErrSandboxAPI, method, target, resp.StatusCode, err)
	}
	if res, isResult := out.(*actions.Result); isResult && res.Status == "" {
		return fmt.Errorf("%w: %s %s: the HTTP %d answer has no status", ErrSandboxAPI, method, target, resp.StatusCode)
	}
	return nil
}

func intIn(v int, set []int) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}
