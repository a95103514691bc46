package admin

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/store"
)

const (
	loginSecret   = "app-CLIENTsecret-0123456789"
	loginRedirect = "http://127.0.0.1:40411/callback"
)

// loginProvider is a token endpoint that redeems each code it was told
// of once, for the PKCE challenge and redirect it was issued with. With
// postOnly it refuses HTTP Basic and takes the client from the body
// (client_secret_post), as some providers do.
type loginProvider struct {
	*httptest.Server
	mu       sync.Mutex
	codes    map[string]string // code → S256 challenge
	issued   int
	postOnly bool
}

func newLoginProvider(t *testing.T) *loginProvider {
	p := &loginProvider{codes: map[string]string{}}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		id, secret, basic := r.BasicAuth()
		if p.postOnly {
			if basic {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":"invalid_client"}`)
				return
			}
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		code := r.PostFormValue("code")
		challenge, ok := p.codes[code]
		delete(p.codes, code)
		if !ok || challenge != oauth2.S256ChallengeFromVerifier(r.PostFormValue("code_verifier")) ||
			id != "app-1" || secret != loginSecret || r.PostFormValue("redirect_uri") != loginRedirect {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		p.issued++
		fmt.Fprintf(w, `{"access_token":"ACCESS-%d-0123456789","token_type":"Bearer","expires_in":3600,"refresh_token":"REFRESH-%d-0123456789"}`,
			p.issued, p.issued)
	}))
	t.Cleanup(p.Close)
	return p
}

// code issues a code for verifier.
func (p *loginProvider) code(verifier string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := fmt.Sprintf("CODE-%d-0123456789", len(p.codes)+p.issued+1)
	p.codes[c] = oauth2.S256ChallengeFromVerifier(verifier)
	return c
}

// loginDaemon is an admin API with a store, vault and bindings whose
// token client trusts p; the gmail connector is installed with a manifest
// naming p as its OAuth app, the linear one without a manifest.
func loginDaemon(t *testing.T, p *loginProvider) (*Client, *API, *[]string) {
	t.Helper()
	return loginDaemonWith(t, p, "")
}

// loginDaemonWith is loginDaemon with extra lines in the gmail manifest's
// oauth2 table.
func loginDaemonWith(t *testing.T, p *loginProvider, extra string) (*Client, *API, *[]string) {
	t.Helper()
	home := t.TempDir()
	db := testkit.OpenDB(t, filepath.Join(home, "aileron.db"))
	v := &credentials.Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key")}
	b := &credentials.Bindings{DB: db}
	if err := v.Open(); err != nil {
		t.Fatal(err)
	}
	if err := b.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	events := &[]string{}
	a := &API{Store: &store.Store{Dir: filepath.Join(home, "store"), DB: db}, Vault: v, Bindings: b,
		Credentials: &credentials.Injector{Vault: v, Bindings: b, HTTPClient: p.Client()},
		OnEvent: func(name audit.EventName, d map[string]string) {
			mu.Lock()
			defer mu.Unlock()
			*events = append(*events, fmt.Sprintf("%s %v", name, d))
		}}
	sock := filepath.Join(home, "admin.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.Handler()}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	c := &Client{Socket: sock}

	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, "aileron.connector.v1.json", testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, "manifest.toml", []byte(`[connector]
name = "`+testkit.GoogleFQN+`"
version = "1.2.3"
[capabilities.network]
hosts = ["gmail.googleapis.com:443"]
[capabilities.credential]
kind = "oauth2"
[capabilities.credential.oauth2]
authorize_url = "https://accounts.example.com/o/oauth2/auth?access_type=offline"
token_url = "`+p.URL+`/token"
client_id = "app-1"
client_secret = "`+loginSecret+`"
scopes = ["mail.read", "mail.send"]
`+extra))
	for _, path := range []string{pkg, testkit.WriteFile(t, t.TempDir(), "linear.json", testkit.Spec(t, "linear"))} {
		if _, err := installYes(t.Context(), c, InstallRequest{Path: path}); err != nil {
			t.Fatal(err)
		}
	}
	return c, a, events
}

