package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/fence"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Sandboxes fences sandboxes; fence.Manager implements it.
type Sandboxes interface {
	Open(ctx context.Context, session string, pid int) (fence.Info, error)
	Close(id string) error
	List() []fence.Info
}

// OpenSandboxRequest asks the daemon to fence the network namespace of
// process PID (new and empty) for a session.
type OpenSandboxRequest struct {
	Session string `json:"session"`
	PID     int    `json:"pid"`
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
//	POST   /v1/sandboxes        OpenSandboxRequest → 201 fence.Info
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
		if req.Session == "" || req.PID <= 0 {
			fail(w, fmt.Errorf("%w: want {\"session\": ID, \"pid\": N}", state.ErrInvalidArgument))
			return
		}
		info, err := a.Sandboxes.Open(r.Context(), req.Session, req.PID)
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
