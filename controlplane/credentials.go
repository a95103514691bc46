package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// credentialKinds is the list of kinds for messages.
const credentialKinds = "api_key, bearer, basic, oauth2 or aws_sigv4"

// Credentials implements dataplane.Injector over a Vault and Bindings: for a
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
type Credentials struct {
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
	// Logf receives credential.refreshed and credential.refresh_failed
	// lines, which never hold secret bytes. Nil discards them.
	Logf func(format string, args ...any)
	// OnEvent receives the same events for the audit trail and metrics:
	// "credential.refreshed" or "credential.refresh_failed" with the
	// credential's name (never a value). Nil means none.
	OnEvent func(event audit.EventName, details map[string]string)

	mu      sync.Mutex
	sources map[string]*oauthSource // by credential name
}

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
// place, and every form of it an upstream could echo is returned. Every
// failure (no binding, no vault entry, an entry of a kind the spec cannot
// use, a target outside op's hosts, a failed OAuth refresh) wraps
// dataplane.ErrCredentialUnavailable, names the connector and the fix, and
// never contains secret bytes. Failures before the credential is written
// leave out untouched; if inject.Apply itself fails, out may be partly
// modified and must not be sent (the data plane refuses the request).
func (c *Credentials) Inject(ctx context.Context, _ *dataplane.Session, op *policy.Operation, out *http.Request) ([]string, error) {
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
	secret, err := c.secretFor(ctx, op, cred)
	if err != nil {
		return nil, err
	}
	echoes, err := inject.Apply(out, placementFor(op.Spec.Credential, b), secret, c.now())
	if err != nil {
		return nil, failure(err, secretValues(cred), "%s: putting credential %s on the request failed", opLabel(op), cred.Name)
	}
	return echoes, nil
}

// lookup finds op's binding and its vault entry, and checks the entry's
// kind against the spec's.
func (c *Credentials) lookup(op *policy.Operation) (Binding, Credential, error) {
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
	if errors.Is(err, ErrNotFound) {
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
func (c *Credentials) secretFor(ctx context.Context, op *policy.Operation, cred Credential) (inject.Secret, error) {
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
		tok, err := c.source(cred).AccessToken(ctx)
		if tok == "" || err != nil && !errors.Is(err, inject.ErrPersistFailed) {
			return inject.Secret{}, failure(err, secretValues(cred), "%s: getting an OAuth access token for credential %s failed "+
				"(check its token endpoint and refresh token; `aileron credential set %s --kind oauth2` stores new ones)",
				opLabel(op), cred.Name, cred.Name)
		}
		return inject.Secret{Kind: inject.KindBearer, Token: tok}, nil
	}
	return cred.Secret, nil
}

// source returns the token source of the oauth2 entry cred, creating it on
// first use and again after the entry was rotated.
func (c *Credentials) source(cred Credential) *inject.OAuthSource {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sources[cred.Name]; e != nil && e.rev.Equal(cred.UpdatedAt) {
		return e.src
	}
	if c.sources == nil {
		c.sources = map[string]*oauthSource{}
	}
	name, rev, m, secrets := cred.Name, cred.UpdatedAt, cred.OAuth, secretValues(cred)
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	src := &inject.OAuthSource{
		Config: inject.OAuthConfig{TokenURL: m.TokenURL, ClientID: m.ClientID, ClientSecret: m.ClientSecret,
			Scopes: slices.Clone(m.Scopes)},
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
			switch {
			case ok && err != nil:
				c.logf("credential.refreshed credential=%s warning=%q", name, redact(err.Error(), secrets))
			case ok:
				c.logf("credential.refreshed credential=%s", name)
			case err != nil:
				c.logf("credential.refresh_failed credential=%s error=%q", name, redact(err.Error(), secrets))
			default:
				c.logf("credential.refresh_failed credential=%s", name)
			}
		},
	}
	c.sources[name] = &oauthSource{rev: rev, src: src}
	return src
}

