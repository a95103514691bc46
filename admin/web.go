package admin

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
	"github.com/rs/zerolog"
)

// webAssets holds the approvals page: HTML templates at the top, and the
// stylesheet and script under static/ (served as-is; the CSP forbids inline
// code, so all of it lives in those files).
//
//go:embed webassets
var webAssets embed.FS

// Web session and form limits.
const (
	// WebSessionTTL is how long a login lasts.
	WebSessionTTL = 12 * time.Hour
	// webCookie names the session cookie.
	webCookie = "aileron_session"
	// maxWebForm bounds a form body.
	maxWebForm = 64 << 10
	// webDecider is the decided_by of every decision made on the page.
	webDecider = "web"
	// minAdminToken is the shortest admin token accepted from the file.
	minAdminToken = 32
)

// webHeaders are set on every answer of the approvals page.
func webHeaders() map[string]string {
	return map[string]string{
		"Content-Security-Policy": "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "same-origin",
		"Cache-Control":           "no-store",
		"X-Content-Type-Options":  "nosniff",
	}
}

// Web serves the approvals page for humans: a login with the admin token,
// then the pending approvals with their previews and Approve / Deny buttons.
// It is meant for a loopback TCP listener (config admin.web_listen), or an
// HTTPS one with Hosts, and answers only requests addressed to localhost, a
// loopback IP or one of Hosts, which shuts out DNS rebinding.
//
// Sessions are kept in memory (a daemon restart logs everyone out). Every
// state-changing POST needs the login's CSRF token (form field "csrf" or
// header X-CSRF-Token) and, when the browser sends Origin or Referer, this
// page's own origin; otherwise it is refused 403 and nothing changes.
type Web struct {
	// Approvals is the approval store the page lists and decides. Required.
	Approvals *approvals.Store
	// TokenFile holds the admin token the login asks for, normally
	// $AILERON_HOME/keys/admin.token; it is created (mode 0600, 32 random
	// bytes, base64url) when missing. See LoadOrCreateToken.
	TokenFile string
	// Hosts are the host names the page answers to besides localhost and
	// loopback addresses (admin.web_hosts, for a page served off this
	// machine over HTTPS); any other Host is refused (DNS rebinding).
	Hosts []string
	// SessionName names a session for the page (its --name); nil, or "",
	// shows the id alone.
	SessionName func(id string) string
	// SessionLimits shows a session's limits and what it used of them
	// (LimitsLine) beside its approvals; nil, or "", shows nothing.
	SessionLimits func(id string) string
	// Quarantined lists the connector versions installed but not served
	// (Store.List, those Quarantined), shown below the approvals with the
	// command that approves each; nil shows none.
	Quarantined func(ctx context.Context) ([]store.Installed, error)
	// ApproveConnector serves a quarantined version (API.ApproveConnector)
	// when a login presses its Approve button; nil shows no button.
	ApproveConnector func(ctx context.Context, ref string, c store.Consent) (store.Installed, error)
	// Proposals backs the proposals pages (list, show, reject); nil
	// answers them 404.
	Proposals *proposals.Store
	// AcceptProposal accepts a proposal as a rule (API.AcceptProposal)
	// when a login submits its form; nil shows no form.
	AcceptProposal func(ctx context.Context, id, consentBy string, req AcceptRequest) (Acceptance, error)
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Log receives unexpected failures. Nil discards them.
	Log *zerolog.Logger

	initOnce sync.Once
	initErr  error
	token    []byte
	tmpl     *template.Template

	mu       sync.Mutex
	sessions map[string]webSession
}

// webSession is one login.
type webSession struct {
	csrf    string
	expires time.Time
	name    string // who logged in, as they said; recorded with their decisions
}

// LoadOrCreateToken returns the admin token in path, creating it (43
// base64url characters from 32 random bytes, mode 0600, directory 0700) on
// first use. It refuses a file group or others can access (wrapping
// state.ErrInsecureFile) and one holding fewer than 32 characters (wrapping
// state.ErrCorruptState); other failures wrap the *fs.PathError.
func LoadOrCreateToken(path string) (string, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		tok, err := randomToken()
		if err != nil {
			return "", err
		}
		if err := state.CreatePrivateFile(path, []byte(tok+"\n"), "admin token"); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("creating admin token: %w", err)
		}
	}
	if err := state.CheckPrivateFile(path, "admin token"); err != nil {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading admin token: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if len(tok) < minAdminToken {
		return "", fmt.Errorf("%w: admin token %s holds %d characters, want at least %d; delete the file and restart the daemon to get a new one",
			state.ErrCorruptState, path, len(tok), minAdminToken)
	}
	return tok, nil
}

