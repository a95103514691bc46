package admin

import (
	"net/http"
	"strings"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/store"
)

// TrustRequest is the body of POST /v1/trust.
type TrustRequest struct {
	// Authority is scheme://owner (github://acme).
	Authority string `json:"authority"`
	// AllowedSigners is the text of an allowed_signers file; it replaces
	// the authority's signers.
	AllowedSigners string `json:"allowed_signers"`
	// Source names the file in error messages (the client's path).
	Source string `json:"source,omitempty"`
}

// UntrustRequest is the body of POST /v1/trust/remove.
type UntrustRequest struct {
	Authority string `json:"authority"`
}

// trustList is the answer of GET /v1/trust.
type trustList struct {
	Authorities []store.TrustedAuthority `json:"authorities"`
}

// trustRoutes adds the trust store's routes:
//
//	GET  /v1/trust         → {"authorities":[TrustedAuthority…]}
//	POST /v1/trust         TrustRequest → 201 TrustedAuthority
//	POST /v1/trust/remove  UntrustRequest → 204
//
// Removal is a POST with the authority in the body, like connector
// removal: "://" does not survive in a URL path.
func (a *API) trustRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/trust", a.listTrust)
	mux.HandleFunc("POST /v1/trust", a.setTrust)
	mux.HandleFunc("POST /v1/trust/remove", a.removeTrust)
}

func (a *API) listTrust(w http.ResponseWriter, r *http.Request) {
	list, err := a.Store.TrustList(r.Context())
	if err != nil {
		a.writeError(w, err)
		return
	}
	dataplane.WriteJSON(w, http.StatusOK, trustList{Authorities: append([]store.TrustedAuthority{}, list...)})
}

func (a *API) setTrust(w http.ResponseWriter, r *http.Request) {
	var req TrustRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	source := req.Source
	if source == "" {
		source = "allowed_signers"
	}
	ta, err := a.Store.Trust(r.Context(), req.Authority, source, []byte(req.AllowedSigners))
	if err != nil {
		a.writeError(w, err)
		return
	}
	fps := make([]string, len(ta.Signers))
	for i, s := range ta.Signers {
		fps[i] = s.Fingerprint
	}
	a.event(audit.EventTrustSet, map[string]string{"authority": ta.Authority, "keys": strings.Join(fps, ",")})
	dataplane.WriteJSON(w, http.StatusCreated, ta)
}

func (a *API) removeTrust(w http.ResponseWriter, r *http.Request) {
	var req UntrustRequest
	if err := decodeBody(r, &req); err != nil {
		a.writeError(w, err)
		return
	}
	if err := a.Store.Untrust(r.Context(), req.Authority); err != nil {
		a.writeError(w, err)
		return
	}
	a.event(audit.EventTrustRemoved, map[string]string{"authority": req.Authority})
	w.WriteHeader(http.StatusNoContent)
}
