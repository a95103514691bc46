package admin

import (
	"net/http"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/dataplane"
)

// SetCredentialRequest is the body of POST /v1/credentials. Input is the
// secret material exactly as the CLI read it from stdin or --from-file (see
// ParseSecretInput); it travels only over the admin socket.
type SetCredentialRequest struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Input    string `json:"input"`
	Username string `json:"username,omitempty"`
	Service  string `json:"service,omitempty"`
}

// UnbindRequest is the body of POST /v1/bindings/remove.
type UnbindRequest struct {
	Connector string `json:"connector"`
}

type (
	credentialList struct {
		Credentials []credentials.Info `json:"credentials"`
	}
	bindingList struct {
		Bindings []credentials.Binding `json:"bindings"`
	}
)

// credentialRoutes adds the vault and binding routes:
//
//	POST   /v1/credentials             SetCredentialRequest → 201 credentials.Info (never values)
//	GET    /v1/credentials             → {"credentials":[credentials.Info…]}
//	DELETE /v1/credentials/{name}      → 204
//	POST   /v1/bindings                credentials.Binding → 201 credentials.Binding
//	GET    /v1/bindings                → {"bindings":[credentials.Binding…]}
//	POST   /v1/bindings/remove         UnbindRequest → 204
//	/v1/credentials/login…             see loginRoutes
func (a *API) credentialRoutes(mux *http.ServeMux) {
	if a.Vault == nil || a.Bindings == nil {
		a.notConfigured(mux, "vault or bindings", "/v1/credentials", "/v1/credentials/", "/v1/bindings", "/v1/bindings/")
		return
	}
	mux.HandleFunc("POST /v1/credentials", a.setCredential)
	a.loginRoutes(mux)
	mux.HandleFunc("GET /v1/credentials", func(w http.ResponseWriter, r *http.Request) {
		dataplane.WriteJSON(w, http.StatusOK, credentialList{Credentials: append([]credentials.Info{}, a.Vault.List()...)})
	})
	mux.HandleFunc("DELETE /v1/credentials/{name}", func(w http.ResponseWriter, r *http.Request) {
		if err := a.Vault.Delete(r.PathValue("name")); err != nil {
			a.writeError(w, err)
			return
		}
		a.event(audit.EventCredentialDeleted, map[string]string{"credential": r.PathValue("name")})
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/bindings", func(w http.ResponseWriter, r *http.Request) {
		var b credentials.Binding
		if err := decodeBody(r, &b); err != nil {
			a.writeError(w, err)
			return
		}
		if err := a.Bindings.Bind(r.Context(), b); err != nil {
			a.writeError(w, err)
			return
		}
		a.event(audit.EventBindingSet, map[string]string{"connector": b.Connector, "credential": b.Credential})
		dataplane.WriteJSON(w, http.StatusCreated, b)
	})
	mux.HandleFunc("GET /v1/bindings", func(w http.ResponseWriter, r *http.Request) {
		dataplane.WriteJSON(w, http.StatusOK, bindingList{Bindings: append([]credentials.Binding{}, a.Bindings.List()...)})
	})
	mux.HandleFunc("POST /v1/bindings/remove", func(w http.ResponseWriter, r *http.Request) {
		var req UnbindRequest
		if err := decodeBody(r, &req); err != nil {
			a.writeError(w, err)
			return
		}
		if err := a.Bindings.Unbind(r.Context(), req.Connector); err != nil {
			a.writeError(w, err)
			return
		}
		a.event(audit.EventBindingRemoved, map[string]string{"connector": req.Connector})
		w.WriteHeader(http.StatusNoContent)
	})
}

func (a *API) setCredential(w http.ResponseWriter, r *http.Request) {
	var req SetCredentialRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	secret, oauth, err := credentials.ParseSecretInput(req.Kind, []byte(req.Input), req.Username, req.Service)
	if err != nil {
		a.writeError(w, err)
		return
	}
	now := time.Now()
	c := credentials.Credential{Name: req.Name, Kind: req.Kind, Secret: secret, OAuth: oauth, CreatedAt: now, UpdatedAt: now}
	if err := a.Vault.Set(c); err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventCredentialSet, map[string]string{"credential": req.Name, "kind": req.Kind})
	for _, info := range a.Vault.List() {
		if info.Name == req.Name {
			dataplane.WriteJSON(w, http.StatusCreated, info)
			return
		}
	}
	w.WriteHeader(http.StatusCreated)
}