// randomToken returns 32 random bytes, base64url without padding.
func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Handler returns the approvals page:
//
//	GET  /login                      the login form
//	POST /login                      token=… → session cookie, 303 to /
//	POST /logout                     csrf=… → 303 to /login
//	GET  /                           the pending approvals
//	GET  /approvals/{id}             one approval, any state (the review_url an agent gets)
//	GET  /history                    the latest decided approvals: who, when, why
//	GET  /api/approvals[?state=S]    {"approvals":[Approval…]} (default state pending)
//	POST /approvals/{id}/approve     csrf=… → 303 to /approvals/{id}, which confirms
//	POST /approvals/{id}/deny        csrf=…&reason=… → 303 to /approvals/{id}
//	GET  /proposals                  the proposals, most recently seen first
//	GET  /proposals/{id}             one proposal, with the accept and reject forms
//	POST /proposals/{id}/accept      csrf=…&method=…&template=…&approval=…[&connector=…][&all_sessions=on] → 303
//	POST /proposals/{id}/reject      csrf=…&reason=… → 303 to /proposals/{id}
//	GET  /static/…                   stylesheet and script
//
// Without a session, pages redirect to /login and /api answers 401.
//
// Handler loads (creating if missing) TokenFile at once, so the token exists
// as soon as the page is served; if that fails, the failure is logged and
// every request answers 500 with it.
func (wb *Web) Handler() http.Handler {
	if err := wb.init(); err != nil {
		wb.fail("the approvals page cannot start", err)
	}
	mux := http.NewServeMux()
	static, _ := fs.Sub(webAssets, "webassets/static") // the path is a constant
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", wb.loginPage)
	mux.HandleFunc("POST /login", wb.login)
	mux.HandleFunc("POST /logout", wb.post(wb.logout))
	mux.HandleFunc("GET /{$}", wb.page(wb.index))
	mux.HandleFunc("GET /api/approvals", wb.api)
	mux.HandleFunc("GET /approvals/{id}/raw", wb.page(wb.raw))
	mux.HandleFunc("GET /approvals/{id}", wb.page(wb.detail))
	mux.HandleFunc("GET /history", wb.page(wb.history))
	mux.HandleFunc("POST /approvals/{id}/approve", wb.post(wb.approve))
	mux.HandleFunc("POST /approvals/{id}/deny", wb.post(wb.deny))
	mux.HandleFunc("POST /connectors/approve", wb.post(wb.approveConnector))
	mux.HandleFunc("GET /proposals", wb.page(wb.proposalsPage))
	mux.HandleFunc("GET /proposals/{id}", wb.page(wb.proposalPage))
	mux.HandleFunc("POST /proposals/{id}/accept", wb.post(wb.acceptProposal))
	mux.HandleFunc("POST /proposals/{id}/reject", wb.post(wb.rejectProposal))
	mux.HandleFunc("/", wb.page(func(w http.ResponseWriter, r *http.Request, _ string, _ webSession) {
		wb.message(w, http.StatusNotFound, "Not found", "There is no page at "+r.URL.Path+".")
	}))
	return wb.guard(mux)
}

