package admin

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/state"
)

// DecideRequest is the body of POST /v1/approvals/{id}/approve and
// POST /v1/approvals/{id}/deny. By names the decider for the record (the CLI
// sends "cli:" + $USER); Reason is required to deny and refused to approve.
type DecideRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

// approvalList is the answer of GET /v1/approvals.
type approvalList struct {
	Approvals []approvals.Approval `json:"approvals"`
}

// maxDecider and maxReason bound what a decision records.
const (
	maxDecider = 128
	maxReason  = 1024
)

// approvalRoutes adds the approval routes, backed by store (nil answers
// 503 not_ready on every one of them):
//
//	GET  /v1/approvals[?state=S&session=ID]  → {"approvals":[Approval…]}
//	GET  /v1/approvals/{id}                  → Approval
//	POST /v1/approvals/{id}/approve          DecideRequest{by} → Approval
//	POST /v1/approvals/{id}/deny             DecideRequest{by,reason} → Approval
//
// Deciding an approval that is no longer pending is 409 conflict; an unknown
// id is 404.
func (a *API) approvalRoutes(mux *http.ServeMux, store *approvals.Store) {
	if store == nil {
		a.notConfigured(mux, "approval store", "/v1/approvals", "/v1/approvals/")
		return
	}
	mux.HandleFunc("GET /v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		list, err := store.List(r.Context(), approvals.Filter{State: dataplane.ApprovalState(q.Get("state")), Session: q.Get("session")})
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, approvalList{Approvals: append([]approvals.Approval{}, list...)})
	})
	mux.HandleFunc("POST /v1/approvals/webhooks/test", func(w http.ResponseWriter, r *http.Request) {
		if a.Webhooks == nil {
			a.writeError(w, fmt.Errorf("%w: no approval.webhooks are configured; add one to the daemon's config and restart it", state.ErrConflict))
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, webhookResults{Results: a.Webhooks.Test(r.Context())})
	})
	mux.HandleFunc("GET /v1/approvals/{id}", func(w http.ResponseWriter, r *http.Request) {
		ap, err := store.Get(r.Context(), r.PathValue("id"))
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, ap)
	})
	mux.HandleFunc("POST /v1/approvals/{id}/approve", func(w http.ResponseWriter, r *http.Request) {
		a.decide(w, r, store, false)
	})
	mux.HandleFunc("POST /v1/approvals/{id}/deny", func(w http.ResponseWriter, r *http.Request) {
		a.decide(w, r, store, true)
	})
}

// decide applies one approve or deny and answers with the updated approval.
func (a *API) decide(w http.ResponseWriter, r *http.Request, store *approvals.Store, deny bool) {
	var req DecideRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	by, reason, err := checkDecision(req, deny)
	if err == nil {
		if deny {
			err = store.Deny(r.Context(), id, by, reason)
		} else {
			err = store.Approve(r.Context(), id, by)
		}
	}
	if err != nil {
		a.writeError(w, err)
		return
	}
	ap, err := store.Get(r.Context(), id)
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, ap)
}

// checkDecision validates a decision's decider and reason; failures wrap
// state.ErrInvalidArgument.
func checkDecision(req DecideRequest, deny bool) (by, reason string, err error) {
	by, reason = strings.TrimSpace(req.By), strings.TrimSpace(req.Reason)
	switch {
	case by == "":
		return "", "", fmt.Errorf(`%w: "by" is required: name who decides, e.g. "cli:alice"`, state.ErrInvalidArgument)
	case len(by) > maxDecider:
		return "", "", fmt.Errorf(`%w: "by" must be at most %d bytes`, state.ErrInvalidArgument, maxDecider)
	case printable.Line(by) != by:
		return "", "", fmt.Errorf(`%w: "by" %s`, state.ErrInvalidArgument, whereHidden(by))
	case deny && reason == "":
		return "", "", fmt.Errorf(`%w: "reason" is required to deny: say why, the agent is shown it`, state.ErrInvalidArgument)
	case !deny && reason != "":
		return "", "", fmt.Errorf(`%w: "reason" is only for denials`, state.ErrInvalidArgument)
	case len(reason) > maxReason:
		return "", "", fmt.Errorf(`%w: "reason" must be at most %d bytes`, state.ErrInvalidArgument, maxReason)
	case printable.Line(reason) != reason:
		return "", "", fmt.Errorf(`%w: "reason" %s`, state.ErrInvalidArgument, whereHidden(reason))
	}
	return by, reason, nil
}

// whereHidden says which character of s a human would not see as itself,
// and where: s is shown to people, so it must hold none.
func whereHidden(s string) string {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Sprintf("holds the byte 0x%02x at byte %d, which is not UTF-8; type it as plain text", s[i], i)
		}
		if r < 0x20 || printable.Hidden(r) {
			return fmt.Sprintf("holds U+%04X at byte %d, a control, invisible or direction-changing character; type it as plain text", r, i)
		}
		i += size
	}
	return "is not plain text"
}
