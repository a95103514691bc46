package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/budgets"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/notify"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
	"github.com/rs/zerolog"
)

// maxAdminBody bounds an admin API request body.
const maxAdminBody = 1 << 20

// API serves the daemon's admin API (normally on a 0600 unix socket, see
// ListenUnix): health, sessions and their tools, the connector store,
// credentials and bindings, and approvals. Every error answer is the refusal
// envelope {"error":{"class","reason","message"}} with a fitting status,
// produced by writeError alone.
//
// Store mutations (install, remove) are serialised by API, which is what
// makes Store.Install's conflict check against the active specs race-free.
type API struct {
	// Store is the connector store. Required for the /v1/connectors routes.
	Store *store.Store
	// Sessions is the session manager. Required for the /v1/sessions routes.
	Sessions *sessions.Manager
	// Budgets reports what sessions with a budget used (GET /v1/sessions,
	// the approvals page); nil shows no usage.
	Budgets *budgets.Budgets
	// OnStoreChange runs after every successful install or removal, normally
	// to recompile and swap the policy. Its failure is reported to the caller
	// (the store change itself stays). Nil means no-op.
	OnStoreChange func() error
	// Vault and Bindings back the /v1/credentials and /v1/bindings routes;
	// Credentials adds each session's placeholder values to GET
	// /v1/sessions/{id}. Nil Credentials means no placeholders.
	Vault       *credentials.Vault
	Bindings    *credentials.Bindings
	Credentials *credentials.Injector
	// Catalog returns the installed actions (GET /v1/sessions/{id}/tools);
	// nil means none.
	Catalog func() *action.Catalog
	// Approvals backs the /v1/approvals routes; nil answers them with 503.
	Approvals *approvals.Store
	// Proposals backs the /v1/proposals routes; nil answers them with 503.
	Proposals *proposals.Store
	// Runs cancels action runs (POST /v1/action-runs/{id}/cancel); nil
	// answers 503.
	Runs RunCanceller
	// Webhooks tests approval.webhooks (POST /v1/approvals/webhooks/test);
	// nil answers 409: none are configured.
	Webhooks WebhookTester
	// Config is the running configuration as YAML (GET /v1/config, for
	// `aileron config print`); nil answers 404.
	Config func() ([]byte, error)
	// OnEvent receives each control-plane change for the audit trail:
	// session.created, session.deleted, store.installed, store.consented, store.removed,
	// trust.set, trust.removed,
	// credential.set, credential.deleted, binding.set, binding.removed, with
	// identifying details only (never secret values). Nil means none.
	OnEvent func(event audit.EventName, details map[string]string)
	// Log receives unexpected (500) failures. Nil discards them.
	Log *zerolog.Logger
	// Sandboxes fences sandboxes (aileron sandbox run); nil answers 503
	// not_enabled on /v1/sandboxes.
	Sandboxes Sandboxes
	// Hidden lists the paths a fenced command must not see, absolute, as
	// the daemon has them (its home, admin socket, audit directory, key
	// files); the answer to opening a process's sandbox carries them, so
	// the launcher never guesses. Nil refuses to open one (503).
	Hidden func() []string

	storeMu sync.Mutex
	// acceptMu serialises accepting proposals on this node (api_accept.go).
	acceptMu sync.Mutex
}

// InstallRequest is the body of POST /v1/connectors.
type InstallRequest struct {
	// Path is an absolute path, on the daemon's machine, to a spec file or a
	// package directory.
	Path string `json:"path"`
	// AllowUnpinned accepts actions whose requirement on another connector
	// names a placeholder hash (store.InstallOptions.AllowUnpinned); for
	// development only.
	AllowUnpinned bool `json:"allow_unpinned,omitempty"`
	// FetchedFrom is the https URL the package was fetched from
	// (store.InstallOptions.FetchedFrom); "" for a package from the
	// daemon's machine.
	FetchedFrom string `json:"fetched_from,omitempty"`
	// Consent is the caller's yes to the request it was shown, naming its
	// hash; without one the answer is that request (store.Offer) and
	// nothing is installed. Its By is the admin API's to set.
	Consent *store.Consent `json:"consent,omitempty"`
}

