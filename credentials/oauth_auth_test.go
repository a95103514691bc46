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
