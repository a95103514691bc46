package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
	"github.com/rs/zerolog"
)

// credentialKinds is the list of kinds for messages.
const credentialKinds = "api_key, bearer, basic, oauth2 or aws_sigv4"

// maxRotationRetries is how many newer entries a request tries after its
// OAuth refresh lost to a rotation (a login) before it fails.
const maxRotationRetries = 3

// Injector implements dataplane.Injector over a Vault and Bindings: for a
// matched operation whose spec declares a credential, it looks up the
// binding of the operation's connector, reads the bound vault entry (so a
// rotation applies from the next request), and puts it on the outbound
// request at the spec's placement, overridden by the binding's. oauth2
// entries are refreshed before expiry (one inject.OAuthSource per
// credential, single-flight), and refreshed tokens are persisted to the
// vault.
//
// Vault and Bindings are required (without them every credentialed request
// fails closed). Methods are safe for concurrent use.
type Injector struct {
	Vault    *Vault
	Bindings *Bindings
	// PlaceholderKey keys the placeholder values handed to sandboxes (see
	// Placeholders). Empty means no placeholders.
	PlaceholderKey []byte
	// HTTPClient reaches OAuth token endpoints. Nil means http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock for token expiry and request signing. Nil means
	// time.Now.
	Now func() time.Time
	// Log receives credential.refreshed and credential.refresh_failed
	// lines, which never hold secret bytes. Nil discards them.
	Log *zerolog.Logger
	// OnEvent receives the same events for the audit trail and metrics:
	// "credential.refreshed" or "credential.refresh_failed" with the
	// credential's name (never a value). Nil means none.
	OnEvent func(event audit.EventName, details map[string]string)

	mu      sync.Mutex
	sources map[string]*oauthSource // by credential name
	forms   inject.EchoForms        // each secret's echo forms, worked out once
	// holders are placeholders worked out (an HMAC each), by session id
	// and credential name; at most maxPlaceholders, then started over.
	holders map[placeholderKey]string
}

// placeholderKey names a session's placeholder of one credential.
type placeholderKey struct{ session, credential string }

const maxPlaceholders = 4096

// oauthSource is a cached token source and the vault revision it was built
// from.
type oauthSource struct {
	rev time.Time // the entry's UpdatedAt
	src *inject.OAuthSource
}

// injectFailure is an Inject error: a message free of secret bytes, and the
// sentinels it wraps (always dataplane.ErrCredentialUnavailable).
type injectFailure struct {
	msg  string
	errs []error
}

func (e *injectFailure) Error() string   { return e.msg }
func (e *injectFailure) Unwrap() []error { return e.errs }

// Inject implements dataplane.Injector. An operation whose spec declares no
// credential gets none: (nil, nil). Otherwise the credential bound to
// op.FQN is written onto out, replacing whatever the client put in the same
// place, and every form of it an upstream could echo is returned.
//
// The place is the spec's primary one, or the alternative place where the
// client put the session's placeholder (inject.Choose); the client's values
// in the spec's other places are removed. A binding that names a header,
// query parameter or format pins one place. A placeholder of another
// session in any of those places is refused as a *dataplane.DenyError with
// reason placeholder_misuse.
//
// Every other
// failure (no binding, no vault entry, an entry of a kind the spec cannot
// use, a target outside op's hosts, a failed OAuth refresh) wraps
// dataplane.ErrCredentialUnavailable, names the connector and the fix, and
// never contains secret bytes. Failures before the credential is written
// leave out untouched; if inject.Apply itself fails, out may be partly
// modified and must not be sent (the data plane refuses the request).
func (c *Injector) Inject(ctx context.Context, sess *dataplane.Session, op *policy.Operation, out *http.Request) ([]string, error) {
	if op == nil || op.Spec == nil || op.Spec.Credential.IsZero() {
		return nil, nil
	}
	b, cred, err := c.lookup(op)
	if err != nil {
		return nil, err
	}
	if err := checkTarget(op, out); err != nil {
		return nil, err
	}
	places := placesFor(op.Spec.Credential, b)
	at, err := inject.Choose(out, places, c.placeholder(sess, b.Credential))
	if err != nil {
		return nil, &dataplane.DenyError{Reason: policy.ReasonPlaceholder, Message: fmt.Sprintf(
			"%s: %v; a sandbox gets its own session's placeholder from `aileron session env`", opLabel(op), err)}
	}
	secret, err := c.secretFor(ctx, op, cred)
	if err != nil {
		return nil, err
	}
	inject.ClearOthers(out, places, at)
	echoes, err := inject.ApplyWith(out, places[at], secret, c.now(), &c.forms)
	if err != nil {
		return nil, failure(err, secretValues(cred), "%s: putting credential %s on the request failed", opLabel(op), cred.Name)
	}
	return echoes, nil
}