// ApproveRequest is the body of POST /v1/connectors/approve.
type ApproveRequest struct {
	// Ref is the quarantined FQN@VERSION.
	Ref string `json:"ref"`
	// Consent names the hash of the version shown; without one the answer
	// is the version and how it asks for more (store.Offer).
	Consent *store.Consent `json:"consent,omitempty"`
}

// RemoveRequest is the body of POST /v1/connectors/remove.
type RemoveRequest struct {
	// Ref is FQN@VERSION.
	Ref string `json:"ref"`
}

// sessionList, connectorList and problemList are the list answers; wrapping
// the arrays in objects leaves room for more fields.
type (
	sessionList struct {
		Sessions []SessionView `json:"sessions"`
	}
	connectorList struct {
		Connectors []store.Installed `json:"connectors"`
	}
	consentList struct {
		Consents []store.Consented `json:"consents"`
	}
	problemList struct {
		OK       bool            `json:"ok"`
		Problems []store.Problem `json:"problems"`
	}
	healthStatus struct {
		Status string `json:"status"`
	}
)

// Handler returns the admin API:
//
//	GET    /v1/health
//	POST   /v1/sessions              sessions.CreateRequest → 201 sessions.Info (with proxy_url)
//	GET    /v1/sessions              → {"sessions":[SessionView…]} (no proxy_url; usage of budgets)
//	GET    /v1/sessions/{id}         → sessions.Info (with proxy_url)
//	PATCH  /v1/sessions/{id}         SessionUpdate → sessions.Info (no proxy_url)
//	DELETE /v1/sessions/{id}         → 204
//	GET    /v1/connectors            → {"connectors":[Installed…]}
//	POST   /v1/connectors            InstallRequest → 200 store.Offer (no consent), 201 Installed
//	POST   /v1/connectors/approve    ApproveRequest → 200 store.Offer (no consent), 200 Installed
//	GET    /v1/connectors/consents   → {"consents":[store.Consented…]} (the lock)
//	POST   /v1/connectors/remove     RemoveRequest → 204
//	POST   /v1/connectors/verify     → {"ok":bool,"problems":[Problem…]}
//	GET    /v1/sessions/{id}/tools   → SessionTools
//	/v1/credentials…, /v1/bindings…  see credentialRoutes
//	/v1/trust…                       see trustRoutes
//	/v1/approvals…                   see approvalRoutes
//	/v1/proposals…                   see proposalRoutes
//	POST   /v1/action-runs/{id}/cancel  CancelRequest{by} → RunCancel (see runRoutes)
//
// Removal is a POST with the reference in the body because references
// contain "://", which does not survive in a URL path.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		dataplane.WriteJSON(w, http.StatusOK, healthStatus{Status: "ok"})
	})
	mux.HandleFunc("GET /v1/config", func(w http.ResponseWriter, r *http.Request) {
		if a.Config == nil {
			a.writeError(w, fmt.Errorf("%w: this daemon does not share its configuration", state.ErrNotFound))
			return
		}
		b, err := a.Config()
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, runningConfig{PID: os.Getpid(), YAML: string(b)})
	})
	mux.HandleFunc("POST /v1/sessions", a.createSession)
	mux.HandleFunc("GET /v1/sessions", a.listSessions)
	mux.HandleFunc("GET /v1/sessions/{id}", a.getSession)
	mux.HandleFunc("PATCH /v1/sessions/{id}", a.updateSession)
	mux.HandleFunc("DELETE /v1/sessions/{id}", a.deleteSession)
	mux.HandleFunc("GET /v1/sessions/{id}/tools", a.sessionTools)
	mux.HandleFunc("GET /v1/connectors", a.listConnectors)
	mux.HandleFunc("POST /v1/connectors", a.installConnector)
	mux.HandleFunc("POST /v1/connectors/remove", a.removeConnector)
	mux.HandleFunc("POST /v1/connectors/approve", a.approveConnector)
	mux.HandleFunc("GET /v1/connectors/consents", a.listConsents)
	mux.HandleFunc("POST /v1/connectors/verify", a.verifyConnectors)
	a.sandboxRoutes(mux)
	a.credentialRoutes(mux)
	a.trustRoutes(mux)
	a.approvalRoutes(mux, a.Approvals)
	a.proposalRoutes(mux, a.Proposals)
	a.runRoutes(mux, a.Runs)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, fmt.Errorf("%w: no admin API route %s %s", errNoRoute, r.Method, r.URL.Path))
	})
	return mux
}

