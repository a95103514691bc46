package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

const (
	loginCode     = "CODE-authorization-0123456789"
	loginRedirect = "http://127.0.0.1:43117/callback"
)

// codeProvider is a token endpoint that redeems one authorization code,
// once, for the client, redirect URI and PKCE challenge it was issued
// for, like a real provider; answer, when set, replaces its token answer.
type codeProvider struct {
	*httptest.Server
	challenge string
	secret    string // the client secret it expects; "" for a public client
	answer    string
	calls     atomic.Int32
	redeemed  atomic.Int32
}

func newCodeProvider(t *testing.T, verifier string) *codeProvider {
	p := &codeProvider{challenge: oauth2.S256ChallengeFromVerifier(verifier), secret: oauthClientSec}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		id, secret, _ := r.BasicAuth()
		if id == "" {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		ok := r.PostFormValue("grant_type") == "authorization_code" && r.PostFormValue("code") == loginCode &&
			oauth2.S256ChallengeFromVerifier(r.PostFormValue("code_verifier")) == p.challenge &&
			r.PostFormValue("redirect_uri") == loginRedirect && id == "app-1" && secret == p.secret
		if !ok || p.redeemed.Add(1) > 1 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"code %s with verifier %s is not valid"}`,
				r.PostFormValue("code"), r.PostFormValue("code_verifier"))
			return
		}
		if p.answer != "" {
			fmt.Fprint(w, p.answer)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, oauthAccess, oauthRefresh)
	}))
	t.Cleanup(p.Close)
	return p
}

// The code exchange sends the verifier, client and redirect the provider
// checks, and returns the token set as an oauth2 entry's material.
func TestExchangeCode(t *testing.T) {
	verifier := oauth2.GenerateVerifier()
	app := func(p *codeProvider) OAuthApp {
		return OAuthApp{AuthorizeURL: "https://auth.example.com/authorize", TokenURL: p.URL + "/token", ClientID: "app-1",
			ClientSecret: oauthClientSec, Scopes: []string{"mail.read"}}
	}
	grant := CodeGrant{Code: loginCode, Verifier: verifier, RedirectURI: loginRedirect}

	p := newCodeProvider(t, verifier)
	m, err := ExchangeCode(t.Context(), p.Client(), app(p), grant)
	if err != nil {
		t.Fatal(err)
	}
	if m.TokenURL != p.URL+"/token" || m.ClientID != "app-1" || m.ClientSecret != oauthClientSec || m.AccessToken != oauthAccess ||
		m.RefreshToken != oauthRefresh || len(m.Scopes) != 1 || m.Expiry.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("material = %+v; want the app's endpoint, client and scopes with the issued tokens", *m)
	}

	// A public client (no secret) names itself in the body.
	p = newCodeProvider(t, verifier)
	p.secret = ""
	public := app(p)
	public.ClientSecret = ""
	if m, err := ExchangeCode(t.Context(), p.Client(), public, grant); err != nil || m.ClientSecret != "" || p.calls.Load() != 1 {
		t.Fatalf("public client: %v, %d calls; want one exchange", err, p.calls.Load())
	}

	// A provider that issues no refresh token: the access token alone is
	// stored, and serves until it expires.
	p = newCodeProvider(t, verifier)
	p.answer = `{"access_token":"` + oauthAccess + `","token_type":"Bearer"}`
	m, err = ExchangeCode(t.Context(), p.Client(), app(p), grant)
	if err != nil || m.RefreshToken != "" || m.AccessToken != oauthAccess {
		t.Fatalf("no refresh token: %v; want the access token alone", err)
	}
	if err := vaultAt(t, t.TempDir(), testkit.NewClock()).Set(Credential{Name: "gh", Kind: inject.KindOAuth2, OAuth: m}); err != nil {
		t.Fatalf("storing a token set without a refresh token: %v", err)
	}

}

// Each refusal of the exchange is clear and quotes neither the code nor
// the verifier; the provider is reached only when the input is sound.
func TestExchangeCodeRefusals(t *testing.T) {
	verifier := oauth2.GenerateVerifier()
	app := func(p *codeProvider) OAuthApp {
		return OAuthApp{AuthorizeURL: "https://auth.example.com/authorize", TokenURL: p.URL + "/token", ClientID: "app-1",
			ClientSecret: oauthClientSec, Scopes: []string{"mail.read"}}
	}
	grant := CodeGrant{Code: loginCode, Verifier: verifier, RedirectURI: loginRedirect}
	for _, tc := range []struct {
		name    string
		answer  string
		mutate  func(*OAuthApp, *CodeGrant)
		sentry  error
		says    string
		reaches bool
	}{
		{name: "wrong verifier", mutate: func(_ *OAuthApp, g *CodeGrant) { g.Verifier = oauth2.GenerateVerifier() },
			sentry: ErrExchangeFailed, says: "HTTP 400 (invalid_grant)", reaches: true},
		{name: "wrong client", mutate: func(a *OAuthApp, _ *CodeGrant) { a.ClientID = "app-2" },
			sentry: ErrExchangeFailed, says: "invalid_grant", reaches: true},
		{name: "no access token", answer: `{"token_type":"Bearer","refresh_token":"r-0123456789"}`,
			sentry: ErrExchangeFailed, says: "without an access_token", reaches: true},
		{name: "access token with a line break", answer: `{"access_token":"a\r\nX-Evil: 1","token_type":"Bearer"}`,
			sentry: ErrExchangeFailed, says: "cannot be stored", reaches: true},
		{name: "http token url", mutate: func(a *OAuthApp, _ *CodeGrant) { a.TokenURL = "http://auth.example.com/token" },
			sentry: state.ErrInvalidArgument, says: "token_url must be an https URL"},
		{name: "redirect elsewhere", mutate: func(_ *OAuthApp, g *CodeGrant) { g.RedirectURI = "https://evil.example.com/callback" },
			sentry: state.ErrInvalidArgument, says: "http://127.0.0.1:PORT/callback"},
		{name: "redirect to localhost", mutate: func(_ *OAuthApp, g *CodeGrant) { g.RedirectURI = "http://localhost:43117/callback" },
			sentry: state.ErrInvalidArgument, says: "http://127.0.0.1:PORT/callback"},
		{name: "short verifier", mutate: func(_ *OAuthApp, g *CodeGrant) { g.Verifier = "abc" },
			sentry: state.ErrInvalidArgument, says: "43 to 128"},
		{name: "no code", mutate: func(_ *OAuthApp, g *CodeGrant) { g.Code = "" },
			sentry: state.ErrInvalidArgument, says: "authorization code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCodeProvider(t, verifier)
			p.answer = tc.answer
			a, g := app(p), grant
			if tc.mutate != nil {
				tc.mutate(&a, &g)
			}
			m, err := ExchangeCode(t.Context(), p.Client(), a, g)
			if !errors.Is(err, tc.sentry) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ExchangeCode = %v, %v; want %v saying %q", m, err, tc.sentry, tc.says)
			}
			for _, s := range []string{loginCode, g.Verifier, oauthClientSec, "r-0123456789"} {
				if s != "" && strings.Contains(err.Error(), s) {
					t.Errorf("the error quotes a secret (%.6s…): %v", s, err)
				}
			}
			if got := p.calls.Load(); got != map[bool]int32{true: 1}[tc.reaches] {
				t.Errorf("the provider was called %d times; want %d", got, map[bool]int32{true: 1}[tc.reaches])
			}
		})
	}
}

// A request that read the entry before a rotation never builds a second
// source for the rotated entry's token set, nor one again for the entry it
// replaced: it gets the newest source.
func TestRotationNeverRebuildsAReplacedSource(t *testing.T) {
	clock := testkit.NewClock()
	c := &Injector{Vault: vaultAt(t, t.TempDir(), clock)}
	setAll(t, c.Vault, sampleCredentials("https://oauth2.example.com/token")[4:])
	old, err := c.Vault.Get("google_mail")
	if err != nil {
		t.Fatal(err)
	}
	first := c.source(old)
	rotated := sampleCredentials("https://oauth2.example.com/token")[4]
	rotated.OAuth.RefreshToken = "rotated-REFRESH-0123456789"
	setAll(t, c.Vault, []Credential{rotated})
	cur, _ := c.Vault.Get("google_mail")
	newest := c.source(cur)
	if newest == first {
		t.Fatal("the rotated entry kept the replaced entry's source")
	}
	if got := c.source(old); got != newest {
		t.Fatal("a request holding the entry from before the rotation built a source for the replaced token set")
	}
	if got := c.source(cur); got != newest {
		t.Fatal("the rotated entry got a second source: two sources would refresh with one refresh token")
	}

	// An entry deleted and stored again is a new entry, even when the
	// clock that stamps it went back (another node of a fleet).
	if err := c.Vault.Delete("google_mail"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(-time.Hour)
	again := sampleCredentials("https://oauth2.example.com/token")[4]
	again.OAuth.RefreshToken = "again-REFRESH-0123456789"
	setAll(t, c.Vault, []Credential{again})
	cur, _ = c.Vault.Get("google_mail")
	if got := c.source(cur); got == newest {
		t.Fatal("an entry stored again after a deletion kept the deleted entry's source")
	}
}

// chainProvider is a token endpoint that rotates refresh tokens and, like
// providers with reuse detection, revokes a whole chain when one of its
// refresh tokens is used twice.
type chainProvider struct {
	*httptest.Server
	mu      sync.Mutex
	tokens  map[string]*chainToken // by refresh token
	revoked map[string]bool        // by chain
	grants  atomic.Int32
	reuses  atomic.Int32
}

// chainToken is one refresh token the provider issued.
type chainToken struct {
	chain string
	used  bool
}

func newChainProvider(t *testing.T) *chainProvider {
	p := &chainProvider{tokens: map[string]*chainToken{}, revoked: map[string]bool{}}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		tok := p.tokens[r.PostFormValue("refresh_token")]
		if tok != nil && tok.used {
			p.reuses.Add(1)
			p.revoked[tok.chain] = true
		}
		if tok == nil || tok.used || p.revoked[tok.chain] {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		tok.used = true
		n := p.grants.Add(1)
		next := fmt.Sprintf("%s.refresh-%04d-0123456789", tok.chain, n)
		p.tokens[next] = &chainToken{chain: tok.chain}
		fmt.Fprintf(w, `{"access_token":"%s.access-%04d-0123456789","token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, tok.chain, n, next)
	}))
	t.Cleanup(p.Close)
	return p
}

