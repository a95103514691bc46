package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/state"
)

// proposalRow is one proposal as the page shows it, every string from a
// sandbox made printable (and escaped by the template).
type proposalRow struct {
	ID, State, Session, SessionName, Method, Host, Template, LastSeen, FirstSeen string
	Port                                                                         int
	Count                                                                        int64
	Credential                                                                   bool
	DecidedBy, Reason, Rule, Connector, Justification                            string
	Examples                                                                     []string
}

// proposalsView is the data of proposals.html.
type proposalsView struct {
	CSRF string
	Rows []proposalRow
}

// proposalView is the data of proposal.html: one proposal, the defaults of
// its rule's form, and what was just done.
type proposalView struct {
	CSRF                       string
	P                          proposalRow
	Open, CanAccept            bool
	DefaultApproval, Connector string
	Done                       string
}

func (proposalsView) Title() string  { return "proposals" }
func (proposalsView) Page() string   { return "proposals" }
func (v proposalView) Title() string { return v.P.ID }
func (proposalView) Page() string    { return "proposals" }

// maxProposalRows bounds the proposals the list shows.
const maxProposalRows = 500

// newProposalRow renders p for the page.
func (wb *Web) newProposalRow(p proposals.Proposal) proposalRow {
	row := proposalRow{ID: p.ID, State: p.State, Session: printable.Clip(p.Session, 100), Method: printable.Clip(p.Method, 64),
		Host: printable.Clip(p.Host, 300), Port: p.Port, Template: printable.Clip(p.Template, 2<<10), Count: p.Count,
		LastSeen: p.LastSeen.UTC().Format(time.RFC3339), FirstSeen: p.FirstSeen.UTC().Format(time.RFC3339),
		Credential: p.Credential, DecidedBy: printable.Clip(p.DecidedBy, 200), Reason: printable.Clip(p.Reason, 1024),
		Connector: printable.Clip(p.Connector, 300), Justification: printable.Clip(p.Justification, 2<<10)}
	if wb.SessionName != nil {
		row.SessionName = printable.Clip(wb.SessionName(p.Session), 200)
	}
	if p.Rule != nil {
		approval := "no approval"
		if p.Rule.Approval {
			approval = "approval required"
		}
		row.Rule = printable.Clip(fmt.Sprintf("%s %s (%s)", p.Rule.Method, p.Rule.Template, approval), 2<<10)
	}
	for _, ex := range p.Examples {
		row.Examples = append(row.Examples, printable.Clip(ex, 100))
	}
	return row
}

// proposalsPage lists the proposals, most recently seen first.
func (wb *Web) proposalsPage(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	if wb.Proposals == nil {
		wb.message(w, http.StatusNotFound, "No proposals", "This daemon has no proposal store.")
		return
	}
	list, err := wb.Proposals.List(r.Context(), "")
	if err != nil {
		wb.fail("listing proposals", err)
		wb.message(w, http.StatusInternalServerError, "Cannot list proposals", err.Error())
		return
	}
	v := proposalsView{CSRF: s.csrf}
	for i, p := range list {
		if i == maxProposalRows {
			break
		}
		v.Rows = append(v.Rows, wb.newProposalRow(p))
	}
	wb.render(w, http.StatusOK, "proposals.html", v)
}

// proposalPage shows one proposal with the forms that accept or reject it.
func (wb *Web) proposalPage(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	p, ok := wb.proposal(w, r)
	if !ok {
		return
	}
	v := proposalView{CSRF: s.csrf, P: wb.newProposalRow(p), Open: p.State == proposals.StateOpen,
		CanAccept: wb.AcceptProposal != nil, DefaultApproval: proposals.ApprovalNone}
	if p.Method != "GET" && p.Method != "HEAD" {
		v.DefaultApproval = proposals.ApprovalRequired
	}
	switch done := r.URL.Query().Get("done"); { // only what the state bears out
	case done == "accepted" && p.State == proposals.StateAccepted:
		v.Done = "Accepted. The rule is installed and the session may use it; requests held for this proposal are decided under it."
	case done == "rejected" && p.State == proposals.StateRejected:
		v.Done = "Rejected. Requests like it stay refused."
	}
	wb.render(w, http.StatusOK, "proposal.html", v)
}

// proposal reads the proposal the path names, answering the page itself
// when it cannot.
func (wb *Web) proposal(w http.ResponseWriter, r *http.Request) (proposals.Proposal, bool) {
	if wb.Proposals == nil {
		wb.message(w, http.StatusNotFound, "No proposals", "This daemon has no proposal store.")
		return proposals.Proposal{}, false
	}
	p, err := wb.Proposals.Get(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, state.ErrNotFound):
		wb.message(w, http.StatusNotFound, "No such proposal", err.Error())
		return p, false
	case err != nil:
		wb.fail("reading a proposal", err)
		wb.message(w, http.StatusInternalServerError, "Cannot read the proposal", err.Error())
		return p, false
	}
	return p, true
}

// acceptProposal accepts the proposal with the form's edits, by the login.
func (wb *Web) acceptProposal(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	if wb.AcceptProposal == nil || wb.Proposals == nil {
		wb.message(w, http.StatusNotFound, "Not found", "This page does not accept proposals; use `aileron proposals accept`.")
		return
	}
	f := r.PostForm
	req := AcceptRequest{By: s.decider(), Connector: f.Get("connector"), AllSessions: f.Get("all_sessions") == "on",
		Edits: proposals.Edits{Method: f.Get("method"), Template: f.Get("template"), Approval: f.Get("approval")}}
	id := r.PathValue("id")
	_, err := wb.AcceptProposal(r.Context(), id, s.decider(), req)
	wb.decidedProposal(w, id, "accepted", err)
}

// rejectProposal rejects the proposal with the form's reason, by the login.
func (wb *Web) rejectProposal(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	if wb.Proposals == nil {
		wb.message(w, http.StatusNotFound, "No proposals", "This daemon has no proposal store.")
		return
	}
	id := r.PathValue("id")
	_, err := wb.Proposals.Reject(r.Context(), id, s.decider(), r.PostForm.Get("reason"))
	wb.decidedProposal(w, id, "rejected", err)
}

// decidedProposal answers a decision: to the proposal's page on success,
// else a page saying why nothing changed.
func (wb *Web) decidedProposal(w http.ResponseWriter, id, done string, err error) {
	switch {
	case err == nil:
		w.Header().Set("Location", "/proposals/"+url.PathEscape(id)+"?done="+done)
		w.WriteHeader(http.StatusSeeOther)
	case errors.Is(err, state.ErrNotFound):
		wb.message(w, http.StatusNotFound, "No such proposal", err.Error())
	case errors.Is(err, state.ErrInvalidArgument):
		wb.message(w, http.StatusBadRequest, "Not "+done, err.Error())
	case errors.Is(err, state.ErrConflict):
		wb.message(w, http.StatusConflict, "Not "+done, err.Error())
	default:
		wb.fail("deciding a proposal", err)
		wb.message(w, http.StatusInternalServerError, "Not "+done, err.Error())
	}
}