func (a *API) createSession(w http.ResponseWriter, r *http.Request) {
	var req sessions.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if err := a.checkInstalled(r.Context(), req.Connectors); err != nil {
		a.writeError(w, err)
		return
	}
	info, err := a.Sessions.Create(r.Context(), req)
	if err != nil {
		a.writeError(w, err)
		return
	}
	details := map[string]string{"session": info.ID, "name": info.Name, "unknown": info.Unknown,
		"expires_at": info.ExpiresAt.UTC().Format(time.RFC3339), "connectors": strings.Join(info.Connectors, ",")}
	if info.Limits != nil {
		if b, err := json.Marshal(info.Limits); err == nil {
			details["limits"] = string(b)
		}
	}
	a.event(audit.EventSessionCreated, details)
	dataplane.WriteJSON(w, http.StatusCreated, info)
}

// checkInstalled refuses a session scope naming a connector that is not
// installed: a typo would otherwise create a session that can use nothing,
// or that silently gains the connector when someone installs it later.
// Errors wrap state.ErrInvalidArgument and list what is installed.
func (a *API) checkInstalled(ctx context.Context, fqns []string) error {
	if len(fqns) == 0 || a.Store == nil {
		return nil
	}
	list, err := a.Store.List(ctx)
	if err != nil {
		return err
	}
	var installed []string
	for _, in := range list {
		if in.Active {
			installed = append(installed, in.FQN)
		}
	}
	for _, fqn := range fqns {
		if slices.Contains(installed, fqn) {
			continue
		}
		have := "none"
		if len(installed) > 0 {
			have = strings.Join(installed, ", ")
		}
		return fmt.Errorf("%w: session connectors: %s is not installed (installed: %s); install it first with `aileron connector install`",
			state.ErrInvalidArgument, fqn, have)
	}
	return nil
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request) {
	list, err := a.Sessions.List()
	if err != nil {
		a.writeError(w, err)
		return
	}
	views, err := a.sessionViews(r.Context(), list)
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, sessionList{Sessions: views})
}

func (a *API) getSession(w http.ResponseWriter, r *http.Request) {
	info, err := a.Sessions.Get(r.PathValue("id"))
	if err != nil {
		a.writeError(w, err)
		return
	}
	if a.Credentials != nil {
		info.Placeholders = a.Credentials.Placeholders(info.ID)
	}
	dataplane.WriteJSON(w, http.StatusOK, info)
}

// SessionUpdate changes a live session: Unknown is its new unknown-request
// mode (deny, ask or learn). It is required.
type SessionUpdate struct {
	Unknown string `json:"unknown"`
}

func (a *API) updateSession(w http.ResponseWriter, r *http.Request) {
	var req SessionUpdate
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if req.Unknown == "" {
		a.writeError(w, fmt.Errorf("%w: session update: \"unknown\" is required (deny, ask or learn)", state.ErrInvalidArgument))
		return
	}
	info, err := a.Sessions.SetUnknown(r.Context(), r.PathValue("id"), req.Unknown)
	if err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventSessionUpdated, map[string]string{"session": info.ID, "unknown": info.Unknown})
	dataplane.WriteJSON(w, http.StatusOK, info)
}

func (a *API) deleteSession(w http.ResponseWriter, r *http.Request) {
	if err := a.Sessions.Delete(r.Context(), r.PathValue("id")); err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventSessionDeleted, map[string]string{"session": r.PathValue("id")})
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) listConnectors(w http.ResponseWriter, r *http.Request) {
	list, err := a.Store.List(r.Context())
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, connectorList{Connectors: list})
}

