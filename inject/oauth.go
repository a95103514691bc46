package inject

import (
	"context"
	"errors"
	"fmt"
	"github.com/aileronhq/aileron/policy"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// OAuth defaults.
const (
	// DefaultSkew is how long before expiry a token is refreshed.
	DefaultSkew = 60 * time.Second
	// RefreshTimeout bounds one call to the token endpoint. The refresh is
	// shared by every waiting caller, so it runs detached from any one
	// caller's context.
	RefreshTimeout = 30 * time.Second
	backoffStart   = time.Second
	backoffCap     = 5 * time.Minute
)

// How a client authenticates at the token endpoint (OAuthConfig.AuthMethod),
// named as in RFC 7591's token_endpoint_auth_method and providers' metadata.
const (
	// AuthMethodBasic sends the client id and secret as HTTP Basic
	// credentials, which every provider must accept (RFC 6749 2.3.1).
	AuthMethodBasic = "client_secret_basic"
	// AuthMethodPost sends client_id and client_secret in the request body,
	// for providers that refuse Basic.
	AuthMethodPost = "client_secret_post"
	// AuthMethodNone sends only client_id in the body: a public client.
	AuthMethodNone = "none"
)

// OAuthConfig is the client side of an OAuth2 refresh-token grant. Scopes
// are kept for the record: golang.org/x/oauth2's refresh grant does not send
// them, so a refreshed token keeps the scope originally granted.
type OAuthConfig struct {
	TokenURL     string   `json:"token_url"`
	ClientID     string   `json:"client_id"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// AuthMethod is how the client authenticates: one of the AuthMethod
	// constants; empty means AuthMethodBasic with a client secret and
	// AuthMethodNone without one. It is never guessed by trying another
	// way after a failure: that would present the refresh token twice.
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
}

// AuthStyle is the x/oauth2 style of c's AuthMethod, or an error wrapping
// ErrBadSecret (see CheckAuthMethod).
func (c OAuthConfig) AuthStyle() (oauth2.AuthStyle, error) {
	if err := CheckAuthMethod(c.AuthMethod, c.ClientSecret); err != nil {
		return oauth2.AuthStyleAutoDetect, err
	}
	if c.Method() == AuthMethodBasic {
		return oauth2.AuthStyleInHeader, nil
	}
	return oauth2.AuthStyleInParams, nil
}

// Method is the AuthMethod in effect: AuthMethod, or its default.
func (c OAuthConfig) Method() string {
	switch {
	case c.AuthMethod != "":
		return c.AuthMethod
	case c.ClientSecret != "":
		return AuthMethodBasic
	}
	return AuthMethodNone
}

// CheckAuthMethod checks a token_endpoint_auth_method against whether the
// client has a secret: the secret methods need one, none refuses one. The
// error wraps ErrBadSecret and never quotes the secret.
func CheckAuthMethod(method, clientSecret string) error {
	switch method {
	case "":
		return nil
	case AuthMethodBasic, AuthMethodPost:
		if clientSecret == "" {
			return fmt.Errorf("%w: token_endpoint_auth_method %s needs a client_secret; add it, or use %s for a public client",
				ErrBadSecret, method, AuthMethodNone)
		}
		return nil
	case AuthMethodNone:
		if clientSecret != "" {
			return fmt.Errorf("%w: token_endpoint_auth_method none is for a client without a client_secret; remove the secret or use %s or %s",
				ErrBadSecret, AuthMethodBasic, AuthMethodPost)
		}
		return nil
	}
	if !policy.IsToken(method) || len(method) > 64 {
		method = "(unprintable)"
	}
	return fmt.Errorf("%w: token_endpoint_auth_method %s is not supported; use %s, %s or %s (or leave it out)",
		ErrBadSecret, method, AuthMethodBasic, AuthMethodPost, AuthMethodNone)
}

// OAuthToken is an OAuth2 token as stored in the vault. A zero Expiry means
// the access token does not expire.
type OAuthToken struct {
	AccessToken  string    `json:"access_token,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

// OAuthSource yields a valid access token for one credential, refreshing it
// with the refresh-token grant (golang.org/x/oauth2) when it is missing or
// within Skew of expiry. Concurrent callers share one refresh. A refreshed
// token (with the server's new refresh token if it rotated it, else the old
// one) becomes Token and is passed to Persist.
//
// A failed refresh starts a backoff window (Backoff) during which callers
// fail fast without contacting the token endpoint, so a broken endpoint or a
// revoked grant causes no retry storm. While the current access token has
// not actually expired (it is only inside the Skew margin) it keeps being
// returned despite a failed refresh or a running backoff.
//
// Set the fields before first use and do not change them afterwards; after
// first use, read the current token only through AccessToken. An
// OAuthSource must not be copied after first use. It is safe for concurrent
// use.
type OAuthSource struct {
	Config OAuthConfig
	// Token is the current token, as loaded from the vault.
	Token OAuthToken
	// Persist is called with every refreshed token; nil means not persisted.
	Persist func(OAuthToken) error
	// HTTPClient reaches the token endpoint; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Skew: refresh this long before expiry; 0 means DefaultSkew, negative
	// means only once expired.
	Skew time.Duration
	// Backoff is how long to wait after the n-th consecutive failure (n ≥ 1);
	// nil means 1s doubling per failure, capped at 5 min.
	Backoff func(failures int) time.Duration
	// OnRefresh reports every refresh attempt for audit and logs: ok with a
	// nil error, ok with an ErrPersistFailed error, or a failure wrapping
	// ErrRefreshFailed. It runs on the refreshing goroutine; nil means none.
	OnRefresh func(ok bool, err error)
	// Coordinate, when set, runs before each refresh: it takes a lock the
	// other holders of this credential share (the other nodes of a fleet)
	// and returns the token as stored now, and the function that releases
	// the lock, which is held until the new token is persisted. When the
	// stored token is fresh (another holder refreshed meanwhile) it is used
	// and no grant is made; otherwise the grant starts from its refresh
	// token, so that a rotated refresh token is never used twice. A failure
	// to coordinate fails the refresh (ErrRefreshFailed). Nil: no one else
	// refreshes this credential.
	Coordinate func(ctx context.Context) (OAuthToken, func(), error)

	mu       sync.Mutex
	flight   *refreshFlight
	failures int
	retryAt  time.Time
	lastErr  error
}

// refreshFlight is one refresh in progress, shared by its waiters.
type refreshFlight struct {
	done  chan struct{}
	token string // the new access token; "" on failure
	err   error  // ErrRefreshFailed or ErrPersistFailed, or nil
}

// AccessToken returns an access token valid for at least Skew, refreshing it
// first if needed.
//
// Failures wrap ErrRefreshFailed (no refresh token, the refresh failed, or a
// backoff window is running), or are ctx's error if ctx ends while waiting.
// When the refresh succeeded but Persist failed, it returns the new token
// together with an error wrapping ErrPersistFailed: the token is good and is
// used by later calls, but the vault still holds the old one. Errors never
// contain token or secret values.
func (s *OAuthSource) AccessToken(ctx context.Context) (string, error) {
	s.mu.Lock()
	now := s.now()
	if s.fresh(now) {
		tok := s.Token.AccessToken
		s.mu.Unlock()
		return tok, nil
	}
	if now.Before(s.retryAt) {
		defer s.mu.Unlock()
		if s.usable(now) {
			return s.Token.AccessToken, nil
		}
		return "", fmt.Errorf("%w: not retrying for %s after %d consecutive failure(s); last: %v",
			ErrRefreshFailed, s.retryAt.Sub(now).Round(time.Millisecond), s.failures, s.lastErr)
	}
	if s.Token.RefreshToken == "" {
		defer s.mu.Unlock()
		if s.usable(now) {
			return s.Token.AccessToken, nil
		}
		return "", fmt.Errorf("%w: the access token is missing or expired and there is no refresh token; re-authorize the credential", ErrRefreshFailed)
	}
	f := s.flight
	if f == nil {
		f = &refreshFlight{done: make(chan struct{})}
		s.flight = f
		go s.refresh(context.WithoutCancel(ctx), f, s.Token)
	}
	s.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.token != "" {
		return f.token, f.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usable(s.now()) {
		return s.Token.AccessToken, nil
	}
	return "", f.err
}

// refresh runs one refresh grant for the flight f, started from old.
func (s *OAuthSource) refresh(ctx context.Context, f *refreshFlight, old OAuthToken) {
	defer close(f.done)
	ctx, cancel := context.WithTimeout(ctx, RefreshTimeout)
	defer cancel()
	if s.Coordinate != nil {
		latest, unlock, err := s.Coordinate(ctx)
		if err != nil {
			s.failed(f, fmt.Errorf("%w: could not coordinate the refresh with the other nodes: %v", ErrRefreshFailed, err))
			return
		}
		defer unlock() // after Persist below
		if s.freshToken(latest, s.now()) {
			s.mu.Lock()
			s.Token = latest
			s.failures, s.retryAt, s.lastErr = 0, time.Time{}, nil
			s.flight = nil
			s.mu.Unlock()
			f.token = latest.AccessToken
			return
		}
		if latest.RefreshToken != "" {
			old = latest
		}
	}
	tok, err := s.grant(ctx, old)
	if err != nil {
		s.failed(f, err)
		return
	}
	s.mu.Lock()
	s.Token = tok
	s.failures, s.retryAt, s.lastErr = 0, time.Time{}, nil
	s.mu.Unlock()
	if s.Persist != nil {
		if perr := s.Persist(tok); perr != nil {
			f.err = fmt.Errorf("%w: the token was refreshed and is in use, but saving it failed (%v); after a restart the old refresh token may no longer work",
				ErrPersistFailed, NewRedactor(tok.AccessToken, tok.RefreshToken, s.Config.ClientSecret).String(perr.Error()))
		}
	}
	f.token = tok.AccessToken
	s.mu.Lock()
	s.flight = nil // after Persist: refreshes and their persists never overlap
	s.mu.Unlock()
	s.report(true, f.err)
}

// failed records a failed refresh of flight f and starts the backoff.
func (s *OAuthSource) failed(f *refreshFlight, err error) {
	s.mu.Lock()
	s.failures++
	s.retryAt = s.now().Add(s.backoff(s.failures))
	s.lastErr = err
	s.flight = nil
	s.mu.Unlock()
	f.err = err
	s.report(false, err)
}

// grant performs the refresh-token grant: one request, in the style the
// config names, so the refresh token is presented once. Failures wrap
// ErrRefreshFailed and carry no secret: the server's error description is
// dropped.
func (s *OAuthSource) grant(ctx context.Context, old OAuthToken) (OAuthToken, error) {
	style, err := s.Config.AuthStyle()
	if err != nil {
		return OAuthToken{}, fmt.Errorf("%w: %v", ErrRefreshFailed, err)
	}
	cfg := &oauth2.Config{ClientID: s.Config.ClientID, ClientSecret: s.Config.ClientSecret,
		Endpoint: oauth2.Endpoint{TokenURL: s.Config.TokenURL, AuthStyle: style}, Scopes: s.Config.Scopes}
	client := s.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, client)
	t, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: old.RefreshToken}).Token()
	if err != nil {
		return OAuthToken{}, s.refreshError(err, old)
	}
	if err := CheckValue("access token", t.AccessToken); err != nil || !validFieldValue(t.AccessToken) {
		return OAuthToken{}, fmt.Errorf("%w: token endpoint %s returned an empty or malformed access token", ErrRefreshFailed, s.endpoint())
	}
	nt := OAuthToken{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, TokenType: t.TokenType, Expiry: t.Expiry}
	if nt.RefreshToken == "" {
		nt.RefreshToken = old.RefreshToken
	}
	return nt, nil
}