// guard sets the security headers, refuses requests not addressed to a
// loopback host, and makes sure the token and templates are loaded.
func (wb *Web) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range webHeaders() {
			w.Header().Set(k, v)
		}
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		}
		if !loopbackHost(r.Host) && !wb.namedHost(r.Host) {
			http.Error(w, "the approvals page answers only at localhost, a loopback address or admin.web_hosts, not "+r.Host, http.StatusMisdirectedRequest)
			return
		}
		if err := wb.init(); err != nil {
			wb.fail("approvals page", err)
			http.Error(w, "the approvals page cannot start: "+err.Error(), http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// init loads the admin token and parses the templates, once.
func (wb *Web) init() error {
	wb.initOnce.Do(func() {
		if wb.Approvals == nil {
			wb.initErr = fmt.Errorf("%w: Web.Approvals is not set", state.ErrNotOpen)
			return
		}
		tok, err := LoadOrCreateToken(wb.TokenFile)
		if err != nil {
			wb.initErr = err
			return
		}
		wb.token = []byte(tok)
		wb.tmpl, wb.initErr = template.New("").Funcs(template.FuncMap{"wrappable": wrappable}).ParseFS(webAssets, "webassets/*.html")
	})
	return wb.initErr
}

// namedHost reports whether a Host header names one of wb.Hosts.
func (wb *Web) namedHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	for _, h := range wb.Hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// loopbackHost reports whether a Host header names localhost or a loopback
// IP literal.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func (wb *Web) now() time.Time {
	if wb.Now != nil {
		return wb.Now()
	}
	return time.Now()
}

// fail logs an unexpected failure of the page.
func (wb *Web) fail(what string, err error) {
	if wb.Log != nil {
		wb.Log.Error().Str("event", "web.error").Err(err).Msg(what)
	}
}

// session returns the request's live session and its id.
func (wb *Web) session(r *http.Request) (string, webSession, bool) {
	c, err := r.Cookie(webCookie)
	if err != nil || c.Value == "" {
		return "", webSession{}, false
	}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	s, ok := wb.sessions[c.Value]
	if !ok {
		return "", webSession{}, false
	}
	if !wb.now().Before(s.expires) {
		delete(wb.sessions, c.Value)
		return "", webSession{}, false
	}
	return c.Value, s, true
}

// newSession records a login by name and returns its id.
func (wb *Web) newSession(name string) (string, webSession, error) {
	id, err := randomToken()
	if err != nil {
		return "", webSession{}, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", webSession{}, err
	}
	now := wb.now()
	s := webSession{csrf: csrf, expires: now.Add(WebSessionTTL), name: name}
	wb.mu.Lock()
	defer wb.mu.Unlock()
	if wb.sessions == nil {
		wb.sessions = map[string]webSession{}
	}
	for k, old := range wb.sessions {
		if !now.Before(old.expires) {
			delete(wb.sessions, k)
		}
	}
	wb.sessions[id] = s
	return id, s, nil
}

// pageHandler is a handler that runs with a live session.
type pageHandler func(w http.ResponseWriter, r *http.Request, id string, s webSession)

// page runs h with the session, or redirects to /login without one.
func (wb *Web) page(h pageHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, s, ok := wb.session(r)
		if !ok {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		h(w, r, id, s)
	}
}

// post runs h for a state-changing request: with a session (else 303 to
// /login), from this page's own origin and with the session's CSRF token
// (else 403), after parsing the bounded form.
func (wb *Web) post(h pageHandler) http.HandlerFunc {
	return wb.page(func(w http.ResponseWriter, r *http.Request, id string, s webSession) {
		if why := crossOrigin(r); why != "" {
			wb.message(w, http.StatusForbidden, "Refused", why)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxWebForm)
		if err := r.ParseForm(); err != nil {
			wb.message(w, http.StatusBadRequest, "Bad request", "The form could not be read: "+err.Error())
			return
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostForm.Get("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
			wb.message(w, http.StatusForbidden, "Refused",
				"The form's CSRF token is missing or is not this login's. Reload the page and try again.")
			return
		}
		h(w, r, id, s)
	})
}

// crossOrigin explains why r does not come from this page's own origin, or
// returns "" when it does (or the browser sent neither Origin nor Referer).
func crossOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := scheme + "://" + r.Host
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "The request came from another site (Sec-Fetch-Site: " + site + ")."
	}
	if o := r.Header.Get("Origin"); o != "" {
		if o != own {
			return "The request came from " + o + ", not from " + own + "."
		}
		return ""
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		if err != nil || u.Scheme+"://"+u.Host != own {
			return "The request was sent from a page outside " + own + "."
		}
	}
	return ""
}

// loginView is the data of login.html.
type loginView struct {
	Error string
}

func (wb *Web) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := wb.session(r); ok {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	wb.render(w, http.StatusOK, "login.html", loginView{})
}

