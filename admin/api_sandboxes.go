package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/fence"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Sandboxes fences sandboxes; fence.Manager implements it.
type Sandboxes interface {
	Open(ctx context.Context, session string, pid int) (fence.Info, error)
	Attach(ctx context.Context, session string, source netip.Prefix, listen netip.Addr) (fence.Info, error)
	Close(id string) error
	List() []fence.Info
}

// OpenSandboxRequest asks the daemon to fence the network namespace of
// process PID (new and empty) for a session, or, with Source and Listen
// instead of PID, to be the gateway of the clients in Source, serving
// them on the daemon's address Listen.
type OpenSandboxRequest struct {
	Session string `json:"session"`
	PID     int    `json:"pid,omitempty"`
	Source  string `json:"source,omitempty"`
	Listen  string `json:"listen,omitempty"`
}

// OpenedSandbox is the answer to opening a process's sandbox: the fence's
// Info, and Hide, the paths the launcher must hide from the command, as
// this daemon has them (its home, admin socket, audit directory and key
// files), whatever the launcher's own configuration says.
type OpenedSandbox struct {
	fence.Info
	Hide []string `json:"hide,omitempty"`
}

type sandboxList struct {
	Sandboxes []fence.Info `json:"sandboxes"`
}

// sandboxErrors classify fence errors; they come before the shared rules.
func sandboxErrors() []dataplane.ErrorRule {
	return append([]dataplane.ErrorRule{
		{Target: fence.ErrUnsupported, Status: http.StatusServiceUnavailable, Class: dataplane.ClassUnavailable, Reason: policy.ReasonNotEnabled},
		{Target: fence.ErrBadRequest, Status: http.StatusBadRequest, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidArgument},
		{Target: fence.ErrNotFound, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNotFound},
	}, adminErrors()...)
}

// sandboxRoutes serves the fenced sandboxes (aileron sandbox run):
//
//	POST   /v1/sandboxes        OpenSandboxRequest (a process, or a gateway) → 201 OpenedSandbox
//	GET    /v1/sandboxes        → {"sandboxes":[fence.Info…]}
//	DELETE /v1/sandboxes/{id}   → 204
func (a *API) sandboxRoutes(mux *http.ServeMux) {
	fail := func(w http.ResponseWriter, err error) {
		dataplane.WriteRefusal(w, dataplane.RefuseError(err, sandboxErrors()))
	}
	if a.Sandboxes == nil {
		off := func(w http.ResponseWriter, r *http.Request) {
			fail(w, fmt.Errorf("%w: this daemon does not fence sandboxes", fence.ErrUnsupported))
		}
		mux.HandleFunc("/v1/sandboxes", off)
		mux.HandleFunc("/v1/sandboxes/", off)
		return
	}
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		var req OpenSandboxRequest
		if err := decodeBody(r, &req); err != nil {
			fail(w, err)
			return
		}
		info, err := a.openSandbox(r.Context(), req)
		if err != nil {
			fail(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusCreated, info)
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		dataplane.WriteJSON(w, http.StatusOK, sandboxList{Sandboxes: append([]fence.Info{}, a.Sandboxes.List()...)})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Sandboxes.Close(r.PathValue("id")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// openSandbox fences a process's namespace (saying what to hide from it)
// or attaches a gateway, as req asks.
func (a *API) openSandbox(ctx context.Context, req OpenSandboxRequest) (OpenedSandbox, error) {
	const want = `want {"session": ID, "pid": N} or {"session": ID, "source": CIDR, "listen": ADDRESS}`
	gateway := req.Source != "" || req.Listen != ""
	if req.Session == "" || gateway == (req.PID > 0) {
		return OpenedSandbox{}, fmt.Errorf("%w: %s", state.ErrInvalidArgument, want)
	}
	if !gateway {
		if a.Hidden == nil {
			return OpenedSandbox{}, fmt.Errorf("%w: this daemon cannot say which of its paths a sandbox must not see", fence.ErrUnsupported)
		}
		info, err := a.Sandboxes.Open(ctx, req.Session, req.PID)
		return OpenedSandbox{Info: info, Hide: a.Hidden()}, err
	}
	source, err := netip.ParsePrefix(req.Source)
	if err != nil {
		return OpenedSandbox{}, fmt.Errorf("%w: source %q: %v; %s", state.ErrInvalidArgument, req.Source, err, want)
	}
	listen, err := netip.ParseAddr(req.Listen)
	if err != nil {
		return OpenedSandbox{}, fmt.Errorf("%w: listen %q: %v; %s", state.ErrInvalidArgument, req.Listen, err, want)
	}
	info, err := a.Sandboxes.Attach(ctx, req.Session, source, listen)
	return OpenedSandbox{Info: info}, err
}
