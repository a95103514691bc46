package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/aileronhq/aileron/policy"
)

// ErrExceedsManifest is wrapped by every *ExcessError.
var ErrExceedsManifest = errors.New("connector spec reaches beyond its manifest")

// Grants is what a package may reach: the effective grants. For a package
// without a manifest they are exactly what its spec reaches (Reach).
type Grants struct {
	// Hosts are canonical host:port authorities, sorted.
	Hosts []string `json:"hosts"`
	// CredentialKinds are the credential kinds, sorted.
	CredentialKinds []string `json:"credential_kinds,omitempty"`
	// CredentialScope is the manifest's [capabilities.credential] scope,
	// free text shown to the user; empty without one.
	CredentialScope string `json:"credential_scope,omitempty"`
	// OAuthScopes are the scopes of the manifest's oauth2 table, sorted.
	OAuthScopes []string `json:"oauth_scopes,omitempty"`
	// Imports are the runtime imports the manifest asks for, sorted.
	Imports []string `json:"imports,omitempty"`
	// OAuthAuthorizeURL, OAuthTokenURL and OAuthClientID name the OAuth
	// app of the manifest's oauth2 table (empty without one): where a
	// login sends the browser and its code, and where refreshes go.
	OAuthAuthorizeURL string `json:"oauth_authorize_url,omitempty"`
	OAuthTokenURL     string `json:"oauth_token_url,omitempty"`
	OAuthClientID     string `json:"oauth_client_id,omitempty"`
	// FromManifest is true when a manifest.toml bounds the package.
	FromManifest bool `json:"from_manifest"`
}

// Reach returns what spec reaches: the canonical host:port of every
// operation's hosts (port 443 when absent) and every credential kind used.
func Reach(spec *policy.Spec) Grants {
	var g Grants
	for _, t := range spec.Tools {
		for _, op := range t.Operations {
			for _, h := range op.Hosts {
				if a := authority(h); !slices.Contains(g.Hosts, a) {
					g.Hosts = append(g.Hosts, a)
				}
			}
			if k := op.Credential.Kind; k != "" && !slices.Contains(g.CredentialKinds, k) {
				g.CredentialKinds = append(g.CredentialKinds, k)
			}
		}
	}
	slices.Sort(g.Hosts)
	slices.Sort(g.CredentialKinds)
	return g
}

// Grants returns what the manifest grants.
func (m *Manifest) Grants() Grants {
	g := Grants{Hosts: slices.Sorted(slices.Values(m.Hosts)), FromManifest: true}
	if m.Credential != nil && m.Credential.Kind != "" {
		g.CredentialKinds = []string{m.Credential.Kind}
	}
	if m.Credential != nil {
		g.CredentialScope = m.Credential.Scope
		if o := m.Credential.OAuth2; o != nil {
			if len(o.Scopes) > 0 {
				g.OAuthScopes = slices.Sorted(slices.Values(o.Scopes))
			}
			g.OAuthAuthorizeURL, g.OAuthTokenURL, g.OAuthClientID = o.AuthorizeURL, o.TokenURL, o.ClientID
		}
	}
	if len(m.Imports) > 0 {
		g.Imports = slices.Sorted(slices.Values(m.Imports))
	}
	return g
}

// ExcessError is one way a spec reaches beyond its manifest (or does not
// match it): the manifest file, what is in excess, and where in the spec.
type ExcessError struct {
	File string
	// What is "host", "credential kind", "name" or "version".
	What  string
	Value string
	// Where names the operations (tool/operation) that use Value, or, for
	// a name or version, how it differs.
	Where string
}

func (e *ExcessError) Error() string {
	if e.What == "name" || e.What == "version" {
		return fmt.Sprintf("%s: connector.%s %s", e.File, e.What, e.Where)
	}
	return fmt.Sprintf("%s: the spec reaches %s %s (%s), which the manifest does not grant; add it to the manifest or remove it from the spec",
		e.File, e.What, strconv.Quote(e.Value), e.Where)
}

func (e *ExcessError) Unwrap() error { return ErrExceedsManifest }

// Check reports every way spec goes beyond m: a name or version that
// differs, each host:port not in m.Hosts, each credential kind other than
// m's. The errors (joined) are *ExcessError; nil means spec fits.
func (m *Manifest) Check(spec *policy.Spec) error {
	var errs []error
	add := func(what, value, where string) {
		errs = append(errs, &ExcessError{File: m.File, What: what, Value: value, Where: where})
	}
	if m.Name != spec.Connector.FQN {
		add("name", m.Name, fmt.Sprintf("is %s but the spec's connector.fqn is %s; they must be the same FQN",
			strconv.Quote(m.Name), strconv.Quote(spec.Connector.FQN)))
	}
	if m.Version != spec.Connector.Version {
		add("version", m.Version, fmt.Sprintf("is %s but the spec's connector.version is %s; they must be equal",
			strconv.Quote(m.Version), strconv.Quote(spec.Connector.Version)))
	}
	granted := m.Grants()
	users := func(match func(policy.OperationSpec) bool) string {
		var s string
		for _, t := range spec.Tools {
			for _, op := range t.Operations {
				if match(op) {
					if s == "" {
						s = "used by "
					} else {
						s += ", "
					}
					s += t.Name + "/" + op.Name
				}
			}
		}
		return s
	}
	reach := Reach(spec)
	for _, h := range reach.Hosts {
		if !slices.Contains(granted.Hosts, h) {
			add("host", h, users(func(op policy.OperationSpec) bool { return usesHost(op, h) }))
		}
	}
	for _, k := range reach.CredentialKinds {
		if !slices.Contains(granted.CredentialKinds, k) {
			add("credential kind", k, users(func(op policy.OperationSpec) bool { return op.Credential.Kind == k }))
		}
	}
	return errors.Join(errs...)
}

func usesHost(op policy.OperationSpec, h string) bool {
	return slices.ContainsFunc(op.Hosts, func(x string) bool { return authority(x) == h })
}

// authority is a spec host entry's canonical host:port (port 443 when it
// names none). An entry that does not parse (ParseSpec refuses those) is
// kept as written, so no manifest entry can grant it: the check fails
// closed.
func authority(h string) string {
	a, err := policy.ParseAuthority(h, policy.DefaultPort)
	if err != nil {
		return h
	}
	return a.String()
}
