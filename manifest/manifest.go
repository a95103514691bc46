package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
	"github.com/aileronhq/aileron/policy"
)

// FileName is the manifest's name at the root of a package.
const FileName = "manifest.toml"

// MaxSize bounds a manifest file in bytes.
const MaxSize = 64 << 10

// ErrInvalidManifest is wrapped by every *ValidationError.
var ErrInvalidManifest = errors.New("invalid connector manifest")

// Manifest is a parsed, validated manifest.toml: what a package asks for.
type Manifest struct {
	// File names the manifest in messages.
	File string
	// Name is the connector's FQN (scheme://owner/repo[/subpath]); it must
	// equal the spec's connector.fqn.
	Name string
	// Version is strict SemVer; it must equal the spec's connector.version.
	Version string
	// ProvenanceHash is "sha256:<64 lower-case hex>" naming the source the
	// package was built from, or empty. It is recorded, not checked.
	ProvenanceHash string
	// Hosts are the canonical host:port authorities the package may reach.
	Hosts []string
	// Credential is the credential the package may use; nil means none.
	Credential *Credential
	// Imports are the runtime imports the package asks for.
	Imports []string
	// Intents are the intents the package provides.
	Intents []string
}

// Credential is the [capabilities.credential] table.
type Credential struct {
	// Kind is a policy credential kind (oauth2, api_key, bearer, basic,
	// aws_sigv4).
	Kind string
	// Scope describes what the credential may do; free text, may be empty.
	Scope string
	// OAuth2 is the publisher's OAuth app; only with kind oauth2, optional.
	OAuth2 *OAuth2
}

// OAuth2 is the [capabilities.credential.oauth2] table.
type OAuth2 struct {
	AuthorizeURL string
	TokenURL     string
	ClientID     string
	Scopes       []string
	// ClientSecret is the app's public-client secret, or empty.
	ClientSecret string
	// TokenEndpointAuthMethod is how the client authenticates at TokenURL:
	// one of the AuthMethod constants, or empty for the default
	// (client_secret_basic with a secret, none without one).
	TokenEndpointAuthMethod string
}

// How a client authenticates at the token endpoint, named as in RFC 7591's
// token_endpoint_auth_method (the same names package inject uses).
const (
	// AuthMethodBasic sends the client id and secret as HTTP Basic.
	AuthMethodBasic = "client_secret_basic"
	// AuthMethodPost sends client_id and client_secret in the request body.
	AuthMethodPost = "client_secret_post"
	// AuthMethodNone sends only client_id: a public client without a secret.
	AuthMethodNone = "none"
)

var authMethods = []string{AuthMethodBasic, AuthMethodPost, AuthMethodNone}

// ValidationError is one broken rule: the file, the key path and the rule.
type ValidationError struct {
	File string
	// Key is the dotted key path ("capabilities.network.hosts[1]"); empty
	// for the whole file.
	Key string
	// Rule is a stable machine name of the rule broken.
	Rule string
	Msg  string
}

func (e *ValidationError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s [%s]", e.File, e.Msg, e.Rule)
	}
	return fmt.Sprintf("%s: %s: %s [%s]", e.File, e.Key, e.Msg, e.Rule)
}

func (e *ValidationError) Unwrap() error { return ErrInvalidManifest }

type problems struct {
	file string
	errs []error
}

func (p *problems) add(key, rule, msg string) {
	p.errs = append(p.errs, &ValidationError{File: p.file, Key: key, Rule: rule, Msg: msg})
}

func (p *problems) err() error { return errors.Join(p.errs...) }

type rawManifest struct {
	Connector struct {
		Name           *string `toml:"name"`
		Version        *string `toml:"version"`
		ProvenanceHash *string `toml:"provenance_hash"`
	} `toml:"connector"`
	Capabilities struct {
		Network struct {
			Hosts []string `toml:"hosts"`
		} `toml:"network"`
		Credential *rawCredential `toml:"credential"`
		Runtime    struct {
			Imports []string `toml:"imports"`
		} `toml:"runtime"`
	} `toml:"capabilities"`
	Provides struct {
		Intents []string `toml:"intents"`
	} `toml:"provides"`
}

