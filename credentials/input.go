package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/state"
)

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
// empty. Failures wrap state.ErrInvalidArgument and never contain secret bytes.
func validateCredential(c *Credential) error {
	if err := checkCredentialName(c.Name); err != nil {
		return err
	}
	required, optional, ok := secretFieldsFor(c.Kind)
	if !ok {
		return fmt.Errorf("%w: credential %s: unknown kind %q; use %s", state.ErrInvalidArgument, c.Name, c.Kind, credentialKinds)
	}
	if c.Secret.Kind == "" {
		c.Secret.Kind = c.Kind
	}
	if c.Secret.Kind != c.Kind {
		return fmt.Errorf("%w: credential %s: secret kind %q differs from credential kind %q", state.ErrInvalidArgument, c.Name, c.Secret.Kind, c.Kind)
	}
	for _, f := range secretFields(c.Secret) {
		switch {
		case slices.Contains(required, f.name) || slices.Contains(optional, f.name) && f.value != "":
			if err := inject.CheckValue(f.name, f.value); err != nil {
				return fmt.Errorf("%w: credential %s: %w", state.ErrInvalidArgument, c.Name, err)
			}
		case f.value != "":
			return fmt.Errorf("%w: credential %s: kind %s does not use %s; remove it", state.ErrInvalidArgument, c.Name, c.Kind, f.name)
		}
	}
	switch {
	case c.Kind == inject.KindBasic && strings.IndexByte(c.Secret.Username, ':') >= 0:
		return fmt.Errorf("%w: credential %s: a basic-auth user name cannot contain ':'", state.ErrInvalidArgument, c.Name)
	case c.Kind == inject.KindSigV4 && !inject.ValidService(c.Secret.Service):
		return fmt.Errorf("%w: credential %s: AWS service %q must be lower-case letters, digits and dashes, e.g. s3 or execute-api",
			state.ErrInvalidArgument, c.Name, c.Secret.Service)
	case c.Kind == inject.KindOAuth2:
		return validateOAuth("credential "+c.Name, c.OAuth, true)
	case c.OAuth != nil:
		return fmt.Errorf("%w: credential %s: only oauth2 credentials carry OAuth material", state.ErrInvalidArgument, c.Name)
	}
	return nil
}

