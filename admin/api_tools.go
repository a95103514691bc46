package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/store"
)

// SessionTools is what a session's tools are rendered from (GET
// /v1/sessions/{id}/tools): the raw specs of the active connectors in the
// session's scope and the installed actions of those connectors. The CLI
// parses and renders them (`aileron session render`), so the admin side
// hands out exactly the bytes it enforces.
type SessionTools struct {
	Session string             `json:"session"`
	Specs   []json.RawMessage  `json:"specs"`
	Actions []action.Installed `json:"actions"`
}

// sessionTools answers GET /v1/sessions/{id}/tools.
func (a *API) sessionTools(w http.ResponseWriter, r *http.Request) {
	info, err := a.Sessions.Get(r.PathValue("id"))
	if err != nil {
		a.writeError(w, err)
		return
	}
	inScope := func(fqn string) bool { return info.Connectors == nil || slices.Contains(info.Connectors, fqn) }
	list, err := a.Store.List(r.Context())
	if err != nil {
		a.writeError(w, err)
		return
	}
	out := SessionTools{Session: info.ID, Specs: []json.RawMessage{}, Actions: []action.Installed{}}
	for _, in := range list {
		if !in.Active || !inScope(in.FQN) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(in.Dir, store.SpecFileName))
		if err != nil {
			a.writeError(w, fmt.Errorf("reading the spec of %s: %w", in.Ref(), err))
			return
		}
		out.Specs = append(out.Specs, json.RawMessage(b))
	}
	if a.Catalog != nil {
		if c := a.Catalog(); c != nil {
			for _, act := range c.List() {
				if inScope(act.Connector) {
					out.Actions = append(out.Actions, act)
				}
			}
		}
	}
	dataplane.WriteJSON(w, http.StatusOK, out)
}

// SessionTools fetches what session id's tools are rendered from.
func (c *Client) SessionTools(ctx context.Context, id string) (SessionTools, error) {
	var st SessionTools
	err := c.do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(id)+"/tools", nil, &st)
	return st, err
}