// login exchanges the admin token for a session cookie.
func (wb *Web) login(w http.ResponseWriter, r *http.Request) {
	if why := crossOrigin(r); why != "" {
		wb.message(w, http.StatusForbidden, "Refused", why)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxWebForm)
	if err := r.ParseForm(); err != nil {
		wb.render(w, http.StatusBadRequest, "login.html", loginView{Error: "The form could not be read."})
		return
	}
	given := strings.TrimSpace(r.PostForm.Get("token"))
	if subtle.ConstantTimeCompare([]byte(given), wb.token) != 1 {
		wb.render(w, http.StatusUnauthorized, "login.html", loginView{
			Error: "That is not this daemon's admin token. Print it with: aileron approvals web-token"})
		return
	}
	id, _, err := wb.newSession(loginName(r.PostForm.Get("name")))
	if err != nil {
		wb.fail("approvals page", err)
		wb.message(w, http.StatusInternalServerError, "Login failed", err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: webCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(WebSessionTTL / time.Second),
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (wb *Web) logout(w http.ResponseWriter, r *http.Request, id string, _ webSession) {
	wb.mu.Lock()
	delete(wb.sessions, id)
	wb.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: webCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// api answers GET /api/approvals: 401 JSON without a session.
func (wb *Web) api(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := wb.session(r); !ok {
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusUnauthorized,
			Class: dataplane.ClassUnauthenticated, Reason: policy.ReasonLoginRequired, Message: "log in at /login first"})
		return
	}
	st := dataplane.ApprovalState(r.URL.Query().Get("state"))
	if st == "" {
		st = dataplane.ApprovalStatePending
	}
	list, err := wb.Approvals.List(r.Context(), approvals.Filter{State: st, Session: r.URL.Query().Get("session")})
	if errors.Is(err, state.ErrInvalidArgument) {
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusBadRequest,
			Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidArgument, Message: err.Error()})
		return
	}
	if err != nil {
		wb.fail("listing approvals", err)
		dataplane.WriteRefusal(w, dataplane.Refusal{Status: http.StatusInternalServerError,
			Class: dataplane.ClassInternal, Reason: policy.ReasonInternalError, Message: err.Error()})
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, approvalList{Approvals: append([]approvals.Approval{}, list...)})
}

// indexView is the data of index.html.
type indexView struct {
	CSRF        string
	Fingerprint string
	Approvals   []approvalView
	Quarantined []quarantineView
}

// approvalView is one approval as the page shows it: every string from
// the request, and who decided and why, made printable (html/template
// then escapes it for HTML); DecidedBy and Reason hide the Approval's.
type approvalView struct {
	approvals.Approval
	Method, Target, Summary, Connector, Credential string
	Tool, Operation, Undeclared, DecidedBy, Reason string
	// Proposal names the proposal of a request no operation matches (a
	// session in ask mode); "" for any other.
	Proposal                     string
	Headers                      []dataplane.PreviewHeader
	Fields                       []dataplane.PreviewField
	Inputs                       []dataplane.PreviewField
	BodyKind, BodyType, BodyText string
	BodyMore                     int
	Created, Expires             string
	// For the card template: the login's CSRF token (the decision forms),
	// the session's name, whether it is still pending, and when it was
	// decided.
	CSRF, SessionName, Decided string
	// SessionLimits is the session's LimitsLine ("" for none).
	SessionLimits string
	Pending       bool
	// Waiting is how many clients are held on it now (identical requests
	// share one approval), until WaitingUntil at the latest.
	Waiting      int
	WaitingUntil string
}

// Display limits of the page: longer values say how much more there is,
// and the raw view shows everything.
const (
	pageValueLimit = 2 << 10
	pageBodyLimit  = 64 << 10
)