type rawCredential struct {
	Kind   *string `toml:"kind"`
	Scope  string  `toml:"scope"`
	OAuth2 *struct {
		AuthorizeURL *string  `toml:"authorize_url"`
		TokenURL     *string  `toml:"token_url"`
		ClientID     *string  `toml:"client_id"`
		Scopes       []string `toml:"scopes"`
		ClientSecret string   `toml:"client_secret"`
		AuthMethod   *string  `toml:"token_endpoint_auth_method"`
	} `toml:"oauth2"`
}

// Parse decodes and validates one manifest.toml. file names it in errors.
// On failure it returns every problem found, joined; each is a
// *ValidationError wrapping ErrInvalidManifest.
func Parse(file string, data []byte) (*Manifest, error) {
	p := &problems{file: file}
	switch {
	case len(data) > MaxSize:
		p.add("", "size_limit", fmt.Sprintf("manifest is %d bytes, over the %d-byte limit", len(data), MaxSize))
	case !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0:
		p.add("", "encoding", "manifest is not UTF-8 text; save it as UTF-8 without NUL bytes")
	}
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	var raw rawManifest
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		p.add("", "toml", tomlMessage(err))
		return nil, p.err()
	}
	checkUndecoded(md, p)
	m := &Manifest{File: file}
	m.connector(&raw, p)
	m.Hosts = hosts(raw.Capabilities.Network.Hosts, p)
	m.Credential = credential(raw.Capabilities.Credential, p)
	m.Imports = names(raw.Capabilities.Runtime.Imports, "capabilities.runtime.imports", p)
	m.Intents = names(raw.Provides.Intents, "provides.intents", p)
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return m, nil
}

func (m *Manifest) connector(raw *rawManifest, p *problems) {
	c := raw.Connector
	switch {
	case c.Name == nil:
		p.add("connector.name", "required", `[connector] needs name, the connector's FQN as in the spec's connector.fqn, e.g. name = "github://acme/aileron-connector-google"`)
	default:
		m.Name = *c.Name
		if err := policy.CheckFQN(m.Name); err != nil {
			p.add("connector.name", "fqn", err.Error())
		}
	}
	switch {
	case c.Version == nil:
		p.add("connector.version", "required", `[connector] needs version, the spec's connector.version, e.g. version = "1.2.3"`)
	default:
		m.Version = *c.Version
		if err := policy.CheckSemVer(m.Version); err != nil {
			p.add("connector.version", "semver", err.Error())
		}
	}
	if c.ProvenanceHash != nil {
		m.ProvenanceHash = *c.ProvenanceHash
		hex, ok := strings.CutPrefix(m.ProvenanceHash, "sha256:")
		if !ok || len(hex) != 64 || strings.Trim(hex, "0123456789abcdef") != "" {
			p.add("connector.provenance_hash", "provenance_hash",
				fmt.Sprintf("%s is not sha256:<64 lower-case hex digits>; write the SHA-256 of the source the package was built from, or leave the key out", strconv.Quote(m.ProvenanceHash)))
		}
	}
}

// hosts checks each entry is a canonical host:port with an explicit port.
func hosts(list []string, p *problems) []string {
	var out []string
	seen := map[string]bool{}
	for i, h := range list {
		key := fmt.Sprintf("capabilities.network.hosts[%d]", i)
		a, err := policy.ParseAuthority(h, 0)
		if err != nil {
			p.add(key, "host", fmt.Sprintf("%s; write host:port, e.g. \"api.example.com:443\", one entry per host (no wildcards)", strings.TrimPrefix(err.Error(), policy.ErrBadAuthority.Error()+": ")))
			continue
		}
		if c := a.String(); c != h {
			p.add(key, "host_canonical", fmt.Sprintf("%s is not in canonical form; write %s", strconv.Quote(h), strconv.Quote(c)))
			continue
		}
		if seen[h] {
			p.add(key, "host_duplicate", fmt.Sprintf("%s is listed twice; list it once", strconv.Quote(h)))
			continue
		}
		seen[h] = true
		out = append(out, h)
	}
	return out
}

