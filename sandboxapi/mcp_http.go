package sandboxapi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpCallRefHeader carries, from MCPHTTPHandler to the tool handlers, the key
// of the backend of the HTTP request a tool call arrived on. The handler sets
// it on its own copy of every request, replacing whatever a client sent.
const mcpCallRefHeader = "X-Aileron-Internal-Mcp-Call"

// MCPHTTPHandler serves an MCPServer over Streamable HTTP (the sandbox API's
// /v1/mcp). Build it with MCPServer.HTTPHandler; stop it with Close.
//
// Every MCP session gets its own SDK server whose tool list comes from the
// backend of the request that opened the session and follows it every
// Refresh. Every tool call, however, runs on the backend of the HTTP request
// that carries it, so a session id used by another sandbox session acts as
// that caller, never as the session's opener.
type MCPHTTPHandler struct {
	s          *MCPServer
	backendFor func(*http.Request) (ToolBackend, error)
	sdk        *mcp.StreamableHTTPHandler
	// placeholder answers the SDK's getServer for requests of existing
	// sessions, where it only reads the supported protocol versions.
	placeholder *mcp.Server
	calls       sync.Map // mcpCallRefHeader value → ToolBackend

	mu     sync.Mutex
	live   map[*mcp.ServerSession]struct{}
	closed bool
	wg     sync.WaitGroup // one per session server not yet stopped
}

type mcpNewSessionKey struct{}

// httpMCPSession is the server of one (prospective) MCP session.
type httpMCPSession struct {
	srv    *mcp.Server
	cancel context.CancelFunc
	synced <-chan struct{}
}

// HTTPHandler serves s over Streamable HTTP. backendFor gives the backend of
// each request (the sandbox API: the authenticated session's); when it fails
// the request is answered 403 with the error envelope
// {"error":{"class":"capability_denied","reason":"mcp_unavailable","message":…}}.
// s.Backend is not used. Requests reach the handler through the daemon's
// authenticated proxy tunnel, so the SDK's localhost DNS-rebinding check,
// which would refuse Host aileron.internal on a loopback listener, is off.
func (s *MCPServer) HTTPHandler(backendFor func(r *http.Request) (ToolBackend, error)) *MCPHTTPHandler {
	h := &MCPHTTPHandler{s: s, backendFor: backendFor, placeholder: s.newSDKServer(), live: map[*mcp.ServerSession]struct{}{}}
	idle := s.HTTPIdleTimeout
	switch {
	case idle == 0:
		idle = defaultMCPIdleTimeout
	case idle < 0:
		idle = 0
	}
	h.sdk = mcp.NewStreamableHTTPHandler(h.getServer, &mcp.StreamableHTTPOptions{
		SessionTimeout:             idle,
		DisableLocalhostProtection: true,
	})
	return h
}

func (h *MCPHTTPHandler) getServer(r *http.Request) *mcp.Server {
	if sess, ok := r.Context().Value(mcpNewSessionKey{}).(*httpMCPSession); ok {
		return sess.srv
	}
	return h.placeholder
}

// ServeHTTP implements http.Handler.
func (h *MCPHTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := h.backendFor(r)
	if err == nil && b == nil {
		err = errors.New("no tool backend for this request")
	}
	if err != nil {
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusForbidden, Class: dataplane.ClassCapabilityDenied,
			Reason: policy.ReasonMCPUnavailable, Message: "the MCP endpoint is not available to this caller: " + err.Error()})
		return
	}
	ref := rand.Text()
	h.calls.Store(ref, b)
	defer h.calls.Delete(ref)

	ctx := r.Context()
	var sess *httpMCPSession
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		// A request that may open a session: give it its own server.
		if sess, err = h.newSession(b); err != nil {
			dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusServiceUnavailable, Class: dataplane.ClassUnavailable,
				Reason: policy.ReasonMCPUnavailable, Message: "could not start an MCP session: " + err.Error()})
			return
		}
		ctx = context.WithValue(ctx, mcpNewSessionKey{}, sess)
	}
	r2 := r.Clone(ctx)
	r2.Header.Set(mcpCallRefHeader, ref)
	h.sdk.ServeHTTP(w, r2)
	if sess != nil {
		h.adopt(sess)
	}
}

// Close ends every MCP session and waits for their tool syncs to stop; later
// requests that would open a session are answered 503. Close returns nil.
func (h *MCPHTTPHandler) Close() error {
	h.mu.Lock()
	h.closed = true
	sessions := make([]*mcp.ServerSession, 0, len(h.live))
	for ss := range h.live {
		sessions = append(sessions, ss)
	}
	h.mu.Unlock()
	for _, ss := range sessions {
		ss.Close()
	}
	h.wg.Wait()
	return nil
}

func (h *MCPHTTPHandler) newSession(b ToolBackend) (*httpMCPSession, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errors.New("the MCP handler is shutting down")
	}
	h.wg.Add(1)
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	srv, synced, err := h.s.start(ctx, b, h.callBackend)
	if err != nil {
		cancel()
		h.wg.Done()
		return nil, err
	}
	return &httpMCPSession{srv: srv, cancel: cancel, synced: synced}, nil
}

// adopt runs after the request that may have opened sess's session: when the
// SDK kept a session, its server lives until that session ends; otherwise
// (a refused or failed initialize) it stops now.
func (h *MCPHTTPHandler) adopt(sess *httpMCPSession) {
	var ss *mcp.ServerSession
	for x := range sess.srv.Sessions() {
		ss = x
		break
	}
	h.mu.Lock()
	closed := h.closed
	if ss != nil && !closed {
		h.live[ss] = struct{}{}
	}
	h.mu.Unlock()
	if ss == nil || closed {
		if ss != nil {
			ss.Close()
		}
		h.stop(sess)
		return
	}
	go func() {
		_ = ss.Wait() // the session's end (DELETE, idle timeout, Close) is not an error here
		h.mu.Lock()
		delete(h.live, ss)
		h.mu.Unlock()
		h.stop(sess)
	}()
}

func (h *MCPHTTPHandler) stop(sess *httpMCPSession) {
	sess.cancel()
	<-sess.synced
	h.wg.Done()
}

// callBackend is the backend of the HTTP request carrying req.
func (h *MCPHTTPHandler) callBackend(req *mcp.CallToolRequest) (ToolBackend, error) {
	if req != nil && req.Extra != nil && req.Extra.Header != nil {
		if b, ok := h.calls.Load(req.Extra.Header.Get(mcpCallRefHeader)); ok {
			return b.(ToolBackend), nil
		}
	}
	return nil, fmt.Errorf("the HTTP request that carried this call has ended; call the tool again")
}