// The login's app is the manifest's, without its secret; the login stores
// the token set the code redeems and binds it, and logging in again
// rotates the entry and keeps the binding's placement.
func TestAdminLogin(t *testing.T) {
	p := newLoginProvider(t)
	c, a, events := loginDaemon(t, p)
	ctx := t.Context()

	app, err := c.LoginApp(ctx, testkit.GoogleFQN, "gmail")
	if err != nil {
		t.Fatal(err)
	}
	if app.AuthorizeURL != "https://accounts.example.com/o/oauth2/auth?access_type=offline" || app.ClientID != "app-1" ||
		app.Version != "1.2.3" || strings.Join(app.Scopes, " ") != "mail.read mail.send" {
		t.Fatalf("LoginApp = %+v", app)
	}

	login := func(name string) (LoginResult, error) {
		verifier := oauth2.GenerateVerifier()
		return c.Login(ctx, LoginRequest{Name: name, Connector: testkit.GoogleFQN, Code: p.code(verifier),
			CodeVerifier: verifier, RedirectURI: loginRedirect})
	}
	res, err := login("gmail")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := a.Vault.Get("gmail")
	if err != nil || stored.OAuth.AccessToken != "ACCESS-1-0123456789" || stored.OAuth.RefreshToken != "REFRESH-1-0123456789" ||
		stored.OAuth.ClientSecret != loginSecret || stored.OAuth.TokenURL != p.URL+"/token" || res.Credential.Name != "gmail" || res.Credential.Expiry == nil {
		t.Fatalf("after the login the vault holds %v (%v); answer %+v", stored, err, res)
	}
	if b, ok := a.Bindings.Get(testkit.GoogleFQN); !ok || b.Credential != "gmail" {
		t.Fatalf("binding = %+v, %v; want gmail", b, ok)
	}

	// Logging in again rotates the entry; the binding keeps its placement.
	if _, err := c.Bind(ctx, credentials.Binding{Connector: testkit.GoogleFQN, Credential: "gmail", Env: "GMAIL_TOKEN"}); err != nil {
		t.Fatal(err)
	}
	if _, err := login("gmail"); err != nil {
		t.Fatal(err)
	}
	rotated, _ := a.Vault.Get("gmail")
	if rotated.OAuth.RefreshToken != "REFRESH-2-0123456789" || !rotated.UpdatedAt.After(stored.UpdatedAt) {
		t.Fatalf("a second login did not rotate the entry")
	}
	if b, _ := a.Bindings.Get(testkit.GoogleFQN); b.Env != "GMAIL_TOKEN" {
		t.Fatalf("the second login dropped the binding's env: %+v", b)
	}
	got := strings.Join(*events, "\n")
	if strings.Count(got, "credential.set map[connector:"+testkit.GoogleFQN+" credential:gmail kind:oauth2 via:login]") != 2 ||
		strings.Count(got, "binding.set") != 3 {
		t.Errorf("events:\n%s\nwant credential.set via login and binding.set, twice", got)
	}
	for _, s := range []string{loginSecret, "ACCESS-", "REFRESH-", "CODE-"} {
		if strings.Contains(got, s) {
			t.Errorf("an event holds a secret (%s…)", s)
		}
	}

}

// A manifest that names client_secret_post logs in at a provider that
// refuses HTTP Basic, and the entry records the method, so each refresh
// authenticates the same way; a second login keeps it.
func TestAdminLoginClientSecretPost(t *testing.T) {
	p := newLoginProvider(t)
	p.postOnly = true
	c, a, _ := loginDaemonWith(t, p, "token_endpoint_auth_method = \"client_secret_post\"\n")
	for i := 1; i <= 2; i++ {
		verifier := oauth2.GenerateVerifier()
		if _, err := c.Login(t.Context(), LoginRequest{Name: "gmail", Connector: testkit.GoogleFQN, Code: p.code(verifier),
			CodeVerifier: verifier, RedirectURI: loginRedirect}); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
		stored, err := a.Vault.Get("gmail")
		if err != nil {
			t.Fatal(err)
		}
		if fresh := stored.OAuth.RefreshToken == fmt.Sprintf("REFRESH-%d-0123456789", i); !fresh || stored.OAuth.AuthMethod != inject.AuthMethodPost {
			t.Fatalf("after login %d the entry holds this login's refresh token: %v, token_endpoint_auth_method %q; want client_secret_post",
				i, fresh, stored.OAuth.AuthMethod)
		}
	}
}