// chain starts a chain and returns its first refresh token.
func (p *chainProvider) chain(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	rt := name + ".refresh-first-0123456789"
	p.tokens[rt] = &chainToken{chain: name}
	return rt
}

// Many requests need a refresh while the entry is rotated (a login) again
// and again: the provider never sees a refresh token used twice, and every
// request carries a token of a live chain.
func TestRotationDuringConcurrentRefreshes(t *testing.T) {
	p := newChainProvider(t)
	entry := func(chain string) Credential {
		c := sampleCredentials(p.URL + "/token")[4]
		c.OAuth.AccessToken, c.OAuth.RefreshToken, c.OAuth.Expiry = "", p.chain(chain), time.Time{}
		return c
	}
	c, _ := injectorAt(t, t.TempDir(), []Credential{entry("chain0")}, Binding{Connector: testkit.LinearFQN, Credential: "google_mail"})
	c.HTTPClient = p.Client()
	op := linearOp(t, "oauth2")
	for round := 1; round <= 5; round++ {
		var wg sync.WaitGroup
		for range 24 {
			wg.Go(func() {
				out := outbound(t, "https://api.linear.app/graphql")
				if _, err := c.Inject(context.Background(), nil, op, out); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Go(func() { setAll(t, c.Vault, []Credential{entry(fmt.Sprintf("chain%d", round))}) })
		wg.Wait()
	}
	if n := p.reuses.Load(); n != 0 {
		t.Fatalf("the provider saw %d refresh tokens used twice (it revokes the chain)", n)
	}
	// The last rotation's chain is the one in use from now on.
	out := outbound(t, "https://api.linear.app/graphql")
	if _, err := c.Inject(context.Background(), nil, op, out); err != nil || !strings.HasPrefix(out.Header.Get("Authorization"), "Bearer chain5.") {
		t.Fatalf("after the last rotation: %v, Authorization %q; want a token of chain5", err, out.Header.Get("Authorization"))
	}
}
