package admin

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// view is ap as a card of the page, for the login s.
func (wb *Web) view(ap approvals.Approval, s webSession) approvalView {
	v := newApprovalView(ap)
	v.CSRF, v.Pending = s.csrf, ap.State == dataplane.ApprovalStatePending
	if wb.SessionName != nil {
		v.SessionName = printable.Clip(wb.SessionName(ap.Session), 200)
	}
	if wb.SessionLimits != nil {
		v.SessionLimits = printable.Clip(wb.SessionLimits(ap.Session), 400)
	}
	if ap.DecidedAt != nil {
		v.Decided = ap.DecidedAt.UTC().Format(time.RFC3339)
	}
	if v.Pending {
		n, until := wb.Approvals.Waiting(ap.ID)
		v.Waiting, v.WaitingUntil = n, until.UTC().Format(time.RFC3339)
	}
	return v
}

// detailView is the data of detail.html.
type detailView struct {
	CSRF     string
	Approval approvalView
	Decided  string // the confirmation of a decision just made; "" otherwise
}

// Title and Page are what layout.html's frame shows for each page.
func (v detailView) Title() string { return v.Approval.ID }
func (detailView) Page() string    { return "" }
func (historyView) Title() string  { return "history" }
func (historyView) Page() string   { return "history" }
func (indexView) Title() string    { return "approvals" }
func (indexView) Page() string     { return "pending" }

// detail shows one approval in any state: the review_url an agent is
// given, and where a decision lands to confirm it.
func (wb *Web) detail(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	ap, ok := wb.approval(w, r)
	if !ok {
		return
	}
	v := detailView{CSRF: s.csrf, Approval: wb.view(ap, s)}
	switch said := r.URL.Query().Get("decided"); { // only what the approval's state bears out: a link cannot claim a decision
	case said == "approved" && (ap.State == dataplane.ApprovalStateApproved || ap.State == dataplane.ApprovalStateConsumed):
		v.Decided = "Approved. The held request goes on now; if its client already gave up, the identical request sent again goes through once."
	case said == "denied" && ap.State == dataplane.ApprovalStateDenied:
		v.Decided = "Denied. The held request is refused with your reason."
	}
	wb.render(w, http.StatusOK, "detail.html", v)
}

// historyRow is one decided approval in history.html.
type historyRow struct {
	ID, State, DecidedBy, Reason, Method, Target, Session, SessionName, When string
}

// historyView is the data of history.html.
type historyView struct {
	CSRF string
	Rows []historyRow
}

// historyLen is how many decided approvals the history shows.
const historyLen = 200

// history lists the latest decided approvals (approved, consumed, denied,
// expired), newest first, with who decided, when and why.
func (wb *Web) history(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	decided, err := wb.Approvals.History(r.Context(), historyLen)
	if err != nil {
		wb.fail("listing approvals", err)
		wb.message(w, http.StatusInternalServerError, "Cannot list approvals", err.Error())
		return
	}
	v := historyView{CSRF: s.csrf}
	for _, d := range decided {
		row := historyRow{ID: d.ID, State: string(d.State), DecidedBy: printable.Clip(d.DecidedBy, 200),
			Reason: printable.Clip(d.Reason, 1024), Method: printable.Clip(d.Method, 64),
			Target: printable.Clip(d.Target(), 2<<10), Session: d.Session, When: d.When.UTC().Format(time.RFC3339)}
		if wb.SessionName != nil {
			row.SessionName = printable.Clip(wb.SessionName(d.Session), 200)
		}
		v.Rows = append(v.Rows, row)
	}
	wb.render(w, http.StatusOK, "history.html", v)
}

// decider is the decided_by of the login's decisions: "web", or "web:NAME"
// when a name was given at login.
func (s webSession) decider() string {
	if s.name == "" {
		return webDecider
	}
	return webDecider + ":" + s.name
}

// loginName is the name given at login: control and invisible characters
// dropped, spaces collapsed, valid UTF-8, at most 64 bytes.
func loginName(raw string) string {
	clean := strings.Map(func(r rune) rune {
		if printable.Hidden(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(raw, ""))
	return printable.Clip(strings.Join(strings.Fields(clean), " "), 64)
}

// wrappable escapes a path or URL for HTML and lets the browser break the
// line after each / ? & = only (<wbr>), so that a narrow screen does not
// cut a word in two.
func wrappable(s string) template.HTML {
	var b strings.Builder
	for _, r := range s {
		b.WriteString(template.HTMLEscapeString(string(r)))
		if strings.ContainsRune("/?&=", r) {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String()) //nolint:gosec // every rune escaped above
}

// approval reads the approval the path names, or answers why it cannot.
func (wb *Web) approval(w http.ResponseWriter, r *http.Request) (approvals.Approval, bool) {
	ap, err := wb.Approvals.Get(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, state.ErrNotFound):
		wb.message(w, http.StatusNotFound, "No such approval", err.Error())
		return ap, false
	case err != nil:
		wb.fail("reading an approval", err)
		wb.message(w, http.StatusInternalServerError, "Cannot read the approval", err.Error())
		return ap, false
	}
	return ap, true
}

// quarantineView is a quarantined connector version as the page lists it,
// every string made printable; CSRF is set when the page may approve it.
type quarantineView struct {
	Ref, Hash, Command, CSRF string
	Widening                 []string
}

// quarantined lists the quarantined versions for the login s; a failure to
// list them is logged and shown as none.
func (wb *Web) quarantined(ctx context.Context, s webSession) []quarantineView {
	if wb.Quarantined == nil {
		return nil
	}
	list, err := wb.Quarantined(ctx)
	if err != nil {
		wb.fail("listing quarantined connectors", err)
		return nil
	}
	var out []quarantineView
	for _, i := range list {
		if !i.Quarantined {
			continue
		}
		v := quarantineView{Ref: printable.Clip(i.Ref(), 300), Hash: i.Hash,
			Command: printable.Clip("aileron connector approve "+i.Ref(), 400)}
		if wb.ApproveConnector != nil {
			v.CSRF = s.csrf
		}
		for _, m := range i.Widening {
			v.Widening = append(v.Widening, printable.Clip(m, 400))
		}
		out = append(out, v)
	}
	return out
}

// approveConnector serves the quarantined version the form names, under
// the consent of the login, naming the hash the page showed: a version
// that changed since is refused.
func (wb *Web) approveConnector(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	if wb.ApproveConnector == nil {
		wb.message(w, http.StatusNotFound, "Not found", "This page does not approve connectors; use `aileron connector approve`.")
		return
	}
	ref, hash := r.PostForm.Get("ref"), r.PostForm.Get("hash")
	_, err := wb.ApproveConnector(r.Context(), ref, store.Consent{Hash: hash, By: s.decider()})
	switch {
	case err == nil:
		w.Header().Set("Location", "/")
		w.WriteHeader(http.StatusSeeOther)
	case errors.Is(err, state.ErrNotFound):
		wb.message(w, http.StatusNotFound, "No such connector version", err.Error())
	case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrInvalidArgument):
		wb.message(w, http.StatusConflict, "Not approved", err.Error())
	default:
		wb.fail("approving a connector", err)
		wb.message(w, http.StatusInternalServerError, "Not approved", err.Error())
	}
}