// A login is refused for a connector without an oauth2 table, one not
// installed, a code the provider refuses and a bad credential name (before
// the browser leaves and before the code is spent); none stores anything.
func TestAdminLoginRefusals(t *testing.T) {
	p := newLoginProvider(t)
	c, a, _ := loginDaemon(t, p)
	ctx := t.Context()
	verifier := oauth2.GenerateVerifier()
	for _, tc := range []struct {
		name, fqn, code string
		status          int
		says            string
	}{
		{"no oauth2 table", testkit.LinearFQN, "CODE-x-0123456789", 400, "no [capabilities.credential.oauth2] table"},
		{"another kind", testkit.LinearFQN, "CODE-x-0123456789", 400, "it uses api_key: store the secret with `aileron credential set NAME --kind api_key`"},
		{"not installed", "github://acme/nothing", "CODE-x-0123456789", 404, "not installed"},
		{"a version", testkit.GoogleFQN + "@1.2.3", "CODE-x-0123456789", 400, `names a version (1.2.3); give the FQN alone (` + testkit.GoogleFQN + ")"},
		{"refused code", testkit.GoogleFQN, "CODE-unknown-0123456789", 400, "refused the authorization code with HTTP 400 (invalid_grant)"},
	} {
		_, err := c.Login(ctx, LoginRequest{Name: "other", Connector: tc.fqn, Code: tc.code, CodeVerifier: verifier, RedirectURI: loginRedirect})
		ae := apiError(t, tc.name, err, tc.status, map[int]policy.Reason{400: policy.ReasonInvalidArgument, 404: policy.ReasonNotFound}[tc.status])
		if !strings.Contains(ae.Message, tc.says) || strings.Contains(ae.Message, tc.code) {
			t.Errorf("%s: message %q; want it to say %q and not quote the code", tc.name, ae.Message, tc.says)
		}
	}
	if _, err := a.Vault.Get("other"); err == nil {
		t.Error("a refused login stored a credential")
	}

	// A name the vault would refuse is refused before the browser is sent
	// anywhere, and before a code is spent.
	if _, err := c.LoginApp(ctx, testkit.GoogleFQN, "bad name"); err == nil || !strings.Contains(err.Error(), "credential name") {
		t.Errorf("LoginApp with a bad name = %v; want it refused", err)
	}
	good := oauth2.GenerateVerifier()
	code := p.code(good)
	_, err := c.Login(ctx, LoginRequest{Name: "bad name", Connector: testkit.GoogleFQN, Code: code, CodeVerifier: good, RedirectURI: loginRedirect})
	apiError(t, "bad name", err, 400, policy.ReasonInvalidArgument)
	p.mu.Lock()
	_, unspent := p.codes[code]
	p.mu.Unlock()
	if !unspent {
		t.Error("a login refused for its name spent its code")
	}

	// A name holding another kind of credential is refused the same way:
	// the login would replace that key with a token set.
	if err := a.Vault.Set(credentials.Credential{Name: "linear", Kind: policy.CredentialAPIKey, Secret: inject.Secret{Kind: policy.CredentialAPIKey, Token: "lin-key"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoginApp(ctx, testkit.GoogleFQN, "linear"); err == nil ||
		!strings.Contains(err.Error(), "credential linear is of kind api_key, and a login would replace it") {
		t.Errorf("LoginApp into an api_key entry = %v; want it refused", err)
	}
	_, err = c.Login(ctx, LoginRequest{Name: "linear", Connector: testkit.GoogleFQN, Code: code, CodeVerifier: good, RedirectURI: loginRedirect})
	apiError(t, "an api_key entry", err, 409, policy.ReasonConflict)
	if got, err := a.Vault.Get("linear"); err != nil || got.Kind != policy.CredentialAPIKey {
		t.Errorf("the api_key entry after a refused login: %+v, %v", got.Kind, err)
	}
	p.mu.Lock()
	_, unspent = p.codes[code]
	p.mu.Unlock()
	if !unspent {
		t.Error("a login refused for its name's kind spent its code")
	}
}