// lookup finds op's binding and its vault entry, and checks the entry's
// kind against the spec's.
func (c *Injector) lookup(op *policy.Operation) (Binding, Credential, error) {
	kind := op.Spec.Credential.Kind
	if c.Vault == nil || c.Bindings == nil {
		return Binding{}, Credential{}, failure(nil, nil, "%s needs a %s credential, but this daemon has no vault configured", opLabel(op), kind)
	}
	b, ok := c.Bindings.Get(op.FQN)
	if !ok {
		return Binding{}, Credential{}, failure(nil, nil, "%s needs a %s credential and none is bound to connector %s; "+
			"run `aileron credential bind %s --credential NAME`", opLabel(op), kind, op.FQN, op.FQN)
	}
	cred, err := c.Vault.Get(b.Credential)
	if errors.Is(err, state.ErrNotFound) {
		c.mu.Lock()
		delete(c.sources, b.Credential) // a deleted entry's tokens leave memory
		c.mu.Unlock()
		return Binding{}, Credential{}, failure(nil, nil, "%s: connector %s is bound to credential %s, which is not in the vault; "+
			"store it with `aileron credential set %s --kind %s` (secret on stdin) or rebind with `aileron credential bind %s --credential NAME`",
			opLabel(op), op.FQN, b.Credential, b.Credential, kind, op.FQN)
	}
	if err != nil {
		return Binding{}, Credential{}, failure(err, nil, "%s: reading credential %s", opLabel(op), b.Credential)
	}
	if !kindCompatible(kind, cred.Kind) {
		return Binding{}, Credential{}, failure(nil, nil, "%s needs a %s credential, but connector %s is bound to credential %s of kind %s; "+
			"bind a %s credential with `aileron credential bind %s --credential NAME`",
			opLabel(op), kind, op.FQN, cred.Name, cred.Kind, compatibleKinds(kind), op.FQN)
	}
	return b, cred, nil
}

// secretFor returns what inject.Apply puts on the wire for cred under op's
// spec; for oauth2 that is a current access token, refreshed if needed.
func (c *Injector) secretFor(ctx context.Context, op *policy.Operation, cred Credential) (inject.Secret, error) {
	spec := op.Spec.Credential
	switch cred.Kind {
	case inject.KindAPIKey, inject.KindBearer:
		s := cred.Secret
		s.Kind = spec.Kind // the spec decides how the token is written
		return s, nil
	case inject.KindSigV4:
		s := cred.Secret
		if spec.Service != "" {
			s.Service = spec.Service
		}
		return s, nil
	case inject.KindOAuth2:
		src := c.source(cred)
		tok, err := src.AccessToken(ctx)
		failed := tok == "" || err != nil && !errors.Is(err, inject.ErrPersistFailed)
		// Rotated meanwhile (a login on another node)? Then the new entry's
		// tokens serve. A node that learns of rotations late can meet
		// several in a row: each failed attempt read the vault again, so
		// the next source is newer; maxRotationRetries bounds the chase.
		for i := 0; failed && i < maxRotationRetries; i++ {
			next := c.source(cred)
			if next == src {
				break
			}
			src = next
			tok, err = src.AccessToken(ctx)
			failed = tok == "" || err != nil && !errors.Is(err, inject.ErrPersistFailed)
		}
		if failed {
			return inject.Secret{}, failure(err, secretValues(cred), "%s: getting an OAuth access token for credential %s failed "+
				"(check its token endpoint and refresh token; `aileron credential login %s --connector %s` or "+
				"`aileron credential set %s --kind oauth2` stores new ones)",
				opLabel(op), cred.Name, cred.Name, op.FQN, cred.Name)
		}
		return inject.Secret{Kind: inject.KindBearer, Token: tok}, nil
	}
	return cred.Secret, nil
}