func (a *API) installConnector(w http.ResponseWriter, r *http.Request) {
	var req InstallRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if !filepath.IsAbs(req.Path) {
		a.writeError(w, fmt.Errorf("%w: path %q is not absolute; the daemon resolves it on its own machine", state.ErrInvalidArgument, req.Path))
		return
	}
	opts := store.InstallOptions{AllowUnpinned: req.AllowUnpinned, FetchedFrom: req.FetchedFrom}
	if req.Consent == nil {
		offer, err := a.Store.OfferWith(r.Context(), req.Path, opts)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, offer)
		return
	}
	c := *req.Consent
	c.By, c.Audited = caller(r), a.OnEvent != nil
	var inst store.Installed
	err := a.changeStore(func() error {
		// Load's refusals are the daemon's to report; a refused package is
		// simply not active, so it cannot conflict.
		active, _ := a.Store.Load(r.Context())
		var err error
		inst, err = a.Store.InstallWith(r.Context(), req.Path, active, opts, c)
		return err
	})
	if err != nil {
		a.writeError(w, err)
		return
	}
	details := map[string]string{"connector": inst.FQN, "version": inst.Version, "hash": inst.Hash, "signature": string(inst.Signature.Status)}
	if inst.Signature.Fingerprint != "" {
		details["signer"], details["authority"] = inst.Signature.Fingerprint, inst.Signature.Authority
	}
	if u := unpinnedActions(inst.Actions); u != "" {
		details["unpinned_actions"] = u
	}
	a.event(audit.EventStoreInstalled, details)
	a.event(audit.EventStoreConsented, ConsentDetails(inst, c))
	dataplane.WriteJSON(w, http.StatusCreated, inst)
}

// ConsentDetails are the details of a store.consented line for the
// version inst, installed or approved under c.
func ConsentDetails(inst store.Installed, c store.Consent) map[string]string {
	d := map[string]string{"connector": inst.FQN, "version": inst.Version, "hash": inst.Hash,
		"by": c.By, "via": c.Via, "hosts": strings.Join(inst.Grants.Hosts, ","),
		"credential_kinds": strings.Join(inst.Grants.CredentialKinds, ","), "signature": string(inst.Signature.Status)}
	if inst.Signature.Fingerprint != "" {
		d["signer"], d["authority"] = inst.Signature.Fingerprint, inst.Signature.Authority
	}
	if inst.Quarantined {
		d["quarantined"] = "true"
	}
	if len(inst.Widening) > 0 {
		d["widening"] = strings.Join(inst.Widening, "; ")
	}
	return d
}

func (a *API) approveConnector(w http.ResponseWriter, r *http.Request) {
	var req ApproveRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if req.Consent == nil {
		offer, err := a.Store.Pending(r.Context(), req.Ref)
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, offer)
		return
	}
	c := *req.Consent
	c.By = caller(r)
	inst, err := a.ApproveConnector(r.Context(), req.Ref, c)
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, inst)
}

// ApproveConnector serves the quarantined version ref under consent c
// (which must name its hash; c.By says who), serialised with the other
// store changes, and audits it as store.consented. The approvals page
// calls it too (Web.ApproveConnector).
func (a *API) ApproveConnector(ctx context.Context, ref string, c store.Consent) (store.Installed, error) {
	c.Via, c.Audited = store.ViaApprove, a.OnEvent != nil
	var inst store.Installed
	err := a.changeStore(func() error {
		active, _ := a.Store.Load(ctx)
		var err error
		inst, err = a.Store.Approve(ctx, ref, active, c)
		return err
	})
	if err != nil {
		return store.Installed{}, err
	}
	a.event(audit.EventStoreConsented, ConsentDetails(inst, c))
	return inst, nil
}

func (a *API) listConsents(w http.ResponseWriter, r *http.Request) {
	list, err := a.Store.Consents(r.Context())
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, consentList{Consents: append([]store.Consented{}, list...)})
}

func (a *API) removeConnector(w http.ResponseWriter, r *http.Request) {
	var req RemoveRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if err := a.changeStore(func() error { return a.Store.Remove(r.Context(), req.Ref) }); err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventStoreRemoved, map[string]string{"ref": req.Ref})
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) verifyConnectors(w http.ResponseWriter, r *http.Request) {
	problems := a.Store.Verify(r.Context())
	dataplane.WriteJSON(w, http.StatusOK, problemList{OK: len(problems) == 0, Problems: append([]store.Problem{}, problems...)})
}