// refreshError describes a failed grant without any secret: for an OAuth
// error response only the status and the error code are kept (the body and
// description are server text that could echo what was sent).
func (s *OAuthSource) refreshError(err error, old OAuthToken) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "token endpoint " + s.endpoint() + " refused the refresh"
		if re.Response != nil {
			msg += fmt.Sprintf(" with HTTP %d", re.Response.StatusCode)
		}
		if policy.IsToken(re.ErrorCode) && len(re.ErrorCode) <= 64 {
			msg += " (" + re.ErrorCode + ")"
		}
		switch {
		case re.ErrorCode == "invalid_grant":
			msg += "; the refresh token was revoked or expired, re-authorize the credential"
		case re.ErrorCode == "invalid_client" || re.Response != nil && re.Response.StatusCode == http.StatusUnauthorized:
			msg += "; the client was not accepted with token_endpoint_auth_method " + s.Config.Method() +
				": check the client id and secret, or set the method the provider documents in the credential"
		}
		return fmt.Errorf("%w: %s", ErrRefreshFailed, msg)
	}
	red := NewRedactor(old.AccessToken, old.RefreshToken, s.Config.ClientSecret)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: token endpoint %s did not answer within %s: %w", ErrRefreshFailed, s.endpoint(), RefreshTimeout, context.DeadlineExceeded)
	}
	return fmt.Errorf("%w: reaching token endpoint %s: %s", ErrRefreshFailed, s.endpoint(), red.String(err.Error()))
}