// source returns the token source of the oauth2 entry cred, creating it on
// first use and again after the entry was rotated. It is built from the
// entry the vault holds now, not from cred: a request that read the entry
// before a rotation gets the rotated entry's source, so a source is never
// built again for a token set a newer one replaced, and one token set never
// has two sources each refreshing with the same refresh token (a provider
// that rotates refresh tokens revokes the chain on the second use).
func (c *Injector) source(cred Credential) *inject.OAuthSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, err := c.Vault.Get(cred.Name); err == nil && cur.Kind == inject.KindOAuth2 && cur.OAuth != nil {
		cred = cur
	}
	if e := c.sources[cred.Name]; e != nil && e.rev.Equal(cred.UpdatedAt) {
		return e.src
	}
	if c.sources == nil {
		c.sources = map[string]*oauthSource{}
	}
	name, rev, m, secrets := cred.Name, cred.UpdatedAt, cred.OAuth, secretValues(cred)
	hc := c.TokenClient()
	src := &inject.OAuthSource{
		Config: inject.OAuthConfig{TokenURL: m.TokenURL, ClientID: m.ClientID, ClientSecret: m.ClientSecret,
			Scopes: slices.Clone(m.Scopes), AuthMethod: m.AuthMethod},
		Token: inject.OAuthToken{AccessToken: m.AccessToken, RefreshToken: m.RefreshToken, TokenType: "Bearer", Expiry: m.Expiry},
		Persist: func(t inject.OAuthToken) error {
			return c.Vault.updateOAuthToken(name, t, &rev)
		},
		HTTPClient: hc,
		Now:        c.Now,
		OnRefresh: func(ok bool, err error) {
			if c.OnEvent != nil {
				ev := audit.EventCredentialRefreshFailed
				if ok {
					ev = audit.EventCredentialRefreshed
				}
				c.OnEvent(ev, map[string]string{"credential": name})
			}
			ev := c.log().Warn().Str("event", string(audit.EventCredentialRefreshFailed))
			if ok {
				ev = c.log().Info().Str("event", string(audit.EventCredentialRefreshed))
			}
			ev = ev.Str("credential", name)
			switch {
			case ok && err != nil:
				ev = ev.Str("warning", redact(err.Error(), secrets))
			case err != nil:
				ev = ev.Str("error", redact(err.Error(), secrets))
			}
			ev.Msg("OAuth token refresh")
		},
	}
	if c.Vault.DB.Shared() { // one node of the fleet refreshes at a time
		src.Coordinate = func(ctx context.Context) (inject.OAuthToken, func(), error) {
			return c.Vault.coordinateOAuth(ctx, name, rev)
		}
	}
	c.sources[name] = &oauthSource{rev: rev, src: src}
	return src
}

// TokenClient is the client that reaches OAuth token endpoints: HTTPClient,
// or http.DefaultClient. A login's code exchange uses it too, so that it
// leaves the way refreshes do.
func (c *Injector) TokenClient() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

// Placeholders maps each Env variable of every binding that has one to the
// placeholder value of its credential for the session sessionID. The
// sandbox gets these instead of real keys; the proxy puts the real
// credential on matched operations. Nil when there are none or no
// PlaceholderKey is set.
func (c *Injector) Placeholders(sessionID string) map[string]string {
	if c.Bindings == nil || len(c.PlaceholderKey) == 0 {
		return nil
	}
	var out map[string]string
	for _, b := range c.Bindings.List() {
		for _, env := range b.EnvNames() {
			if out == nil {
				out = map[string]string{}
			}
			out[env] = inject.Placeholder(c.PlaceholderKey, sessionID, b.Credential)
		}
	}
	return out
}

// now returns the injector clock's time.
func (c *Injector) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// log returns Log, or a logger that discards.
func (c *Injector) log() *zerolog.Logger {
	if c.Log != nil {
		return c.Log
	}
	nop := zerolog.Nop()
	return &nop
}

// placesFor lists where op's credential may go: the spec's places
// (inject.PlacesFor), or the one place a binding pins by naming a header,
// a query parameter or a format (placementFor).
func placesFor(spec policy.Credential, b Binding) []inject.Placement {
	if b.Header != "" || b.Query != "" || b.Format != "" {
		return []inject.Placement{placementFor(spec, b)}
	}
	return inject.PlacesFor(spec)
}

