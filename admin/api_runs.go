package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
)

// RunCanceller cancels action runs (the daemon's action runner, through a
// small adapter: admin does not import the runner).
type RunCanceller interface {
	// CancelRun cancels run id (or the run waiting on approval id) for by.
	// A run that already ended is answered as it ended. An unknown id wraps
	// state.ErrNotFound.
	CancelRun(ctx context.Context, id, by string) (RunCancel, error)
}

// RunCancel is the answer of POST /v1/action-runs/{id}/cancel.
type RunCancel struct {
	RunID string `json:"run_id"`
	// Status is the run's status now: cancelled, or the final status of a
	// run that had already ended.
	Status string `json:"status"`
	// Cancelled is true when this call cancelled the run.
	Cancelled bool `json:"cancelled"`
	// Step is the step the run stopped at, once known.
	Step string `json:"step,omitempty"`
	// Message is the run's result message.
	Message string `json:"message"`
}

// CancelRequest is the body of POST /v1/action-runs/{id}/cancel: By names
// who cancels (the CLI sends "cli:" + $USER).
type CancelRequest struct {
	By string `json:"by"`
}

// runRoutes adds POST /v1/action-runs/{id}/cancel (CancelRequest →
// RunCancel), backed by runs; nil answers 503 not_ready.
func (a *API) runRoutes(mux *http.ServeMux, runs RunCanceller) {
	mux.HandleFunc("POST /v1/action-runs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		if runs == nil {
			a.writeError(w, fmt.Errorf("%w: this daemon runs no actions", state.ErrNotOpen))
			return
		}
		var req CancelRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		by, _, err := checkDecision(DecideRequest{By: req.By}, false)
		if err != nil {
			a.writeError(w, err)
			return
		}
		res, err := runs.CancelRun(r.Context(), r.PathValue("id"), by)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, res)
	})
}

// CancelRun cancels an action run, recording by as who cancelled it.
func (c *Client) CancelRun(ctx context.Context, id, by string) (RunCancel, error) {
	var out RunCancel
	err := c.do(ctx, http.MethodPost, "/v1/action-runs/"+url.PathEscape(id)+"/cancel", CancelRequest{By: by}, &out)
	return out, err
}