// endpoint names the token endpoint in errors: scheme, host and path, never
// userinfo or query.
func (s *OAuthSource) endpoint() string {
	u, err := url.Parse(s.Config.TokenURL)
	if err != nil || u.Host == "" {
		return "(malformed token_url)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

func (s *OAuthSource) report(ok bool, err error) {
	if s.OnRefresh != nil {
		s.OnRefresh(ok, err)
	}
}

// fresh reports whether the current access token is valid beyond the skew.
func (s *OAuthSource) fresh(now time.Time) bool { return s.freshToken(s.Token, now) }

// freshToken reports whether t is valid for at least Skew after now.
func (s *OAuthSource) freshToken(t OAuthToken, now time.Time) bool {
	return t.AccessToken != "" && (t.Expiry.IsZero() || now.Add(s.skew()).Before(t.Expiry))
}

// usable reports whether the current access token has not expired yet.
func (s *OAuthSource) usable(now time.Time) bool {
	t := s.Token
	return t.AccessToken != "" && (t.Expiry.IsZero() || now.Before(t.Expiry))
}

func (s *OAuthSource) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *OAuthSource) skew() time.Duration {
	switch {
	case s.Skew == 0:
		return DefaultSkew
	case s.Skew < 0:
		return 0
	}
	return s.Skew
}

func (s *OAuthSource) backoff(failures int) time.Duration {
	if s.Backoff != nil {
		return s.Backoff(failures)
	}
	d := backoffStart
	for i := 1; i < failures && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
}