// newApprovalView prepares ap for the page.
func newApprovalView(ap approvals.Approval) approvalView {
	p := ap.Preview
	clip := func(s string) string { return printable.Clip(s, pageValueLimit) }
	v := approvalView{Approval: ap, Method: clip(p.Method), Target: printable.Line(p.Target()),
		Summary: clip(p.Summary), Connector: clip(p.Connector + " " + p.Version), Credential: p.Credential,
		Tool: clip(p.Tool), Operation: clip(p.Operation), DecidedBy: clip(ap.DecidedBy), Reason: clip(ap.Reason),
		Undeclared: printable.Line(strings.Join(p.Undeclared(), ", ")), Proposal: printable.Line(p.ProposalID),
		Created: ap.CreatedAt.UTC().Format(time.RFC3339), Expires: ap.ExpiresAt.UTC().Format(time.RFC3339)}
	if v.Proposal != "" {
		v.Undeclared = "" // no operation declares anything: the card says so instead
	}
	for _, h := range p.Headers {
		v.Headers = append(v.Headers, dataplane.PreviewHeader{Name: clip(h.Name), Value: clip(h.Value)})
	}
	clipFields := func(fs []dataplane.PreviewField) []dataplane.PreviewField {
		out := make([]dataplane.PreviewField, len(fs))
		for i, f := range fs {
			f.Name, f.Value = clip(f.Name), clip(f.Value)
			out[i] = f
		}
		return out
	}
	v.Fields, v.Inputs = clipFields(p.Fields), clipFields(p.InputFields())
	if b := p.Body; b != nil {
		v.BodyKind, v.BodyType = b.Kind, clip(b.ContentType)
		v.BodyText, v.BodyMore = b.Show(pageBodyLimit)
	}
	return v
}

func (wb *Web) index(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	list, err := wb.Approvals.List(r.Context(), approvals.Filter{State: dataplane.ApprovalStatePending})
	if err != nil {
		wb.fail("listing approvals", err)
		wb.message(w, http.StatusInternalServerError, "Cannot list approvals", err.Error())
		return
	}
	v := indexView{CSRF: s.csrf, Fingerprint: fingerprint(list)}
	for _, ap := range list {
		v.Approvals = append(v.Approvals, wb.view(ap, s))
	}
	v.Quarantined = wb.quarantined(r.Context(), s)
	wb.render(w, http.StatusOK, "index.html", v)
}

// fingerprint is what the page's script compares to notice a change: the
// sorted ids, space-separated (app.js computes the same).
func fingerprint(list []approvals.Approval) string {
	ids := make([]string, len(list))
	for i, ap := range list {
		ids[i] = ap.ID
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

// raw shows one approval's whole request as plain text, nothing cut,
// control characters escaped.
func (wb *Web) raw(w http.ResponseWriter, r *http.Request, _ string, _ webSession) {
	ap, ok := wb.approval(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, ap.Preview.RawRequest())
}

func (wb *Web) approve(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	id := r.PathValue("id")
	wb.decided(w, id, "approved", wb.Approvals.Approve(r.Context(), id, s.decider()))
}

func (wb *Web) deny(w http.ResponseWriter, r *http.Request, _ string, s webSession) {
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if _, _, err := checkDecision(DecideRequest{By: webDecider, Reason: reason}, true); err != nil {
		wb.message(w, http.StatusBadRequest, "Say why", "A denial needs a reason of at most 1024 printable characters; the agent is shown it.")
		return
	}
	id := r.PathValue("id")
	wb.decided(w, id, "denied", wb.Approvals.Deny(r.Context(), id, s.decider(), reason))
}

// decided answers a decision: the approval's page, which confirms it, or
// an explanation.
func (wb *Web) decided(w http.ResponseWriter, id, what string, err error) {
	switch {
	case err == nil:
		w.Header().Set("Location", "/approvals/"+url.PathEscape(id)+"?decided="+what)
		w.WriteHeader(http.StatusSeeOther)
	case errors.Is(err, state.ErrNotFound):
		wb.message(w, http.StatusNotFound, "No such approval", err.Error())
	case errors.Is(err, state.ErrConflict):
		wb.message(w, http.StatusConflict, "Already decided", err.Error())
	default:
		wb.fail("deciding an approval", err)
		wb.message(w, http.StatusInternalServerError, "The decision was not recorded", err.Error())
	}
}

// messageView is the data of message.html.
type messageView struct{ Title, Text string }

func (wb *Web) message(w http.ResponseWriter, status int, title, text string) {
	wb.render(w, status, "message.html", messageView{Title: printable.Line(title), Text: printable.Text(text)})
}

// render executes one template into a buffer first, so a template failure
// is a clean 500 rather than half a page.
func (wb *Web) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := wb.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		wb.fail("rendering "+name, err)
		http.Error(w, "the approvals page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
