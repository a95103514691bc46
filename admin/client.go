package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/fence"
	"github.com/aileronhq/aileron/notify"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// maxAnswer bounds how much of an admin API answer the client reads.
const maxAnswer = 16 << 20

// Client speaks the admin API over the daemon's unix socket. The zero value
// is not usable: set Socket. A Client is safe for concurrent use.
//
// Every method fails wrapping ErrDaemonUnreachable when nothing answers on
// Socket, and returns a *dataplane.Refusal when the daemon answers with an
// error.
type Client struct {
	// Socket is the admin socket path, normally $AILERON_HOME/admin.sock.
	Socket string
	// HTTPClient overrides the transport (tests). Nil means a client that
	// dials Socket.
	HTTPClient *http.Client
}

// TestWebhooks sends a test event to every approval webhook and returns
// how each answered.
func (c *Client) TestWebhooks(ctx context.Context) ([]notify.Result, error) {
	var out webhookResults
	err := c.do(ctx, http.MethodPost, "/v1/approvals/webhooks/test", nil, &out)
	return out.Results, err
}

// Config returns the running daemon's configuration as YAML, and its pid.
func (c *Client) Config(ctx context.Context) (yaml []byte, pid int, err error) {
	var out runningConfig
	err = c.do(ctx, http.MethodGet, "/v1/config", nil, &out)
	return []byte(out.YAML), out.PID, err
}

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/v1/health", nil, nil)
}

// CreateSession creates a session; the answer includes its ProxyURL.
func (c *Client) CreateSession(ctx context.Context, req sessions.CreateRequest) (sessions.Info, error) {
	var info sessions.Info
	err := c.do(ctx, http.MethodPost, "/v1/sessions", req, &info)
	return info, err
}

// ListSessions lists live sessions (without ProxyURL), with their usage.
func (c *Client) ListSessions(ctx context.Context) ([]SessionView, error) {
	var out sessionList
	err := c.do(ctx, http.MethodGet, "/v1/sessions", nil, &out)
	return out.Sessions, err
}

// GetSession returns one session with its ProxyURL.
func (c *Client) GetSession(ctx context.Context, id string) (sessions.Info, error) {
	var info sessions.Info
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &info)
	return info, err
}

// UpdateSession changes live session id's unknown-request mode (deny or
// learn) and returns the session (without its ProxyURL).
func (c *Client) UpdateSession(ctx context.Context, id, unknown string) (sessions.Info, error) {
	var info sessions.Info
	err := c.do(ctx, http.MethodPatch, "/v1/sessions/"+url.PathEscape(id), SessionUpdate{Unknown: unknown}, &info)
	return info, err
}

// DeleteSession ends a session.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// OfferConnector asks what installing the spec file or package directory
// at path would grant (made absolute against the current directory first:
// the daemon runs on the same machine); nothing is installed.
func (c *Client) OfferConnector(ctx context.Context, path string) (store.Offer, error) {
	return c.OfferConnectorWith(ctx, InstallRequest{Path: path})
}

// OfferConnectorWith is OfferConnector with the rest of req's choices
// (its Consent is left out); req.Path is made absolute likewise.
func (c *Client) OfferConnectorWith(ctx context.Context, req InstallRequest) (store.Offer, error) {
	abs, err := filepath.Abs(req.Path)
	if err != nil {
		return store.Offer{}, fmt.Errorf("%w: %q: %v", state.ErrInvalidArgument, req.Path, err)
	}
	req.Path, req.Consent = abs, nil
	var o store.Offer
	err = c.do(ctx, http.MethodPost, "/v1/connectors", req, &o)
	return o, err
}

// InstallConnector installs the package at path under consent, which must
// name the hash OfferConnector showed.
func (c *Client) InstallConnector(ctx context.Context, path string, consent store.Consent) (store.Installed, error) {
	return c.InstallConnectorWith(ctx, InstallRequest{Path: path, Consent: &consent})
}

// InstallConnectorWith is InstallConnector with the rest of req's choices,
// which must hold the consent; req.Path is made absolute likewise.
func (c *Client) InstallConnectorWith(ctx context.Context, req InstallRequest) (store.Installed, error) {
	if req.Consent == nil {
		return store.Installed{}, fmt.Errorf("%w: an install needs a consent naming the hash OfferConnector showed", state.ErrInvalidArgument)
	}
	abs, err := filepath.Abs(req.Path)
	if err != nil {
		return store.Installed{}, fmt.Errorf("%w: %q: %v", state.ErrInvalidArgument, req.Path, err)
	}
	req.Path = abs
	var inst store.Installed
	err = c.do(ctx, http.MethodPost, "/v1/connectors", req, &inst)
	return inst, err
}

// PendingConnector returns the quarantined version ref and how it asks for
// more than the active version's consent.
func (c *Client) PendingConnector(ctx context.Context, ref string) (store.Offer, error) {
	var o store.Offer
	err := c.do(ctx, http.MethodPost, "/v1/connectors/approve", ApproveRequest{Ref: ref}, &o)
	return o, err
}