// Placeholders maps the Env variable of every binding that has one to the
// placeholder value of its credential for the session sessionID. The
// sandbox gets these instead of real keys; the proxy puts the real
// credential on matched operations. Nil when there are none or no
// PlaceholderKey is set.
func (c *Credentials) Placeholders(sessionID string) map[string]string {
	if c.Bindings == nil || len(c.PlaceholderKey) == 0 {
		return nil
	}
	var out map[string]string
	for _, b := range c.Bindings.List() {
		if b.Env == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[b.Env] = inject.Placeholder(c.PlaceholderKey, sessionID, b.Credential)
	}
	return out
}

// now returns the injector clock's time.
func (c *Credentials) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// logf writes to Logf if set.
func (c *Credentials) logf(format string, args ...any) {
	if c.Logf != nil {
		c.Logf(format, args...)
	}
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
		for _, s := range []error{inject.ErrRefreshFailed, inject.ErrBadSecret, ErrNotOpen, context.Canceled, context.DeadlineExceeded} {
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

// secretFieldsFor lists the inject.Secret fields a kind requires and those
// it may use; ok is false for an unknown kind.
func secretFieldsFor(kind string) (required, optional []string, ok bool) {
	switch kind {
	case inject.KindAPIKey, inject.KindBearer:
		return []string{"token"}, nil, true
	case inject.KindBasic:
		return []string{"username", "password"}, nil, true
	case inject.KindSigV4:
		return []string{"access_key_id", "secret_access_key", "service"}, []string{"session_token"}, true
	case inject.KindOAuth2:
		return nil, nil, true
	}
	return nil, nil, false
}

// secretField is one named inject.Secret field.
type secretField struct{ name, value string }

// secretFields lists s's fields by name.
func secretFields(s inject.Secret) []secretField {
	return []secretField{{"token", s.Token}, {"username", s.Username}, {"password", s.Password},
		{"access_key_id", s.AccessKeyID}, {"secret_access_key", s.SecretAccessKey},
		{"session_token", s.SessionToken}, {"service", s.Service}}
}

// validateCredential checks c as Set stores it, setting c.Secret.Kind when
// empty. Failures wrap ErrInvalidArgument and never contain secret bytes.
func validateCredential(c *Credential) error {
	if err := checkCredentialName(c.Name); err != nil {
		return err
	}
	required, optional, ok := secretFieldsFor(c.Kind)
	if !ok {
		return fmt.Errorf("%w: credential %s: unknown kind %q; use %s", ErrInvalidArgument, c.Name, c.Kind, credentialKinds)
	}
	if c.Secret.Kind == "" {
		c.Secret.Kind = c.Kind
	}
	if c.Secret.Kind != c.Kind {
		return fmt.Errorf("%w: credential %s: secret kind %q differs from credential kind %q", ErrInvalidArgument, c.Name, c.Secret.Kind, c.Kind)
	}
	for _, f := range secretFields(c.Secret) {
		switch {
		case slices.Contains(required, f.name) || slices.Contains(optional, f.name) && f.value != "":
			if err := inject.CheckValue(f.name, f.value); err != nil {
				return fmt.Errorf("%w: credential %s: %w", ErrInvalidArgument, c.Name, err)
			}
		case f.value != "":
			return fmt.Errorf("%w: credential %s: kind %s does not use %s; remove it", ErrInvalidArgument, c.Name, c.Kind, f.name)
		}
	}
	switch {
	case c.Kind == inject.KindBasic && strings.IndexByte(c.Secret.Username, ':') >= 0:
		return fmt.Errorf("%w: credential %s: a basic-auth user name cannot contain ':'", ErrInvalidArgument, c.Name)
	case c.Kind == inject.KindSigV4 && !inject.ValidService(c.Secret.Service):
		return fmt.Errorf("%w: credential %s: AWS service %q must be lower-case letters, digits and dashes, e.g. s3 or execute-api",
			ErrInvalidArgument, c.Name, c.Secret.Service)
	case c.Kind == inject.KindOAuth2:
		return validateOAuth("credential "+c.Name, c.OAuth, true)
	case c.OAuth != nil:
		return fmt.Errorf("%w: credential %s: only oauth2 credentials carry OAuth material", ErrInvalidArgument, c.Name)
	}
	return nil
}

// validateOAuth checks an oauth2 entry's material (where names it in
// messages); loopbackHTTP allows an http token URL on a loopback host. Failures wrap ErrInvalidArgument.
func validateOAuth(where string, m *OAuthMaterial, loopbackHTTP bool) error {
	if m == nil {
		return fmt.Errorf("%w: %s: oauth2 needs token_url, client_id and refresh_token", ErrInvalidArgument, where)
	}
	if err := checkTokenURL(m.TokenURL, loopbackHTTP); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, where, err)
	}
	fields := []secretField{{"client_id", m.ClientID}, {"refresh_token", m.RefreshToken},
		{"client_secret", m.ClientSecret}, {"access_token", m.AccessToken}}
	for i, f := range fields {
		if i >= 2 && f.value == "" {
			continue // optional
		}
		if err := inject.CheckValue(f.name, f.value); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrInvalidArgument, where, err)
		}
	}
	for _, s := range m.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\x00\"\\") {
			return fmt.Errorf("%w: %s: scope %q must be one non-empty word without spaces, quotes or backslashes",
				ErrInvalidArgument, where, s)
		}
	}
	return nil
}

