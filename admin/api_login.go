package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// loginTimeout bounds the code exchange at the token endpoint.
const loginTimeout = 30 * time.Second

// LoginAppRequest is the body of POST /v1/credentials/login/app. Name,
// when set, is the credential the login will store: it is checked here,
// before the browser is sent anywhere.
type LoginAppRequest struct {
	Connector string `json:"connector"`
	Name      string `json:"name,omitempty"`
}

// LoginApp is the public half of a connector's OAuth app: what `aileron
// credential login` needs to send a browser to the authorize URL. The
// client secret stays in the daemon.
type LoginApp struct {
	Connector    string   `json:"connector"`
	Version      string   `json:"version"`
	AuthorizeURL string   `json:"authorize_url"`
	ClientID     string   `json:"client_id"`
	Scopes       []string `json:"scopes,omitempty"`
}

// LoginRequest is the body of POST /v1/credentials/login: the code the
// browser brought back to the CLI's loopback listener, the PKCE verifier
// and the redirect URI it used. It travels only over the admin API and is
// never stored.
type LoginRequest struct {
	Name         string `json:"name"`
	Connector    string `json:"connector"`
	Code         string `json:"code"`
	CodeVerifier string `json:"code_verifier"`
	RedirectURI  string `json:"redirect_uri"`
}

// LoginResult answers a login: the stored entry (never its values), the
// binding and the connector version whose app issued the tokens.
type LoginResult struct {
	Credential credentials.Info    `json:"credential"`
	Binding    credentials.Binding `json:"binding"`
	Version    string              `json:"version"`
}

// loginRoutes adds the OAuth login routes:
//
//	POST /v1/credentials/login/app   LoginAppRequest → LoginApp
//	POST /v1/credentials/login       LoginRequest → 201 LoginResult
func (a *API) loginRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/credentials/login/app", func(w http.ResponseWriter, r *http.Request) {
		var req LoginAppRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		if req.Name != "" {
			if err := credentials.CheckName(req.Name); err != nil {
				a.writeError(w, err)
				return
			}
		}
		inst, app, err := a.oauthApp(r.Context(), req.Connector)
		if err == nil && req.Name != "" {
			err = errors.Join(a.checkLoginTarget(req.Name), a.boundElsewhere(req.Name, inst.FQN))
		}
		if err != nil {
			a.writeError(w, err)
			return
		}
		dataplane.WriteJSON(w, http.StatusOK, LoginApp{Connector: inst.FQN, Version: inst.Version,
			AuthorizeURL: app.AuthorizeURL, ClientID: app.ClientID, Scopes: app.Scopes})
	})
	mux.HandleFunc("POST /v1/credentials/login", a.login)
}

// login redeems the code at the connector's token endpoint through the
// client OAuth refreshes use, stores the token set as the oauth2 entry
// req.Name (rotating an entry of that name) and binds it to the connector,
// keeping the placement of the connector's binding if it has one.
func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req LoginRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if err := credentials.CheckName(req.Name); err != nil { // before the code is spent
		a.writeError(w, err)
		return
	}
	inst, app, err := a.oauthApp(r.Context(), req.Connector)
	if err == nil {
		err = errors.Join(a.checkLoginTarget(req.Name), a.boundElsewhere(req.Name, inst.FQN)) // before the code is spent
	}
	if err != nil {
		a.writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), loginTimeout)
	defer cancel()
	m, err := credentials.ExchangeCode(ctx, a.Credentials.TokenClient(), app,
		credentials.CodeGrant{Code: req.Code, Verifier: req.CodeVerifier, RedirectURI: req.RedirectURI})
	if err != nil {
		a.writeError(w, loginFailure{err})
		return
	}
	if err := a.Vault.Set(credentials.Credential{Name: req.Name, Kind: policy.CredentialOAuth2, OAuth: m}); err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventCredentialSet, map[string]string{"credential": req.Name, "kind": policy.CredentialOAuth2, "connector": inst.FQN, "via": "login"})
	bd, _ := a.Bindings.Get(inst.FQN)
	bd.Connector, bd.Credential = inst.FQN, req.Name
	if err := a.Bindings.Bind(r.Context(), bd); err != nil {
		a.writeError(w, fmt.Errorf("credential %s was stored, but binding it to %s failed (run `aileron credential bind %s --credential %s`): %w",
			req.Name, inst.FQN, inst.FQN, req.Name, err))
		return
	}
	a.event(audit.EventBindingSet, map[string]string{"connector": bd.Connector, "credential": bd.Credential})
	res := LoginResult{Binding: bd, Version: inst.Version}
	for _, info := range a.Vault.List() {
		if info.Name == req.Name {
			res.Credential = info
		}
	}
	dataplane.WriteJSON(w, http.StatusCreated, res)
}

// boundElsewhere refuses a login into credential name while it is bound
// to a connector other than fqn: that connector would carry the tokens of
// fqn's app to its own hosts. It wraps state.ErrConflict.
func (a *API) boundElsewhere(name, fqn string) error {
	for _, b := range a.Bindings.List() {
		if b.Credential == name && b.Connector != fqn {
			return fmt.Errorf("%w: credential %s is bound to %s; a login for %s would hand that connector this app's tokens: "+
				"log in under another name, or `aileron credential unbind %s` first", state.ErrConflict, name, b.Connector, fqn, b.Connector)
		}
	}
	return nil
}