// ApproveConnector activates the quarantined version ref under consent,
// which must name its hash.
func (c *Client) ApproveConnector(ctx context.Context, ref string, consent store.Consent) (store.Installed, error) {
	var inst store.Installed
	err := c.do(ctx, http.MethodPost, "/v1/connectors/approve", ApproveRequest{Ref: ref, Consent: &consent}, &inst)
	return inst, err
}

// ConnectorConsents returns the consent of every version served or that
// may be (the lock).
func (c *Client) ConnectorConsents(ctx context.Context) ([]store.Consented, error) {
	var out consentList
	err := c.do(ctx, http.MethodGet, "/v1/connectors/consents", nil, &out)
	return out.Consents, err
}

// ListConnectors lists installed connector versions.
func (c *Client) ListConnectors(ctx context.Context) ([]store.Installed, error) {
	var out connectorList
	err := c.do(ctx, http.MethodGet, "/v1/connectors", nil, &out)
	return out.Connectors, err
}

// RemoveConnector uninstalls ref (FQN@VERSION).
func (c *Client) RemoveConnector(ctx context.Context, ref string) error {
	return c.do(ctx, http.MethodPost, "/v1/connectors/remove", RemoveRequest{Ref: ref}, nil)
}

// VerifyConnectors re-checks every installed package; an empty result means
// all are intact.
func (c *Client) VerifyConnectors(ctx context.Context) ([]store.Problem, error) {
	var out problemList
	err := c.do(ctx, http.MethodPost, "/v1/connectors/verify", nil, &out)
	return out.Problems, err
}

// Readiness is the daemon's GET /readyz answer: whether this node can
// decide requests, and if not why.
type Readiness struct {
	Ready bool   `json:"ready"`
	Node  string `json:"node"`
	// State is "ok" or why the control-plane state cannot be used.
	State string `json:"state"`
	// Notifications is whether a fleet node receives the other nodes'
	// notifications (its LISTEN connection is up; nil on a single node).
	// While it is not, held requests are re-read every 250ms instead.
	Notifications *bool `json:"notifications,omitempty"`
	// Audit is "ok", "off", or why audit lines cannot be written.
	Audit string `json:"audit"`
}

// Ready asks the daemon for its readiness (GET /readyz); an answer that
// says not ready is not an error.
func (c *Client) Ready(ctx context.Context) (Readiness, error) {
	var rd Readiness
	status, data, err := c.send(ctx, http.MethodGet, "/readyz", nil)
	if err != nil {
		return rd, err
	}
	if status != http.StatusOK && status != http.StatusServiceUnavailable {
		return rd, dataplane.ParseRefusal(status, data)
	}
	if err := json.Unmarshal(data, &rd); err != nil {
		return rd, fmt.Errorf("admin API GET /readyz: decoding answer: %w", err)
	}
	return rd, nil
}

// do sends one request with body (JSON, if non-nil) and decodes a 2xx answer
// into out (if non-nil).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	status, data, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return dataplane.ParseRefusal(status, data)
	}
	if out == nil || status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("admin API %s %s: decoding answer: %w", method, path, err)
	}
	return nil
}

// send sends one request with body (JSON, if non-nil) and returns the
// answer's status and body.
func (c *Client) send(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encoding admin request: %w", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://aileron"+path, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("building admin request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = c.unixClient()
		defer hc.CloseIdleConnections()
	}
	resp, err := hc.Do(req)
	if err != nil {
		var de *dialError
		if errors.As(err, &de) {
			return 0, nil, fmt.Errorf("%w: is `aileron daemon` running? socket: %s: %v", ErrDaemonUnreachable, c.Socket, de.err)
		}
		return 0, nil, fmt.Errorf("admin API %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("admin API %s %s: reading answer: %w", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// dialError marks a failure to reach the socket at all.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// unixClient returns an HTTP client whose every connection dials Socket.
func (c *Client) unixClient() *http.Client {
	var d net.Dialer
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, "unix", c.Socket)
			if err != nil {
				return nil, &dialError{err: err}
			}
			return conn, nil
		},
		DisableCompression: true,
		Proxy:              nil,
	}}
}

// OpenSandbox asks the daemon to fence the network namespace of process
// pid for session (aileron sandbox run); the answer names what the
// command must not see.
func (c *Client) OpenSandbox(ctx context.Context, session string, pid int) (OpenedSandbox, error) {
	var out OpenedSandbox
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes", OpenSandboxRequest{Session: session, PID: pid}, &out)
	return out, err
}

// AttachGateway makes the daemon the gateway of the clients in source,
// serving them on listen (aileron sandbox attach).
func (c *Client) AttachGateway(ctx context.Context, session, source, listen string) (fence.Info, error) {
	var info fence.Info
	err := c.do(ctx, http.MethodPost, "/v1/sandboxes", OpenSandboxRequest{Session: session, Source: source, Listen: listen}, &info)
	return info, err
}

// CloseSandbox removes fenced sandbox (or gateway) id.
func (c *Client) CloseSandbox(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(id), nil, nil)
}

// ListSandboxes lists the fenced sandboxes.
func (c *Client) ListSandboxes(ctx context.Context) ([]fence.Info, error) {
	var out sandboxList
	err := c.do(ctx, http.MethodGet, "/v1/sandboxes", nil, &out)
	return out.Sandboxes, err
}