// checkTokenURL requires an absolute https URL (or, with loopbackHTTP, an
// http URL on a loopback host) without user information or fragment. The
// error does not quote the URL.
func checkTokenURL(raw string, loopbackHTTP bool) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return errors.New("token_url is required")
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("token_url is not an absolute URL; write it like https://auth.example.com/oauth/token")
	case u.User != nil:
		return errors.New("token_url must not carry user information; put the client's credentials in client_id and client_secret")
	case u.Fragment != "" || strings.ContainsAny(raw, " \t\r\n\x00"):
		return errors.New("token_url must not carry a fragment, spaces or control characters")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopbackHTTP && isLoopbackHost(u.Hostname()):
		return nil
	}
	return errors.New("token_url must be an https URL")
}

// isLoopbackHost reports whether h is localhost or a loopback IP.
func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ParseSecretInput turns what `aileron credential set` read from stdin or
// --from-file into a secret of kind:
//
//   - api_key, bearer: the input is the token (one trailing newline is
//     trimmed; any other line break, a NUL or a control character is refused);
//   - basic: the input is the password; username (--username) is required;
//   - aws_sigv4: the input is JSON {"access_key_id", "secret_access_key",
//     "session_token"?}; service (--service) is required;
//   - oauth2: the input is JSON {"token_url", "client_id", "client_secret"?,
//     "scopes"?, "refresh_token", "access_token"?, "expiry"?} with an https
//     token_url, scopes a list (or one space-separated string) and expiry an
//     RFC 3339 time; the secret is then empty but for its Kind.
//
// Every failure wraps ErrInvalidArgument, says how to fix the input, and
// never contains input bytes.
func ParseSecretInput(kind string, input []byte, username, service string) (inject.Secret, *OAuthMaterial, error) {
	if _, _, ok := secretFieldsFor(kind); !ok {
		return inject.Secret{}, nil, fmt.Errorf("%w: unknown credential kind %q; use %s", ErrInvalidArgument, kind, credentialKinds)
	}
	if username != "" && kind != inject.KindBasic {
		return inject.Secret{}, nil, fmt.Errorf("%w: --username applies only to kind basic, not %s", ErrInvalidArgument, kind)
	}
	if service != "" && kind != inject.KindSigV4 {
		return inject.Secret{}, nil, fmt.Errorf("%w: --service applies only to kind aws_sigv4, not %s", ErrInvalidArgument, kind)
	}
	switch kind {
	case inject.KindAPIKey, inject.KindBearer:
		tok, err := singleLine("the secret", input)
		if err == nil && strings.TrimSpace(tok) != tok {
			err = fmt.Errorf("%w: the secret starts or ends with white space, which HTTP cannot carry; remove it", ErrInvalidArgument)
		}
		return inject.Secret{Kind: kind, Token: tok}, nil, err
	case inject.KindBasic:
		return parseBasicInput(input, username)
	case inject.KindSigV4:
		return parseSigV4Input(input, service)
	}
	m, err := parseOAuthInput(input)
	return inject.Secret{Kind: inject.KindOAuth2}, m, err
}

