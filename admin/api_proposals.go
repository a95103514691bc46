package admin

import (
	"fmt"
	"net/http"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/state"
)

// RejectRequest is the body of POST /v1/proposals/{id}/reject. By names
// the decider for the record (the CLI sends "cli:" + $USER); Reason is
// required.
type RejectRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// proposalList is the answer of GET /v1/proposals.
type proposalList struct {
	Proposals []proposals.Proposal `json:"proposals"`
}

// proposalRoutes adds the proposal routes, backed by store (nil answers
// 503 not_ready on every one of them):
//
//	GET  /v1/proposals[?session=ID]   → {"proposals":[Proposal…]}
//	GET  /v1/proposals/{id}           → Proposal
//	POST /v1/proposals/{id}/reject    RejectRequest{by,reason} → Proposal
//	POST /v1/proposals/{id}/accept    AcceptRequest → Acceptance
//	POST /v1/proposals/accept         AcceptSessionRequest{by,session,…} → Acceptance
//
// Rejecting or accepting a proposal that is not open is 409 conflict, as
// is a learned rule clashing with another connector; an unknown id is
// 404; a bad edit is 400.
func (a *API) proposalRoutes(mux *http.ServeMux, store *proposals.Store) {
	if store == nil {
		a.notConfigured(mux, "proposal store", "/v1/proposals", "/v1/proposals/")
		return
	}
	mux.HandleFunc("GET /v1/proposals", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		for k := range q {
			if k != "session" {
				a.writeError(w, fmt.Errorf("%w: unknown query parameter %q; the proposal list takes only session", state.ErrInvalidArgument, k))
				return
			}
		}
		list, err := store.List(r.Context(), q.Get("session"))
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, proposalList{Proposals: list})
	})
	mux.HandleFunc("GET /v1/proposals/{id}", func(w http.ResponseWriter, r *http.Request) {
		p, err := store.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, p)
	})
	mux.HandleFunc("POST /v1/proposals/{id}/reject", func(w http.ResponseWriter, r *http.Request) {
		var req RejectRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		by, reason, err := checkDecision(DecideRequest(req), true)
		if err != nil {
			a.writeError(w, err)
			return
		}
		p, err := store.Reject(r.Context(), r.PathValue("id"), by, reason)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, p)
	})
	mux.HandleFunc("POST /v1/proposals/{id}/accept", func(w http.ResponseWriter, r *http.Request) {
		var req AcceptRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		out, err := a.AcceptProposal(r.Context(), r.PathValue("id"), caller(r), req)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v1/proposals/accept", func(w http.ResponseWriter, r *http.Request) {
		var req AcceptSessionRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		out, err := a.AcceptSession(r.Context(), caller(r), req)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, out)
	})
}
