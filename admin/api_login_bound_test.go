package admin

import (
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
)

// A login never writes one connector's token set into a credential bound
// to another: that connector would carry the tokens of the app logged in
// with to its own hosts. It is refused before the browser leaves and
// before the code is spent, and the other connector's entry is untouched.
func TestAdminLoginRefusesACredentialBoundElsewhere(t *testing.T) {
	p := newLoginProvider(t)
	c, a, _ := loginDaemon(t, p)
	ctx := t.Context()
	if err := a.Vault.Set(credentials.Credential{Name: "shared", Kind: policy.CredentialOAuth2, OAuth: &credentials.OAuthMaterial{
		TokenURL: "https://auth.linear.example/token", ClientID: "linear-app", RefreshToken: "LINEAR-REFRESH"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bind(ctx, credentials.Binding{Connector: testkit.LinearFQN, Credential: "shared"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.LoginApp(ctx, testkit.GoogleFQN, "shared")
	ae := apiError(t, "LoginApp", err, 409, policy.ReasonConflict)
	if !strings.Contains(ae.Message, testkit.LinearFQN) {
		t.Errorf("LoginApp message %q does not name the connector the credential is bound to", ae.Message)
	}
	verifier := oauth2.GenerateVerifier()
	code := p.code(verifier)
	_, err = c.Login(ctx, LoginRequest{Name: "shared", Connector: testkit.GoogleFQN, Code: code, CodeVerifier: verifier, RedirectURI: loginRedirect})
	apiError(t, "Login", err, 409, policy.ReasonConflict)
	p.mu.Lock()
	_, unspent := p.codes[code]
	p.mu.Unlock()
	if !unspent {
		t.Error("a login refused for its credential spent its code")
	}
	if got, err := a.Vault.Get("shared"); err != nil || got.OAuth.RefreshToken != "LINEAR-REFRESH" {
		t.Errorf("the other connector's credential was replaced: %v", err)
	}
	if b, _ := a.Bindings.Get(testkit.GoogleFQN); b.Credential == "shared" {
		t.Errorf("the credential was bound to the login's connector too: %+v", b)
	}
}
