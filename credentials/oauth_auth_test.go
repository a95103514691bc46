package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/internal/testkit"
)

// refreshSeen is what a token endpoint saw of one refresh request.
type refreshSeen struct {
	refreshToken, basicUser, basicPass, bodyID, bodySecret string
	basic                                                  bool
}

// A refresh authenticates the client the way the entry says, or by the
// default for an entry that says nothing (every entry stored before the
// choice existed): HTTP Basic with a client secret, client_id in the body
// without one. An endpoint that answers with an error gets the refresh
// token once, never again in another style.
func TestInjectOAuth2ClientAuthMethod(t *testing.T) {
	tests := []struct {
		name, secret, method string
		basic                bool
	}{
		{"stored without a method, with a secret", oauthClientSec, "", true},
		{"stored without a method, public client", "", "", false},
		{"client_secret_post", oauthClientSec, inject.AuthMethodPost, false},
		{"client_secret_basic", oauthClientSec, inject.AuthMethodBasic, true},
		{"none", "", inject.AuthMethodNone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []refreshSeen
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = r.ParseForm()
				s := refreshSeen{refreshToken: r.PostForm.Get("refresh_token"), bodyID: r.PostForm.Get("client_id"), bodySecret: r.PostForm.Get("client_secret")}
				s.basicUser, s.basicPass, s.basic = r.BasicAuth()
				mu.Lock()
				seen = append(seen, s)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":"invalid_request"}`)
			}))
			t.Cleanup(ts.Close)
			cred := sampleCredentials(ts.URL + "/token")[4]
			cred.OAuth.ClientSecret, cred.OAuth.AuthMethod, cred.OAuth.Expiry = tt.secret, tt.method, time.Now().Add(-time.Minute)
			c, _ := injectorAt(t, t.TempDir(), []Credential{cred}, Binding{Connector: testkit.LinearFQN, Credential: "google_mail"})
			c.HTTPClient = ts.Client()
			if _, err := c.Inject(context.Background(), nil, linearOp(t, "oauth2"), outbound(t, "https://api.linear.app/graphql")); !errors.Is(err, inject.ErrRefreshFailed) {
				t.Fatalf("Inject = %v, want ErrRefreshFailed", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 1 || seen[0].refreshToken != oauthRefresh {
				t.Fatalf("the endpoint saw %d refresh requests, want exactly one presenting the refresh token", len(seen))
			}
			s := seen[0]
			wantBasic := refreshSeen{refreshToken: oauthRefresh, basic: true, basicUser: "client-1", basicPass: url.QueryEscape(tt.secret)}
			wantBody := refreshSeen{refreshToken: oauthRefresh, bodyID: "client-1", bodySecret: tt.secret}
			if want := map[bool]refreshSeen{true: wantBasic, false: wantBody}[tt.basic]; s != want {
				t.Errorf("client authenticated as basic=%v (user ok %v, password ok %v), body client_id %q, body secret ok %v; want basic=%v",
					s.basic, s.basicUser == want.basicUser, s.basicPass == want.basicPass, s.bodyID, s.bodySecret == want.bodySecret, tt.basic)
			}
		})
	}
}

func TestVaultRefusesAContradictoryAuthMethod(t *testing.T) {
	tests := []struct{ name, secret, method, says string }{
		{"unknown", oauthClientSec, "private_key_jwt", "private_key_jwt is not supported"},
		{"post without secret", "", inject.AuthMethodPost, "needs a client_secret"},
		{"none with secret", oauthClientSec, inject.AuthMethodNone, "without a client_secret"},
	}
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cred := sampleCredentials("https://auth.example.com/token")[4]
			cred.OAuth.ClientSecret, cred.OAuth.AuthMethod = tt.secret, tt.method
			err := v.Set(cred)
			if err == nil || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "credential google_mail") {
				t.Fatalf("Set = %v, want a refusal naming the credential and saying %q", err, tt.says)
			}
			assertNoSecrets(t, "the error", err.Error())
		})
	}
}

// A login whose app names client_secret_post exchanges its code at a
// provider that refuses HTTP Basic, and the entry it stores refreshes there
// the same way. Without it the refusal names the method the login used.
func TestLoginAuthMethodCarriesToRefresh(t *testing.T) {
	const fresh = "ya29.FRESHaccess-0123456789"
	verifier := oauth2.GenerateVerifier()
	var grants []string
	var mu sync.Mutex
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		grant := r.PostFormValue("grant_type")
		mu.Lock()
		grants = append(grants, grant)
		mu.Unlock()
		if _, _, basic := r.BasicAuth(); basic || r.PostFormValue("client_id") != "app-1" || r.PostFormValue("client_secret") != oauthClientSec {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		switch {
		case grant == "authorization_code" && r.PostFormValue("code") == loginCode &&
			oauth2.S256ChallengeFromVerifier(r.PostFormValue("code_verifier")) == oauth2.S256ChallengeFromVerifier(verifier):
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, oauthAccess, oauthRefresh)
		case grant == "refresh_token" && r.PostFormValue("refresh_token") == oauthRefresh:
			fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, fresh)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
		}
	}))
	t.Cleanup(ts.Close)
	app := OAuthApp{AuthorizeURL: "https://auth.example.com/authorize", TokenURL: ts.URL + "/token", ClientID: "app-1",
		ClientSecret: oauthClientSec}
	grant := CodeGrant{Code: loginCode, Verifier: verifier, RedirectURI: loginRedirect}
	// Without the method the login uses Basic, and the refusal names it.
	if _, err := ExchangeCode(t.Context(), ts.Client(), app, grant); !errors.Is(err, ErrExchangeFailed) ||
		!strings.Contains(err.Error(), "not accepted with token_endpoint_auth_method client_secret_basic") {
		t.Fatalf("ExchangeCode with Basic = %v; want a refusal naming the method", err)
	}
	app.AuthMethod = inject.AuthMethodPost
	m, err := ExchangeCode(t.Context(), ts.Client(), app, grant)
	if err != nil {
		t.Fatal(err)
	}
	if m.AuthMethod != inject.AuthMethodPost {
		t.Fatalf("the login's material records token_endpoint_auth_method %q, want client_secret_post", m.AuthMethod)
	}
	m.AccessToken = "" // force a refresh
	c, _ := injectorAt(t, t.TempDir(), []Credential{{Name: "google_mail", Kind: inject.KindOAuth2, OAuth: m}},
		Binding{Connector: testkit.LinearFQN, Credential: "google_mail"})
	c.HTTPClient = ts.Client()
	out := outbound(t, "https://api.linear.app/graphql")
	if _, err := c.Inject(t.Context(), nil, linearOp(t, "oauth2"), out); err != nil {
		t.Fatalf("Inject = %v; want a refresh with client_secret_post", err)
	}
	if got := out.Header.Get("Authorization"); got != "Bearer "+fresh {
		t.Errorf("Authorization = %q, want the refreshed token", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(grants, " ") != "authorization_code authorization_code refresh_token" {
		t.Errorf("the endpoint saw grants %v, want two exchanges and one refresh", grants)
	}
}