// event reports a control-plane change to OnEvent, if set.
func (a *API) event(name audit.EventName, details map[string]string) {
	if a.OnEvent != nil {
		a.OnEvent(name, details)
	}
}

// changeStore runs one store mutation under storeMu, then OnStoreChange.
// A reload failure wraps errReload.
func (a *API) changeStore(change func() error) error {
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	if err := change(); err != nil {
		return err
	}
	if a.OnStoreChange == nil {
		return nil
	}
	if err := a.OnStoreChange(); err != nil {
		return fmt.Errorf("%w: the store changed but the daemon could not reload its policy: %w", errReload, err)
	}
	return nil
}

// Errors only the admin API produces.
var (
	errNoRoute = errors.New("not found")
	errReload  = errors.New("policy reload failed")
)

// decodeBody reads one JSON object from r's body (at most maxAdminBody
// bytes, no unknown fields, nothing after it). Failures wrap
// state.ErrInvalidArgument.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, state.ErrInvalidArgument) {
			return err
		}
		return fmt.Errorf("%w: request body: %v", state.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: request body: more than one JSON value", state.ErrInvalidArgument)
	}
	return nil
}

// adminErrors is consulted in order; the first sentinel err wraps wins.
func adminErrors() []dataplane.ErrorRule {
	return []dataplane.ErrorRule{
		// The fleet's Postgres unreachable: the node reconnects by itself.
		{Target: state.ErrUnavailable, Status: http.StatusServiceUnavailable, Class: dataplane.ClassUnavailable, Reason: policy.ReasonNotReady},
		{Target: store.ErrInvalidSpec, Status: http.StatusBadRequest, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidSpec},
		{Target: store.ErrInvalidPackage, Status: http.StatusBadRequest, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidPackage},
		{Target: state.ErrInvalidArgument, Status: http.StatusBadRequest, Class: dataplane.ClassInvalidRequest, Reason: policy.ReasonInvalidArgument},
		{Target: state.ErrConflict, Status: http.StatusConflict, Class: dataplane.ClassConflict, Reason: policy.ReasonConflict},
		{Target: state.ErrNotFound, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNotFound},
		{Target: errNoRoute, Status: http.StatusNotFound, Class: dataplane.ClassNotFound, Reason: policy.ReasonNoRoute},
		{Target: store.ErrTampered, Status: http.StatusInternalServerError, Class: dataplane.ClassInternal, Reason: policy.ReasonIntegrityFailure},
		{Target: errReload, Status: http.StatusInternalServerError, Class: dataplane.ClassInternal, Reason: policy.ReasonPolicyReloadFailed},
		{Target: state.ErrNotOpen, Status: http.StatusServiceUnavailable, Class: dataplane.ClassUnavailable, Reason: policy.ReasonNotReady},
	}
}

// WebhookTester sends a test event to every approval webhook and says how
// each answered (*notify.Notifier).
type WebhookTester interface {
	Test(ctx context.Context) []notify.Result
}

// runningConfig is the answer of GET /v1/config.
type runningConfig struct {
	PID  int    `json:"pid"`
	YAML string `json:"yaml"`
}

// webhookResults is the answer of POST /v1/approvals/webhooks/test.
type webhookResults struct {
	Results []notify.Result `json:"results"`
}

// writeError is the admin API's single error path: it classifies err by the
// sentinel it wraps and answers with the refusal envelope. Anything
// unclassified is a 500 and is logged.
func (a *API) writeError(w http.ResponseWriter, err error) {
	ref := dataplane.RefuseError(err, adminErrors())
	if ref.Status >= 500 && a.Log != nil {
		a.Log.Error().Str("event", "admin.api_error").Str("reason", string(ref.Reason)).Err(err).Msg("admin API request failed")
	}
	dataplane.WriteRefusal(w, ref)
}

// notConfigured answers every request under patterns (the routes of a
// part this daemon runs without) with not_enabled, naming what is missing.
func (a *API) notConfigured(mux *http.ServeMux, what string, patterns ...string) {
	off := func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, fmt.Errorf("%w: this daemon has no %s configured", state.ErrNotOpen, what))
	}
	for _, p := range patterns {
		mux.HandleFunc(p, off)
	}
}
