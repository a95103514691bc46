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
// that caller, never as the session's opener. And an MCP session belongs to
// the sandbox session that opened it: a request of any other sandbox
// session naming its Mcp-Session-Id is answered 404, as if it did not
// exist, so it can neither list that session's tools nor end it.
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
	owners map[string]string // Mcp-Session-Id → the sandbox session that opened it
	// ownerOf names the sandbox session of a request; sessionOwner (the
	// proxy's authenticated session) unless a test replaces it.
	ownerOf func(*http.Request) string
	closed  bool
	wg      sync.WaitGroup // one per session server not yet stopped
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
	h := &MCPHTTPHandler{s: s, backendFor: backendFor, placeholder: s.newSDKServer(),
		live: map[*mcp.ServerSession]struct{}{}, owners: map[string]string{}, ownerOf: sessionOwner}
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
	owner := h.ownerOf(r)
	if id := r.Header.Get(mcpSessionHeader); id != "" && !h.owns(id, owner) {
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusNotFound, Class: dataplane.ClassNotFound,
			Reason: policy.ReasonNotFound, Message: "no MCP session has this Mcp-Session-Id; start one with an initialize request"})
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
	if sess != nil {
		// Record the owner as the SDK answers with the new id, before the
		// client can send it back.
		w = &ownerWriter{ResponseWriter: w, claim: func(id string) { h.claim(id, owner) }}
	}
	h.sdk.ServeHTTP(w, r2)
	if sess != nil {
		h.adopt(sess)
	}
}

// sessionOwner is the id of the sandbox session the proxy authenticated
// for r ("" outside the proxy).
func sessionOwner(r *http.Request) string {
	if sess, ok := dataplane.SessionFrom(r.Context()); ok {
		return sess.ID
	}
	return ""
}

// mcpSessionHeader carries the MCP session id (Streamable HTTP).
const mcpSessionHeader = "Mcp-Session-Id"

// owns reports whether MCP session id may be used by sandbox session owner:
// it opened it, or no open session has that id (the SDK then answers).
func (h *MCPHTTPHandler) owns(id, owner string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	o, ok := h.owners[id]
	return !ok || o == owner
}

// claim records that sandbox session owner opened MCP session id.
func (h *MCPHTTPHandler) claim(id, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, taken := h.owners[id]; !taken {
		h.owners[id] = owner
	}
}

// ownerWriter calls claim with the Mcp-Session-Id the SDK answers with, as
// the response head goes out.
type ownerWriter struct {
	http.ResponseWriter
	claim   func(id string)
	claimed bool
}

func (w *ownerWriter) WriteHeader(code int) {
	if !w.claimed {
		w.claimed = true
		if id := w.Header().Get(mcpSessionHeader); id != "" {
			w.claim(id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *ownerWriter) Write(b []byte) (int, error) {
	if !w.claimed {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *ownerWriter) Flush() {
	if !w.claimed {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *ownerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

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
			h.mu.Lock()
			delete(h.owners, ss.ID())
			h.mu.Unlock()
		}
		h.stop(sess)
		return
	}
	go func() {
		_ = ss.Wait() // the session's end (DELETE, idle timeout, Close) is not an error here
		h.mu.Lock()
		delete(h.live, ss)
		delete(h.owners, ss.ID())
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