// singleLine returns input as one line: one trailing LF or CRLF trimmed,
// refusing an empty value and any other line break, NUL or control
// character (tab excepted).
func singleLine(what string, input []byte) (string, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(string(input), "\n"), "\r")
	switch {
	case s == "":
		return "", fmt.Errorf("%w: %s is empty; pipe it on stdin or pass --from-file", ErrInvalidArgument, what)
	case strings.ContainsAny(s, "\r\n"):
		return "", fmt.Errorf("%w: the secret contains a line break; %s must be a single line "+
			"(e.g. printf '%%s' \"$TOKEN\" | aileron credential set NAME --kind KIND)", ErrInvalidArgument, what)
	case strings.IndexByte(s, 0) >= 0:
		return "", fmt.Errorf("%w: the secret contains a NUL byte; check that %s is the text value, not a binary file", ErrInvalidArgument, what)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return "", fmt.Errorf("%w: the secret contains a control character; %s must be printable text", ErrInvalidArgument, what)
		}
	}
	return s, nil
}

// parseBasicInput reads a basic-auth password for username.
func parseBasicInput(input []byte, username string) (inject.Secret, *OAuthMaterial, error) {
	if username == "" {
		return inject.Secret{}, nil, fmt.Errorf("%w: kind basic needs --username; the password comes on stdin", ErrInvalidArgument)
	}
	if strings.IndexByte(username, ':') >= 0 || strings.ContainsAny(username, "\r\n\x00") {
		return inject.Secret{}, nil, fmt.Errorf("%w: --username cannot contain ':', a line break or NUL", ErrInvalidArgument)
	}
	pw, err := singleLine("the password", input)
	if err != nil {
		return inject.Secret{}, nil, err
	}
	return inject.Secret{Kind: inject.KindBasic, Username: username, Password: pw}, nil, nil
}

// parseSigV4Input reads AWS keys as JSON, signing for service.
func parseSigV4Input(input []byte, service string) (inject.Secret, *OAuthMaterial, error) {
	const shape = `{"access_key_id":"…","secret_access_key":"…","session_token":"…" (optional)}`
	if !inject.ValidService(service) {
		return inject.Secret{}, nil, fmt.Errorf("%w: kind aws_sigv4 needs --service, the AWS service signed for "+
			"(lower-case, e.g. s3 or execute-api)", ErrInvalidArgument)
	}
	obj, err := jsonObject(input, inject.KindSigV4, shape, "access_key_id", "secret_access_key", "session_token")
	if err != nil {
		return inject.Secret{}, nil, err
	}
	s := inject.Secret{Kind: inject.KindSigV4, Service: service}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"access_key_id", &s.AccessKeyID, true}, {"secret_access_key", &s.SecretAccessKey, true}, {"session_token", &s.SessionToken, false}} {
		if *f.dst, err = obj.str(f.name, f.required); err != nil {
			return inject.Secret{}, nil, err
		}
	}
	return s, nil, nil
}