// validateOAuth checks an oauth2 entry's material (where names it in
// messages); loopbackHTTP allows an http token URL on a loopback host. Failures wrap state.ErrInvalidArgument.
func validateOAuth(where string, m *OAuthMaterial, loopbackHTTP bool) error {
	if m == nil {
		return fmt.Errorf("%w: %s: oauth2 needs token_url, client_id and refresh_token", state.ErrInvalidArgument, where)
	}
	if err := checkTokenURL(m.TokenURL, loopbackHTTP); err != nil {
		return fmt.Errorf("%w: %s: %s", state.ErrInvalidArgument, where, err)
	}
	// A token set without a refresh token (a provider that issues none)
	// serves until its access token expires; then `credential login` again.
	if m.RefreshToken == "" && m.AccessToken == "" {
		return fmt.Errorf("%w: %s: oauth2 needs a refresh_token or an access_token", state.ErrInvalidArgument, where)
	}
	fields := []secretField{{"client_id", m.ClientID}, {"refresh_token", m.RefreshToken},
		{"client_secret", m.ClientSecret}, {"access_token", m.AccessToken}}
	for i, f := range fields {
		if i >= 1 && f.value == "" {
			continue // optional
		}
		if err := inject.CheckValue(f.name, f.value); err != nil {
			return fmt.Errorf("%w: %s: %w", state.ErrInvalidArgument, where, err)
		}
	}
	if err := inject.CheckAuthMethod(m.AuthMethod, m.ClientSecret); err != nil {
		return fmt.Errorf("%w: %s: %w", state.ErrInvalidArgument, where, err)
	}
	for _, s := range m.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n\x00\"\\") {
			return fmt.Errorf("%w: %s: scope %q must be one non-empty word without spaces, quotes or backslashes",
				state.ErrInvalidArgument, where, s)
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
// Every failure wraps state.ErrInvalidArgument, says how to fix the input, and
// never contains input bytes.
func ParseSecretInput(kind string, input []byte, username, service string) (inject.Secret, *OAuthMaterial, error) {
	if _, _, ok := secretFieldsFor(kind); !ok {
		return inject.Secret{}, nil, fmt.Errorf("%w: unknown credential kind %q; use %s", state.ErrInvalidArgument, kind, credentialKinds)
	}
	if username != "" && kind != inject.KindBasic {
		return inject.Secret{}, nil, fmt.Errorf("%w: --username applies only to kind basic, not %s", state.ErrInvalidArgument, kind)
	}
	if service != "" && kind != inject.KindSigV4 {
		return inject.Secret{}, nil, fmt.Errorf("%w: --service applies only to kind aws_sigv4, not %s", state.ErrInvalidArgument, kind)
	}
	switch kind {
	case inject.KindAPIKey, inject.KindBearer:
		tok, err := singleLine("the secret", input)
		if err == nil && strings.TrimSpace(tok) != tok {
			err = fmt.Errorf("%w: the secret starts or ends with white space, which HTTP cannot carry; remove it", state.ErrInvalidArgument)
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
		return "", fmt.Errorf("%w: %s is empty; pipe it on stdin or pass --from-file", state.ErrInvalidArgument, what)
	case strings.ContainsAny(s, "\r\n"):
		return "", fmt.Errorf("%w: the secret contains a line break; %s must be a single line "+
			"(e.g. printf '%%s' \"$TOKEN\" | aileron credential set NAME --kind KIND)", state.ErrInvalidArgument, what)
	case strings.IndexByte(s, 0) >= 0:
		return "", fmt.Errorf("%w: the secret contains a NUL byte; check that %s is the text value, not a binary file", state.ErrInvalidArgument, what)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return "", fmt.Errorf("%w: the secret contains a control character; %s must be printable text", state.ErrInvalidArgument, what)
		}
	}
	return s, nil
}

// parseBasicInput reads a basic-auth password for username.
func parseBasicInput(input []byte, username string) (inject.Secret, *OAuthMaterial, error) {
	if username == "" {
		return inject.Secret{}, nil, fmt.Errorf("%w: kind basic needs --username; the password comes on stdin", state.ErrInvalidArgument)
	}
	if strings.IndexByte(username, ':') >= 0 || strings.ContainsAny(username, "\r\n\x00") {
		return inject.Secret{}, nil, fmt.Errorf("%w: --username cannot contain ':', a line break or NUL", state.ErrInvalidArgument)
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
			"(lower-case, e.g. s3 or execute-api)", state.ErrInvalidArgument)
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
		`"refresh_token":"…","access_token":"…","expiry":"2026-01-02T15:04:05Z","token_endpoint_auth_method":"…"}` +
		` (client_secret, scopes, access_token, expiry, token_endpoint_auth_method optional)`
	obj, err := jsonObject(input, inject.KindOAuth2, shape, "token_url", "client_id", "client_secret", "scopes",
		"refresh_token", "access_token", "expiry", "token_endpoint_auth_method")
	if err != nil {
		return nil, err
	}
	m := &OAuthMaterial{}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"token_url", &m.TokenURL, true}, {"client_id", &m.ClientID, true}, {"client_secret", &m.ClientSecret, false},
		{"refresh_token", &m.RefreshToken, true}, {"access_token", &m.AccessToken, false},
		{"token_endpoint_auth_method", &m.AuthMethod, false}} {
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
			return nil, fmt.Errorf("%w: oauth2 input: expiry must be an RFC 3339 time like 2026-01-02T15:04:05Z", state.ErrInvalidArgument)
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
		return fmt.Errorf("%w: kind %s reads a JSON object %s; %s", state.ErrInvalidArgument, kind, shape, why)
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
			return "", fmt.Errorf("%w: %s input: field %s must be a JSON string", state.ErrInvalidArgument, o.kind, name)
		}
	}
	switch {
	case s == "" && required:
		return "", fmt.Errorf("%w: %s input: field %s is required", state.ErrInvalidArgument, o.kind, name)
	case strings.ContainsAny(s, "\r\n\x00"):
		return "", fmt.Errorf("%w: %s input: field %s contains a line break or NUL", state.ErrInvalidArgument, o.kind, name)
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
	return nil, fmt.Errorf("%w: %s input: field scopes must be a list of strings", state.ErrInvalidArgument, o.kind)
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