// placeholder is the session's placeholder for credential name, or "" when
// there are no placeholders: worked out once per session and credential,
// not per request.
func (c *Injector) placeholder(sess *dataplane.Session, name string) string {
	if sess == nil || len(c.PlaceholderKey) == 0 {
		return ""
	}
	k := placeholderKey{sess.ID, name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.holders[k]; ok {
		return v
	}
	if c.holders == nil || len(c.holders) >= maxPlaceholders {
		c.holders = map[placeholderKey]string{}
	}
	v := inject.Placeholder(c.PlaceholderKey, sess.ID, name)
	c.holders[k] = v
	return v
}

// placementFor is the spec's placement with the binding's overrides: a
// binding header or query parameter replaces the spec's location (dropping
// the spec's format when the location changes, so the new one gets its own
// default), and a binding format replaces the spec's. inject.PlacementFor
// then fills in the defaults.
func placementFor(spec policy.Credential, b Binding) inject.Placement {
	c := spec
	moved := b.Header != "" && !strings.EqualFold(b.Header, spec.Header) || b.Query != "" && b.Query != spec.Query
	switch {
	case b.Header != "":
		c.Header, c.Query = b.Header, ""
	case b.Query != "":
		c.Header, c.Query = "", b.Query
	}
	if moved {
		c.Format = ""
	}
	if b.Format != "" {
		c.Format = b.Format
	}
	return inject.PlacementFor(c)
}

// checkTarget refuses to put a credential on a request addressed outside
// op's hosts (a backstop: the data plane matched op on this request). Both
// the URL's host and the Host field, when set, must be one of op.Hosts.
func checkTarget(op *policy.Operation, out *http.Request) error {
	port := 443
	if out.URL.Scheme == "http" {
		port = 80
	}
	named := false
	for _, h := range []string{out.URL.Host, out.Host} {
		if h == "" {
			continue
		}
		named = true
		if a, err := policy.ParseAuthority(h, port); err != nil || !slices.Contains(op.Hosts, a) {
			return failure(nil, nil, "%s: the request is addressed to %q, which is not one of the operation's hosts; "+
				"its credential is not sent", opLabel(op), h)
		}
	}
	if !named {
		return failure(nil, nil, "%s: the request names no host; its credential is not sent", opLabel(op))
	}
	return nil
}

// kindCompatible reports whether a vault entry of kind stored can serve a
// spec declaring kind spec.
func kindCompatible(spec, stored string) bool {
	switch spec {
	case inject.KindAPIKey, inject.KindBearer:
		return stored == inject.KindAPIKey || stored == inject.KindBearer
	}
	return spec == stored
}

// compatibleKinds names the entry kinds a spec kind accepts, for messages.
func compatibleKinds(spec string) string {
	if spec == inject.KindAPIKey || spec == inject.KindBearer {
		return "api_key or bearer"
	}
	return spec
}

// opLabel names an operation in messages.
func opLabel(op *policy.Operation) string {
	return fmt.Sprintf("operation %s/%s of %s", op.Tool, op.Spec.Name, op.Ref())
}

// failure builds an Inject error wrapping dataplane.ErrCredentialUnavailable
// (and, when cause wraps them, inject.ErrRefreshFailed, inject.ErrBadSecret
// or a context error). cause's text is included with every secret in
// secrets masked; cause itself is not wrapped, so no caller can reach its
// unmasked text.
func failure(cause error, secrets []string, format string, args ...any) error {
	msg := dataplane.ErrCredentialUnavailable.Error() + ": " + fmt.Sprintf(format, args...)
	errs := []error{dataplane.ErrCredentialUnavailable}
	if cause != nil {
		msg += ": " + redact(cause.Error(), secrets)
		for _, s := range []error{inject.ErrRefreshFailed, inject.ErrBadSecret, state.ErrNotOpen, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(cause, s) {
				errs = append(errs, s)
			}
		}
	}
	return &injectFailure{msg: msg, errs: errs}
}

// secretValues lists cred's secret strings, for masking.
func secretValues(c Credential) []string {
	s := c.Secret
	out := []string{s.Token, s.Password, s.AccessKeyID, s.SecretAccessKey, s.SessionToken}
	if m := c.OAuth; m != nil {
		out = append(out, m.ClientSecret, m.AccessToken, m.RefreshToken)
	}
	return out
}

// redact masks every secret in msg with the data plane's own masker
// (longest match first, so a secret inside another never leaves a part of
// the longer one visible).
func redact(msg string, secrets []string) string {
	return inject.NewRedactor(secrets...).String(msg)
}