// parseOAuthInput reads oauth2 material as JSON.
func parseOAuthInput(input []byte) (*OAuthMaterial, error) {
	const shape = `{"token_url":"https://…","client_id":"…","client_secret":"…","scopes":["…"],` +
		`"refresh_token":"…","access_token":"…","expiry":"2026-01-02T15:04:05Z"} (client_secret, scopes, access_token, expiry optional)`
	obj, err := jsonObject(input, inject.KindOAuth2, shape,
		"token_url", "client_id", "client_secret", "scopes", "refresh_token", "access_token", "expiry")
	if err != nil {
		return nil, err
	}
	m := &OAuthMaterial{}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"token_url", &m.TokenURL, true}, {"client_id", &m.ClientID, true}, {"client_secret", &m.ClientSecret, false},
		{"refresh_token", &m.RefreshToken, true}, {"access_token", &m.AccessToken, false}} {
		if *f.dst, err = obj.str(f.name, f.required); err != nil {
			return nil, err
		}
	}
	if m.Scopes, err = obj.scopes(); err != nil {
		return nil, err
	}
	exp, err := obj.str("expiry", false)
	if err != nil {
		return nil, err
	}
	if exp != "" {
		t, perr := time.Parse(time.RFC3339, exp)
		if perr != nil {
			return nil, fmt.Errorf("%w: oauth2 input: expiry must be an RFC 3339 time like 2026-01-02T15:04:05Z", ErrInvalidArgument)
		}
		m.Expiry = t.UTC()
	}
	if err := validateOAuth("oauth2 input", m, false); err != nil {
		return nil, err
	}
	return m, nil
}

// secretJSON is a JSON secret input decoded one level deep.
type secretJSON struct {
	kind   string
	fields map[string]json.RawMessage
}

// jsonObject decodes input as exactly one JSON object whose keys are all in
// allowed. Errors describe the expected shape and never quote input bytes
// (an unknown key is named only when it is a plain lower-case word).
func jsonObject(input []byte, kind, shape string, allowed ...string) (secretJSON, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: kind %s reads a JSON object %s; %s", ErrInvalidArgument, kind, shape, why)
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return secretJSON{}, bad(fmt.Sprintf("the input is not valid JSON (at byte %d)", se.Offset))
		case errors.Is(err, io.EOF):
			return secretJSON{}, bad("the input is empty")
		case errors.Is(err, io.ErrUnexpectedEOF):
			return secretJSON{}, bad("the input ends in the middle of the JSON value")
		}
		return secretJSON{}, bad("the input is not a JSON object")
	}
	if fields == nil {
		return secretJSON{}, bad("the input is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return secretJSON{}, bad("the input holds more than one JSON value")
	}
	keys := slices.Sorted(maps.Keys(fields))
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			name := "a field"
			if isPlainKey(k) {
				name = fmt.Sprintf("field %q", k)
			}
			return secretJSON{}, bad(fmt.Sprintf("%s is not one of %s", name, strings.Join(allowed, ", ")))
		}
	}
	return secretJSON{kind: kind, fields: fields}, nil
}

// str returns the string field name; absent or null is "" (an error when
// required). A value that is not a string, or holds CR, LF or NUL, is an
// error.
func (o secretJSON) str(name string, required bool) (string, error) {
	raw, ok := o.fields[name]
	var s string
	if ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: %s input: field %s must be a JSON string", ErrInvalidArgument, o.kind, name)
		}
	}
	switch {
	case s == "" && required:
		return "", fmt.Errorf("%w: %s input: field %s is required", ErrInvalidArgument, o.kind, name)
	case strings.ContainsAny(s, "\r\n\x00"):
		return "", fmt.Errorf("%w: %s input: field %s contains a line break or NUL", ErrInvalidArgument, o.kind, name)
	}
	return s, nil
}

// scopes returns the scopes field: a list of strings or one space-separated
// string; absent or null is nil.
func (o secretJSON) scopes() ([]string, error) {
	raw, ok := o.fields["scopes"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return strings.Fields(one), nil
	}
	return nil, fmt.Errorf("%w: %s input: field scopes must be a list of strings", ErrInvalidArgument, o.kind)
}

// isPlainKey reports whether k is 1 to 32 lower-case letters and '_'.
func isPlainKey(k string) bool {
	if k == "" || len(k) > 32 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}
