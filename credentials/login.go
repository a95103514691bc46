package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// ErrExchangeFailed is wrapped when the token endpoint refused a login's
// code, could not be reached, or answered with no usable token set.
var ErrExchangeFailed = errors.New("OAuth login failed")

// OAuthApp is a publisher's OAuth app, as a connector's manifest declares
// it in [capabilities.credential.oauth2]. ClientSecret is the app's public
// client secret (empty for a public client). AuthMethod is its
// token_endpoint_auth_method (inject.AuthMethod*), empty for the default.
type OAuthApp struct {
	AuthorizeURL string
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	AuthMethod   string
}

// String names the app without its client secret.
func (a OAuthApp) String() string {
	return fmt.Sprintf("OAuthApp{TokenURL: %s, ClientID: %s, secret redacted}", a.TokenURL, a.ClientID)
}

// GoString is String, for %#v.
func (a OAuthApp) GoString() string { return a.String() }

// CodeGrant is what the login's browser leg brought back: the
// authorization code, the PKCE code verifier whose S256 challenge the
// authorize request carried, and the loopback redirect URI it named. None
// of it is ever written to disk or logged.
type CodeGrant struct {
	Code        string
	Verifier    string
	RedirectURI string
}

// ExchangeCode redeems g at app's token endpoint (the authorization code
// grant with PKCE, RFC 7636) through hc, and returns the material of an
// oauth2 vault entry: the app's endpoint, client and scopes with the tokens
// issued. hc nil means http.DefaultClient; the daemon passes the client its
// OAuth refreshes use (SSRF guard, verified TLS, no redirects).
//
// Failures wrap state.ErrInvalidArgument (a token URL that is not https, a
// redirect URI that is not http://127.0.0.1:PORT/callback, a code or a
// verifier of the wrong form) or ErrExchangeFailed (the endpoint
// refused or could not be reached, or answered without an access token).
// They keep only the endpoint, the HTTP status and the OAuth error code:
// never the code, the verifier, a token or the server's description.
func ExchangeCode(ctx context.Context, hc *http.Client, app OAuthApp, g CodeGrant) (*OAuthMaterial, error) {
	if err := checkTokenURL(app.TokenURL, false); err != nil {
		return nil, fmt.Errorf("%w: the OAuth app's %s", state.ErrInvalidArgument, err)
	}
	if err := checkCodeGrant(g); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	// One request per code: x/oauth2's auto-detection would send the code a
	// second time after any failure, and a provider revokes what a reused
	// code issued. The style is the refresh's rule (inject.OAuthConfig): the
	// app's AuthMethod, or by default HTTP Basic for a client with a secret,
	// which every provider must accept (RFC 6749 2.3.1), and the body for a
	// public client. The entry records the app's AuthMethod, so each refresh
	// authenticates the way the login did.
	auth := inject.OAuthConfig{ClientSecret: app.ClientSecret, AuthMethod: app.AuthMethod}
	style, err := auth.AuthStyle()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", state.ErrInvalidArgument, err)
	}
	cfg := &oauth2.Config{ClientID: app.ClientID, ClientSecret: app.ClientSecret, RedirectURL: g.RedirectURI,
		Endpoint: oauth2.Endpoint{AuthURL: app.AuthorizeURL, TokenURL: app.TokenURL, AuthStyle: style}, Scopes: app.Scopes}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), g.Code, oauth2.VerifierOption(g.Verifier))
	if err != nil {
		return nil, exchangeError(err, app.TokenURL, auth.Method(), []string{g.Code, g.Verifier, app.ClientSecret})
	}
	m := &OAuthMaterial{TokenURL: app.TokenURL, ClientID: app.ClientID, ClientSecret: app.ClientSecret,
		Scopes: slices.Clone(app.Scopes), AuthMethod: app.AuthMethod, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry.UTC().Round(0)}
	if err := validateOAuth("the token endpoint's answer", m, false); err != nil {
		return nil, fmt.Errorf("%w: token endpoint %s answered with a token set that cannot be stored: %v",
			ErrExchangeFailed, endpointName(app.TokenURL), err)
	}
	return m, nil
}

// checkCodeGrant checks the form of g. Errors never quote its values.
func checkCodeGrant(g CodeGrant) error {
	if err := inject.CheckValue("authorization code", g.Code); err != nil {
		return fmt.Errorf("%w: %w", state.ErrInvalidArgument, err)
	}
	if !validVerifier(g.Verifier) {
		return fmt.Errorf("%w: the PKCE code verifier must be 43 to 128 of A-Z a-z 0-9 - . _ ~ (RFC 7636)", state.ErrInvalidArgument)
	}
	if !LoopbackRedirect(g.RedirectURI) {
		return fmt.Errorf("%w: the redirect URI must be http://127.0.0.1:PORT/callback, the login's loopback listener", state.ErrInvalidArgument)
	}
	return nil
}

// LoopbackRedirect reports whether uri is the redirect a login listens on:
// exactly http://127.0.0.1:PORT/callback with a port from 1 to 65535.
func LoopbackRedirect(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || u.User != nil || u.Path != "/callback" || u.RawQuery != "" || u.Fragment != "" ||
		u.RawPath != "" || strings.Contains(uri, "#") {
		return false
	}
	ap, err := netip.ParseAddrPort(u.Host)
	return err == nil && ap.Addr() == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && ap.Port() != 0 &&
		u.Host == ap.String()
}

// validVerifier reports whether v is a PKCE code verifier: 43 to 128
// unreserved characters.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return false
		}
	}
	return true
}

// exchangeError describes a failed code exchange without any secret: for
// an OAuth error answer only the status and the error code are kept.
func exchangeError(err error, tokenURL, method string, secrets []string) error {
	msg := "token endpoint " + endpointName(tokenURL)
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		msg += " refused the authorization code"
		if re.Response != nil {
			msg += " with HTTP " + strconv.Itoa(re.Response.StatusCode)
		}
		if policy.IsToken(re.ErrorCode) && len(re.ErrorCode) <= 64 {
			msg += " (" + re.ErrorCode + ")"
		}
		if re.ErrorCode == "invalid_client" || re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized {
			msg += "; the client was not accepted with token_endpoint_auth_method " + method +
				": the connector's manifest ([capabilities.credential.oauth2]) must name the client and the method the provider documents"
		} else {
			msg += "; run the login again (a code is good for one exchange, within minutes)"
		}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s did not answer in time: %w", ErrExchangeFailed, msg, context.DeadlineExceeded)
	case strings.Contains(err.Error(), "missing access_token"):
		msg += " answered without an access_token"
	default:
		msg += ": " + redact(err.Error(), secrets)
	}
	return fmt.Errorf("%w: %s", ErrExchangeFailed, msg)
}

// endpointName names a token endpoint in messages: scheme, host and path.
func endpointName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(malformed token_url)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