var kinds = []string{policy.CredentialOAuth2, policy.CredentialAPIKey, policy.CredentialBearer, policy.CredentialBasic, policy.CredentialAWSSigV4}

func credential(raw *rawCredential, p *problems) *Credential {
	if raw == nil {
		return nil
	}
	const key = "capabilities.credential.kind"
	c := &Credential{Scope: raw.Scope}
	switch {
	case raw.Kind == nil:
		p.add(key, "required", "[capabilities.credential] needs kind: one of "+strings.Join(kinds, ", "))
	case !contains(kinds, *raw.Kind):
		msg := fmt.Sprintf("unknown credential kind %s; use one of %s", strconv.Quote(*raw.Kind), strings.Join(kinds, ", "))
		if s, ok := policy.Closest(*raw.Kind, kinds); ok {
			msg = fmt.Sprintf("unknown credential kind %s (did you mean %s?); use one of %s", strconv.Quote(*raw.Kind), strconv.Quote(s), strings.Join(kinds, ", "))
		}
		p.add(key, "credential_kind", msg)
	default:
		c.Kind = *raw.Kind
	}
	if raw.OAuth2 == nil {
		return c
	}
	if raw.Kind != nil && *raw.Kind != policy.CredentialOAuth2 {
		p.add("capabilities.credential.oauth2", "oauth2_kind", fmt.Sprintf("an oauth2 table needs kind = \"oauth2\", not %s; remove the table or change the kind", strconv.Quote(*raw.Kind)))
	}
	o := raw.OAuth2
	c.OAuth2 = &OAuth2{AuthorizeURL: httpsURL(o.AuthorizeURL, "authorize_url", p), TokenURL: httpsURL(o.TokenURL, "token_url", p),
		Scopes: names(o.Scopes, "capabilities.credential.oauth2.scopes", p), ClientSecret: o.ClientSecret}
	if o.ClientID == nil || *o.ClientID == "" {
		p.add("capabilities.credential.oauth2.client_id", "required", "the oauth2 table needs client_id, the publisher's OAuth app id")
	} else {
		c.OAuth2.ClientID = *o.ClientID
	}
	c.OAuth2.TokenEndpointAuthMethod = authMethod(o.AuthMethod, o.ClientSecret, p)
	return c
}

// authMethod checks the oauth2 table's token_endpoint_auth_method against
// its client_secret and returns it, or "" when it is left out or broken.
func authMethod(m *string, secret string, p *problems) string {
	const key = "capabilities.credential.oauth2.token_endpoint_auth_method"
	switch {
	case m == nil:
		return ""
	case !contains(authMethods, *m):
		msg := fmt.Sprintf("unknown token_endpoint_auth_method %s; use one of %s, or leave it out", strconv.Quote(*m), strings.Join(authMethods, ", "))
		if s, ok := policy.Closest(*m, authMethods); ok {
			msg = fmt.Sprintf("unknown token_endpoint_auth_method %s (did you mean %s?); use one of %s, or leave it out",
				strconv.Quote(*m), strconv.Quote(s), strings.Join(authMethods, ", "))
		}
		p.add(key, "auth_method", msg)
	case *m == AuthMethodNone && secret != "":
		p.add(key, "auth_method_secret", "token_endpoint_auth_method \"none\" is for a public client, yet the table has a client_secret; "+
			"remove the secret, or use \"client_secret_basic\" or \"client_secret_post\"")
	case *m != AuthMethodNone && secret == "":
		p.add(key, "auth_method_secret", fmt.Sprintf("token_endpoint_auth_method %s needs a client_secret; add it, or use \"none\" for a public client", strconv.Quote(*m)))
	default:
		return *m
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