// loginFailure is a refused code exchange: the token endpoint's refusal is
// the caller's to fix (log in again), so it answers 400, not 500.
type loginFailure struct{ err error }

func (e loginFailure) Error() string { return e.err.Error() }
func (e loginFailure) Unwrap() []error {
	if errors.Is(e.err, state.ErrInvalidArgument) {
		return []error{e.err}
	}
	return []error{e.err, state.ErrInvalidArgument}
}

// oauthApp returns the active version of connector fqn and the OAuth app
// its manifest declares. The package is checked against its hash first, so
// a manifest changed in the store is never used. Failures: a connector
// that is not installed wraps state.ErrNotFound; a package that fails its
// check wraps store.ErrTampered; one without an oauth2 table wraps
// state.ErrInvalidArgument and says what to do instead.
func (a *API) oauthApp(ctx context.Context, fqn string) (store.Installed, credentials.OAuthApp, error) {
	if a.Store == nil || a.Vault == nil || a.Bindings == nil || a.Credentials == nil {
		return store.Installed{}, credentials.OAuthApp{}, fmt.Errorf("%w: this daemon has no store, vault or bindings configured", state.ErrNotOpen)
	}
	all, err := a.Store.List(ctx)
	if err != nil {
		return store.Installed{}, credentials.OAuthApp{}, err
	}
	i := slices.IndexFunc(all, func(in store.Installed) bool { return in.FQN == fqn && in.Active })
	if name, version, ok := strings.Cut(fqn, "@"); i < 0 && ok {
		return store.Installed{}, credentials.OAuthApp{}, fmt.Errorf("%w: connector %q names a version (%s); give the FQN alone (%s): "+
			"login uses the app of the connector's active version", state.ErrInvalidArgument, fqn, version, name)
	}
	if i < 0 {
		return store.Installed{}, credentials.OAuthApp{}, fmt.Errorf("%w: connector %q is not installed (see `aileron connector list`)", state.ErrNotFound, fqn)
	}
	inst := all[i]
	if got, err := store.HashPackage(inst.Dir); err != nil || got != inst.Hash {
		return inst, credentials.OAuthApp{}, fmt.Errorf("%w: %s in %s no longer matches its hash; reinstall it", store.ErrTampered, inst.Ref(), inst.Dir)
	}
	var m *manifest.Manifest
	file := filepath.Join(inst.Dir, manifest.FileName)
	if raw, rerr := state.ReadBounded(file, manifest.MaxSize+1); rerr == nil {
		m, err = manifest.Parse(file, raw)
		if err != nil {
			return inst, credentials.OAuthApp{}, fmt.Errorf("%w: %v", state.ErrInvalidArgument, err)
		}
	}
	if m == nil || m.Credential == nil || m.Credential.OAuth2 == nil {
		return inst, credentials.OAuthApp{}, noOAuthApp(inst)
	}
	o := m.Credential.OAuth2
	return inst, credentials.OAuthApp{AuthorizeURL: o.AuthorizeURL, TokenURL: o.TokenURL, ClientID: o.ClientID,
		ClientSecret: o.ClientSecret, Scopes: slices.Clone(o.Scopes), AuthMethod: o.TokenEndpointAuthMethod}, nil
}

// checkLoginTarget refuses a login into the vault entry name when it holds
// a credential of another kind: the login would replace it with a token
// set, and what uses it (its bindings) would lose it without a word.
func (a *API) checkLoginTarget(name string) error {
	for _, info := range a.Vault.List() {
		if info.Name == name && info.Kind != policy.CredentialOAuth2 {
			return fmt.Errorf("%w: credential %s is of kind %s, and a login would replace it with an OAuth token set; "+
				"log in under another NAME, or `aileron credential delete %s` first", state.ErrConflict, name, info.Kind, name)
		}
	}
	return nil
}

// noOAuthApp says why the installed connector inst has no app to log in
// with, and how to give it the credential its spec uses instead.
func noOAuthApp(inst store.Installed) error {
	head := fmt.Sprintf("%s has no [capabilities.credential.oauth2] table in its manifest, so it names no OAuth app to log in with", inst.Ref())
	kinds := inst.Grants.CredentialKinds
	switch {
	case len(kinds) == 0:
		return fmt.Errorf("%w: %s; it uses no credential, so there is nothing to log in to", state.ErrInvalidArgument, head)
	case !slices.Contains(kinds, policy.CredentialOAuth2):
		return fmt.Errorf("%w: %s; it uses %s: store the secret with `aileron credential set NAME --kind %s` (on stdin; docs/credentials.md) and bind it with "+
			"`aileron credential bind %s --credential NAME`", state.ErrInvalidArgument, head, strings.Join(kinds, ", "), kinds[0], inst.FQN)
	}
	return fmt.Errorf("%w: %s; store a token set with `aileron credential set NAME --kind oauth2` (JSON on stdin) and bind it with "+
		"`aileron credential bind %s --credential NAME`", state.ErrInvalidArgument, head, inst.FQN)
}
