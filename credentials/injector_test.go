package credentials

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// linearOp compiles the Linear fixture, with the graphql operation's
// credential replaced by cred and its hosts by hosts when non-nil (cred
// "none" removes it), and returns that operation.
func linearOp(tb testing.TB, cred any, hosts ...string) *policy.Operation {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "policy", "testdata", "specs", "linear.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		tb.Fatal(err)
	}
	op := m["tools"].([]any)[0].(map[string]any)["operations"].([]any)[0].(map[string]any)
	switch cred {
	case nil:
	case "none":
		delete(op, "credential")
	default:
		op["credential"] = cred
	}
	if hosts != nil {
		op["hosts"] = hosts
	}
	data, _ = json.Marshal(m)
	spec, err := policy.ParseSpec("linear.json", data)
	if err != nil {
		tb.Fatal(err)
	}
	p, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: strings.Repeat("ab", 32), Origin: "linear.json"}}, nil)
	if len(errs) != 0 {
		tb.Fatal(errs)
	}
	compiled, ok := p.Lookup(testkit.LinearFQN, "linear", "graphql")
	if !ok {
		tb.Fatal("the linear graphql operation did not compile")
	}
	return compiled
}

// injectorAt returns an injector over a fresh vault and bindings in home,
// holding creds and binds.
func injectorAt(t *testing.T, home string, creds []Credential, binds ...Binding) (*Injector, *testkit.Log) {
	t.Helper()
	v := vaultAt(t, home, testkit.NewClock())
	setAll(t, v, creds)
	b := bindingsAt(t, home)
	for _, bd := range binds {
		if err := b.Bind(t.Context(), bd); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testkit.Log{}
	return &Injector{Vault: v, Bindings: b, PlaceholderKey: []byte("0123456789abcdef0123456789abcdef"), Log: logs.Logger()}, logs
}

// outbound returns an outbound request carrying a client-sent Authorization
// and api_key parameter that injection must replace.
func outbound(tb testing.TB, rawURL string) *http.Request {
	tb.Helper()
	r, err := http.NewRequest(http.MethodPost, rawURL, strings.NewReader(`{"query":"{ viewer { id } }"}`))
	if err != nil {
		tb.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer client-sent-junk")
	r.Header.Set("Content-Type", "application/json")
	return r
}

func TestInjectPlacesEachKind(t *testing.T) {
	creds := sampleCredentials("https://oauth2.example.com/token")[:4]
	basicValue := "Basic " + base64.StdEncoding.EncodeToString([]byte("bot@example.com:"+basicPassword))
	tests := []struct {
		name    string
		spec    any // the operation's credential (nil: Linear's raw "{key}" Authorization)
		hosts   []string
		bind    Binding
		url     string
		header  string // header checked
		want    string // its wanted value ("" means absent)
		query   url.Values
		echoing string // a secret that must be among the echoes
	}{
		{name: "api_key raw {key} (Linear)", bind: Binding{Credential: "linear"},
			header: "Authorization", want: apiKeySecret, echoing: apiKeySecret},
		{name: "bearer default", spec: "bearer", bind: Binding{Credential: "github"},
			header: "Authorization", want: "Bearer " + bearerSecret, echoing: bearerSecret},
		{name: "api_key entry for a bearer spec", spec: "bearer", bind: Binding{Credential: "linear"},
			header: "Authorization", want: "Bearer " + apiKeySecret, echoing: apiKeySecret},
		{name: "query placement", spec: map[string]any{"kind": "api_key", "query": "api_key"}, bind: Binding{Credential: "linear"},
			url: "https://api.linear.app/graphql?a=1&api_key=client-junk", header: "Authorization", want: "Bearer client-sent-junk",
			query: url.Values{"a": {"1"}, "api_key": {apiKeySecret}}, echoing: apiKeySecret},
		{name: "binding moves it to a header", spec: map[string]any{"kind": "api_key", "query": "api_key"},
			bind: Binding{Credential: "linear", Header: "X-Api-Key"}, header: "X-Api-Key", want: apiKeySecret, echoing: apiKeySecret},
		{name: "binding moves it to the query", bind: Binding{Credential: "linear", Query: "key"},
			header: "Authorization", want: "Bearer client-sent-junk", query: url.Values{"key": {apiKeySecret}}, echoing: apiKeySecret},
		{name: "moving drops the spec's format", spec: map[string]any{"kind": "bearer", "header": "Authorization", "format": "Bearer {token}"},
			bind: Binding{Credential: "github", Header: "X-Api-Key"}, header: "X-Api-Key", want: bearerSecret, echoing: bearerSecret},
		{name: "moving to the query drops the spec's format", spec: map[string]any{"kind": "bearer", "format": "Bearer {token}"},
			bind: Binding{Credential: "github", Query: "access_token"}, header: "Authorization", want: "Bearer client-sent-junk",
			query: url.Values{"access_token": {bearerSecret}}, echoing: bearerSecret},
		{name: "same header keeps the spec's format", spec: map[string]any{"kind": "bearer", "header": "Authorization", "format": "token {token}"},
			bind: Binding{Credential: "github", Header: "authorization"}, header: "Authorization", want: "token " + bearerSecret, echoing: bearerSecret},
		{name: "binding format", spec: "bearer", bind: Binding{Credential: "github", Format: "token {token}"},
			header: "Authorization", want: "token " + bearerSecret, echoing: bearerSecret},
		{name: "basic", spec: "basic", bind: Binding{Credential: "jira"},
			header: "Authorization", want: basicValue, echoing: basicPassword},
		{name: "aws_sigv4", spec: "aws_sigv4", hosts: []string{"abc123.execute-api.us-east-1.amazonaws.com"}, bind: Binding{Credential: "aws.prod"},
			url: "https://abc123.execute-api.us-east-1.amazonaws.com/graphql", header: "X-Amz-Security-Token", want: awsSession, echoing: awsSecretKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.bind.Connector = testkit.LinearFQN
			c, _ := injectorAt(t, t.TempDir(), creds, tt.bind)
			u := tt.url
			if u == "" {
				u = "https://api.linear.app/graphql"
			}
			out := outbound(t, u)
			echoes, err := c.Inject(context.Background(), &dataplane.Session{ID: "s_1"}, linearOp(t, tt.spec, tt.hosts...), out)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Header.Values(tt.header); tt.want == "" && len(got) != 0 || tt.want != "" && !reflect.DeepEqual(got, []string{tt.want}) {
				t.Errorf("%s = %q, want exactly %q", tt.header, got, tt.want)
			}
			if tt.query != nil && !reflect.DeepEqual(out.URL.Query(), tt.query) {
				t.Errorf("query = %v, want %v", out.URL.Query(), tt.query)
			}
			if !strings.Contains(strings.Join(echoes, "\n"), tt.echoing) {
				t.Errorf("the echoes do not include the secret %.8s…", tt.echoing)
			}
		})
	}
}

func TestInjectSigV4Signs(t *testing.T) {
	c, _ := injectorAt(t, t.TempDir(), sampleCredentials("https://oauth2.example.com/token")[3:4],
		Binding{Connector: testkit.LinearFQN, Credential: "aws.prod"})
	out := outbound(t, "https://abc123.execute-api.us-east-1.amazonaws.com/graphql")
	op := linearOp(t, map[string]any{"kind": "aws_sigv4", "service": "execute-api"}, "abc123.execute-api.us-east-1.amazonaws.com")
	if _, err := c.Inject(context.Background(), nil, op, out); err != nil {
		t.Fatal(err)
	}
	auth := out.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/") || !strings.Contains(auth, "/us-east-1/execute-api/aws4_request") {
		t.Errorf("Authorization = %q, want a SigV4 signature for execute-api in us-east-1", auth)
	}
	for k, vs := range out.Header {
		if strings.Contains(strings.Join(vs, " "), awsSecretKey) {
			t.Errorf("header %s carries the AWS secret key", k)
		}
	}
}

func TestInjectWithoutCredentialLeavesTheRequestAlone(t *testing.T) {
	c, _ := injectorAt(t, t.TempDir(), nil)
	for _, op := range []*policy.Operation{nil, linearOp(t, "none")} {
		out := outbound(t, "https://api.linear.app/graphql")
		before := out.Header.Clone()
		echoes, err := c.Inject(context.Background(), nil, op, out)
		if echoes != nil || err != nil || !reflect.DeepEqual(out.Header, before) {
			t.Errorf("Inject without a declared credential = %v, %v (headers changed: %v)", echoes, err, !reflect.DeepEqual(out.Header, before))
		}
	}
}

func TestInjectFailsClosed(t *testing.T) {
	creds := sampleCredentials("https://oauth2.example.com/token")
	tests := []struct {
		name string
		spec any
		bind *Binding
		url  string
		drop string // vault entry deleted after binding
		nilV bool
		says []string
	}{
		{name: "no binding", says: []string{testkit.LinearFQN, "none is bound", "aileron credential bind " + testkit.LinearFQN + " --credential NAME"}},
		{name: "no vault entry", bind: &Binding{Credential: "linear"}, drop: "linear",
			says: []string{testkit.LinearFQN, `credential linear, which is not in the vault`, "aileron credential set linear --kind api_key", "aileron credential bind"}},
		{name: "basic entry for an api_key spec", bind: &Binding{Credential: "jira"}, says: []string{"needs a api_key credential", "kind basic", "api_key or bearer"}},
		{name: "bearer entry for an oauth2 spec", spec: "oauth2", bind: &Binding{Credential: "github"}, says: []string{"needs a oauth2 credential", "kind bearer"}},
		{name: "api_key entry for a sigv4 spec", spec: "aws_sigv4", bind: &Binding{Credential: "linear"}, says: []string{"kind api_key"}},
		{name: "oauth2 entry for a basic spec", spec: "basic", bind: &Binding{Credential: "google_mail"}, says: []string{"kind oauth2"}},
		{name: "a host outside the operation", bind: &Binding{Credential: "linear"}, url: "https://evil.example.com/graphql",
			says: []string{"evil.example.com", "not one of the operation's hosts"}},
		{name: "no vault configured", nilV: true, says: []string{"no vault"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var binds []Binding
			if tt.bind != nil {
				tt.bind.Connector = testkit.LinearFQN
				binds = append(binds, *tt.bind)
			}
			c, logs := injectorAt(t, t.TempDir(), creds, binds...)
			if tt.drop != "" {
				if err := c.Vault.Delete(tt.drop); err != nil {
					t.Fatal(err)
				}
			}
			if tt.nilV {
				c.Vault = nil
			}
			u := tt.url
			if u == "" {
				u = "https://api.linear.app/graphql"
			}
			out := outbound(t, u)
			beforeH, beforeU := out.Header.Clone(), out.URL.String()
			echoes, err := c.Inject(context.Background(), &dataplane.Session{ID: "s_1"}, linearOp(t, tt.spec), out)
			if !errors.Is(err, dataplane.ErrCredentialUnavailable) || echoes != nil {
				t.Fatalf("Inject = %v, %v; want ErrCredentialUnavailable", echoes, err)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			assertNoSecrets(t, "the error", err.Error())
			assertNoSecrets(t, "the log", logs.String())
			if !reflect.DeepEqual(out.Header, beforeH) || out.URL.String() != beforeU {
				t.Error("a failed Inject changed the request")
			}
		})
	}
}

func TestInjectSeesRotationAtOnce(t *testing.T) {
	c, _ := injectorAt(t, t.TempDir(), sampleCredentials("")[:1], Binding{Connector: testkit.LinearFQN, Credential: "linear"})
	op := linearOp(t, nil)
	for _, tok := range []string{apiKeySecret, "rotated-key-0123456789"} {
		if err := c.Vault.Set(Credential{Name: "linear", Kind: inject.KindAPIKey, Secret: inject.Secret{Token: tok}}); err != nil {
			t.Fatal(err)
		}
		out := outbound(t, "https://api.linear.app/graphql")
		if _, err := c.Inject(context.Background(), nil, op, out); err != nil {
			t.Fatal(err)
		}
		if got := out.Header.Get("Authorization"); got != tok {
			t.Errorf("after rotating, Authorization carries the old key: %v", got != tok)
		}
	}
}

// tokenServer is a plain-HTTP OAuth2 token endpoint answering refresh
// grants for one refresh token at a time.
type tokenServer struct {
	*httptest.Server
	calls   atomic.Int32
	mu      sync.Mutex
	refresh string // the refresh token it accepts
	access  string // the access token it issues
	next    string // the refresh token it issues
	fail    bool
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{refresh: oauthRefresh, access: "fresh-ACCESS-0123456789", next: "fresh-REFRESH-0123456789"}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.calls.Add(1)
		ts.mu.Lock()
		defer ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if ts.fail || r.FormValue("grant_type") != "refresh_token" || r.FormValue("refresh_token") != ts.refresh {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"refresh token %s was revoked"}`, r.FormValue("refresh_token"))
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, ts.access, ts.next)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// expiredOAuth returns the sample oauth2 credential pointing at ts with an
// expired access token.
func expiredOAuth(ts *tokenServer) Credential {
	c := sampleCredentials(ts.URL + "/token")[4]
	c.OAuth.Expiry = time.Now().Add(-time.Minute)
	return c
}

func TestInjectOAuth2RefreshesOnceAndPersists(t *testing.T) {
	ts := newTokenServer(t)
	home := t.TempDir()
	c, logs := injectorAt(t, home, []Credential{expiredOAuth(ts)}, Binding{Connector: testkit.LinearFQN, Credential: "google_mail"})
	c.HTTPClient = ts.Client()
	op := linearOp(t, "oauth2")

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			out := outbound(t, "https://api.linear.app/graphql")
			echoes, err := c.Inject(context.Background(), nil, op, out)
			if err != nil {
				t.Error(err)
				return
			}
			if got := out.Header.Get("Authorization"); got != "Bearer fresh-ACCESS-0123456789" {
				t.Errorf("Authorization = %q, want the refreshed token", got)
			}
			if !strings.Contains(strings.Join(echoes, "\n"), "fresh-ACCESS-0123456789") {
				t.Error("the echoes do not include the access token")
			}
		})
	}
	wg.Wait()
	if n := ts.calls.Load(); n != 1 {
		t.Errorf("the token endpoint was called %d times, want once", n)
	}
	stored, err := vaultAt(t, home, testkit.NewClock()).Get("google_mail")
	if err != nil {
		t.Fatal(err)
	}
	if m := stored.OAuth; m.AccessToken != "fresh-ACCESS-0123456789" || m.RefreshToken != "fresh-REFRESH-0123456789" || !m.Expiry.After(time.Now()) {
		t.Errorf("the refreshed token was not persisted (access %v, refresh %v, expiry %v)",
			m.AccessToken == "fresh-ACCESS-0123456789", m.RefreshToken == "fresh-REFRESH-0123456789", m.Expiry)
	}
	if l := logs.String(); !strings.Contains(l, `"event":"credential.refreshed","credential":"google_mail"`) || strings.Contains(l, "fresh-") {
		t.Errorf("log = %q; want credential.refreshed without token bytes", l)
	}
	assertNoSecrets(t, "the log", logs.String())

	// Rotating the entry replaces its token source: the new refresh token is used.
	ts.mu.Lock()
	ts.refresh, ts.access = "rotated-REFRESH-0123456789", "second-ACCESS-0123456789"
	ts.mu.Unlock()
	rotated := expiredOAuth(ts)
	rotated.OAuth.RefreshToken = "rotated-REFRESH-0123456789"
	if err := c.Vault.Set(rotated); err != nil {
		t.Fatal(err)
	}
	out := outbound(t, "https://api.linear.app/graphql")
	if _, err := c.Inject(context.Background(), nil, op, out); err != nil {
		t.Fatal(err)
	}
	if got := out.Header.Get("Authorization"); got != "Bearer second-ACCESS-0123456789" || ts.calls.Load() != 2 {
		t.Errorf("after rotation: Authorization %q, %d token calls; want the new token from a second call", got, ts.calls.Load())
	}
}

func TestInjectOAuth2RefreshFailure(t *testing.T) {
	ts := newTokenServer(t)
	ts.fail = true
	c, logs := injectorAt(t, t.TempDir(), []Credential{expiredOAuth(ts)}, Binding{Connector: testkit.LinearFQN, Credential: "google_mail"})
	c.HTTPClient = ts.Client()
	out := outbound(t, "https://api.linear.app/graphql")
	before := out.Header.Clone()
	_, err := c.Inject(context.Background(), nil, linearOp(t, "oauth2"), out)
	if !errors.Is(err, dataplane.ErrCredentialUnavailable) || !errors.Is(err, inject.ErrRefreshFailed) {
		t.Fatalf("Inject = %v, want ErrCredentialUnavailable and ErrRefreshFailed", err)
	}
	if !strings.Contains(err.Error(), "aileron credential set google_mail --kind oauth2") {
		t.Errorf("error %q does not say how to fix it", err)
	}
	assertNoSecrets(t, "the error", err.Error())
	if !reflect.DeepEqual(out.Header, before) {
		t.Error("a failed refresh changed the request")
	}
	if l := logs.String(); !strings.Contains(l, `"event":"credential.refresh_failed","credential":"google_mail"`) {
		t.Errorf("log = %q; want credential.refresh_failed", l)
	}
	assertNoSecrets(t, "the log", logs.String())
}

func TestStaleRefreshDoesNotOverwriteARotation(t *testing.T) {
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token")[4:])
	old, _ := v.Get("google_mail")
	rotated := sampleCredentials("https://oauth2.example.com/token")[4]
	rotated.OAuth.RefreshToken = "rotated-REFRESH-0123456789"
	setAll(t, v, []Credential{rotated})
	if err := v.updateOAuthToken("google_mail", inject.OAuthToken{AccessToken: "stale-0123456789", RefreshToken: "stale-r"}, &old.UpdatedAt); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Get("google_mail"); got.OAuth.RefreshToken != "rotated-REFRESH-0123456789" || got.OAuth.AccessToken != oauthAccess {
		t.Error("a refresh from before the rotation overwrote the rotated entry")
	}
}

func TestPlaceholders(t *testing.T) {
	c, _ := injectorAt(t, t.TempDir(), nil,
		Binding{Connector: testkit.LinearFQN, Credential: "linear", Env: "LINEAR_API_KEY"},
		Binding{Connector: testkit.GoogleFQN, Credential: "google_mail"})
	if err := c.Bindings.Bind(t.Context(), Binding{Connector: "hub://aileron/gemini", Credential: "gemini", Env: "GEMINI_API_KEY,GOOGLE_API_KEY"}); err != nil {
		t.Fatal(err)
	}
	got := c.Placeholders("s_one")
	gem := inject.Placeholder(c.PlaceholderKey, "s_one", "gemini")
	want := map[string]string{"LINEAR_API_KEY": inject.Placeholder(c.PlaceholderKey, "s_one", "linear"),
		"GEMINI_API_KEY": gem, "GOOGLE_API_KEY": gem}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Placeholders = %v, want %v", got, want)
	}
	if other := c.Placeholders("s_two"); other["LINEAR_API_KEY"] == got["LINEAR_API_KEY"] {
		t.Error("two sessions got the same placeholder")
	}
	c.PlaceholderKey = nil
	if got := c.Placeholders("s_one"); got != nil {
		t.Errorf("Placeholders without a key = %v, want nil", got)
	}
}

func TestParseSecretInput(t *testing.T) {
	const sigv4JSON = `{"access_key_id":"AKIAEXAMPLE","secret_access_key":"` + awsSecretKey + `","session_token":"` + awsSession + `"}`
	const oauthJSON = `{"token_url":"https://auth.example.com/token","client_id":"cid","client_secret":"` + oauthClientSec +
		`","scopes":["a","b"],"refresh_token":"` + oauthRefresh + `","access_token":"` + oauthAccess + `","expiry":"2026-03-01T13:00:00Z"}`
	tests := []struct {
		name, kind, input, user, service string
		want                             inject.Secret
		oauth                            *OAuthMaterial
		says                             string // error wanted
	}{
		{name: "api_key trims one newline", kind: "api_key", input: apiKeySecret + "\n", want: inject.Secret{Kind: "api_key", Token: apiKeySecret}},
		{name: "bearer trims CRLF", kind: "bearer", input: bearerSecret + "\r\n", want: inject.Secret{Kind: "bearer", Token: bearerSecret}},
		{name: "api_key as is", kind: "api_key", input: apiKeySecret, want: inject.Secret{Kind: "api_key", Token: apiKeySecret}},
		{name: "two trailing newlines", kind: "api_key", input: apiKeySecret + "\n\n", says: "the secret contains a line break"},
		{name: "inner newline", kind: "bearer", input: apiKeySecret + "\nX-Evil: 1", says: "the secret contains a line break"},
		{name: "bare CR", kind: "bearer", input: apiKeySecret + "\rX", says: "the secret contains a line break"},
		{name: "NUL", kind: "api_key", input: apiKeySecret + "\x00", says: "NUL"},
		{name: "escape", kind: "api_key", input: apiKeySecret + "\x1b[0m", says: "control character"},
		{name: "empty", kind: "api_key", input: "\n", says: "empty"},
		{name: "surrounding space", kind: "api_key", input: " " + apiKeySecret, says: "white space"},
		{name: "username for api_key", kind: "api_key", input: apiKeySecret, user: "u", says: "--username applies only to kind basic"},
		{name: "service for bearer", kind: "bearer", input: apiKeySecret, service: "s3", says: "--service applies only"},
		{name: "unknown kind", kind: "hmac", input: apiKeySecret, says: "unknown credential kind"},
		{name: "basic", kind: "basic", input: basicPassword + "\n", user: "bot", want: inject.Secret{Kind: "basic", Username: "bot", Password: basicPassword}},
		{name: "basic without username", kind: "basic", input: basicPassword, says: "needs --username"},
		{name: "basic username with colon", kind: "basic", input: basicPassword, user: "a:b", says: "':'"},
		{name: "basic password with LF", kind: "basic", input: basicPassword + "\nx", user: "bot", says: "the secret contains a line break"},
		{name: "sigv4", kind: "aws_sigv4", input: sigv4JSON, service: "s3", want: inject.Secret{Kind: "aws_sigv4",
			AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: awsSecretKey, SessionToken: awsSession, Service: "s3"}},
		{name: "sigv4 without session token", kind: "aws_sigv4", input: `{"access_key_id":"AKIA","secret_access_key":"` + awsSecretKey + `"}` + "\n",
			service: "execute-api", want: inject.Secret{Kind: "aws_sigv4", AccessKeyID: "AKIA", SecretAccessKey: awsSecretKey, Service: "execute-api"}},
		{name: "sigv4 without service", kind: "aws_sigv4", input: sigv4JSON, says: "needs --service"},
		{name: "sigv4 upper-case service", kind: "aws_sigv4", input: sigv4JSON, service: "S3", says: "needs --service"},
		{name: "sigv4 missing secret key", kind: "aws_sigv4", input: `{"access_key_id":"AKIA"}`, service: "s3", says: "secret_access_key is required"},
		{name: "sigv4 unknown field", kind: "aws_sigv4", input: `{"access_key_id":"AKIA","region":"x"}`, service: "s3", says: `field "region" is not one of`},
		{name: "sigv4 secret-looking key", kind: "aws_sigv4", input: `{"` + awsSecretKey + `":"x"}`, service: "s3", says: "a field is not one of"},
		{name: "sigv4 not json", kind: "aws_sigv4", input: awsSecretKey, service: "s3", says: "not valid JSON (at byte"},
		{name: "sigv4 truncated", kind: "aws_sigv4", input: `{"access_key_id":"` + awsSecretKey, service: "s3", says: "ends in the middle"},
		{name: "sigv4 array", kind: "aws_sigv4", input: `["` + awsSecretKey + `"]`, service: "s3", says: "not a JSON object"},
		{name: "sigv4 two values", kind: "aws_sigv4", input: sigv4JSON + `{}`, service: "s3", says: "more than one JSON value"},
		{name: "sigv4 number", kind: "aws_sigv4", input: `{"access_key_id":1,"secret_access_key":"x"}`, service: "s3", says: "must be a JSON string"},
		{name: "sigv4 value with LF", kind: "aws_sigv4", input: `{"access_key_id":"A","secret_access_key":"` + awsSecretKey + `\n"}`, service: "s3", says: "line break"},
		{name: "oauth2", kind: "oauth2", input: oauthJSON, want: inject.Secret{Kind: "oauth2"}, oauth: &OAuthMaterial{
			TokenURL: "https://auth.example.com/token", ClientID: "cid", ClientSecret: oauthClientSec, Scopes: []string{"a", "b"},
			RefreshToken: oauthRefresh, AccessToken: oauthAccess, Expiry: time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)}},
		{name: "oauth2 minimal, scopes as a string", kind: "oauth2",
			input: `{"token_url":"https://a.example/t","client_id":"c","refresh_token":"` + oauthRefresh + `","scopes":"x y"}`,
			want:  inject.Secret{Kind: "oauth2"}, oauth: &OAuthMaterial{TokenURL: "https://a.example/t", ClientID: "c", RefreshToken: oauthRefresh, Scopes: []string{"x", "y"}}},
		{name: "oauth2 client_secret_post", kind: "oauth2",
			input: `{"token_url":"https://a.example/t","client_id":"c","client_secret":"` + oauthClientSec + `","refresh_token":"` + oauthRefresh +
				`","token_endpoint_auth_method":"client_secret_post"}`,
			want: inject.Secret{Kind: "oauth2"}, oauth: &OAuthMaterial{TokenURL: "https://a.example/t", ClientID: "c", ClientSecret: oauthClientSec,
				RefreshToken: oauthRefresh, AuthMethod: inject.AuthMethodPost}},
		{name: "oauth2 unknown auth method", kind: "oauth2", input: strings.Replace(oauthJSON, `"scopes"`, `"token_endpoint_auth_method":"tls_client_auth","scopes"`, 1),
			says: "token_endpoint_auth_method tls_client_auth is not supported; use client_secret_basic, client_secret_post or none"},
		{name: "oauth2 auth method none with a secret", kind: "oauth2", input: strings.Replace(oauthJSON, `"scopes"`, `"token_endpoint_auth_method":"none","scopes"`, 1),
			says: "remove the secret"},
		{name: "oauth2 http token url", kind: "oauth2", input: strings.Replace(oauthJSON, "https://auth.example.com", "http://127.0.0.1", 1), says: "https"},
		{name: "oauth2 without refresh token", kind: "oauth2", input: `{"token_url":"https://a.example/t","client_id":"c","access_token":"` + oauthAccess + `"}`, says: "refresh_token is required"},
		{name: "oauth2 without client id", kind: "oauth2", input: `{"token_url":"https://a.example/t","refresh_token":"` + oauthRefresh + `"}`, says: "client_id is required"},
		{name: "oauth2 bad expiry", kind: "oauth2", input: strings.Replace(oauthJSON, "2026-03-01T13:00:00Z", "tomorrow", 1), says: "RFC 3339"},
		{name: "oauth2 bad scopes", kind: "oauth2", input: strings.Replace(oauthJSON, `["a","b"]`, `{"a":1}`, 1), says: "scopes must be a list"},
		{name: "oauth2 user info in url", kind: "oauth2", input: strings.Replace(oauthJSON, "https://", "https://u:"+oauthClientSec+"@", 1), says: "user information"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, m, err := ParseSecretInput(tt.kind, []byte(tt.input), tt.user, tt.service)
			if tt.says != "" {
				if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("ParseSecretInput = %v, want state.ErrInvalidArgument saying %q", err, tt.says)
				}
				assertNoSecrets(t, "the error", err.Error())
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s != tt.want || !reflect.DeepEqual(m, tt.oauth) {
				t.Errorf("ParseSecretInput = %s, %v; want %s, %v", fmtSecret(s), m == nil, fmtSecret(tt.want), tt.oauth == nil)
			}
			c := Credential{Name: "parsed", Kind: tt.kind, Secret: s, OAuth: m}
			if err := validateCredential(&c); err != nil {
				t.Errorf("the parsed secret cannot be stored: %v", err)
			}
		})
	}
}

// BenchmarkInjectAPIKey measures the credential stage's cost per request.
func BenchmarkInjectAPIKey(b *testing.B) {
	home := b.TempDir()
	v := &Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key")}
	db, err := state.Open(b.Context(), filepath.Join(home, state.FileName))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	bs := &Bindings{DB: db}
	if err := v.Open(); err != nil {
		b.Fatal(err)
	}
	if err := bs.Open(b.Context()); err != nil {
		b.Fatal(err)
	}
	if err := v.Set(sampleCredentials("")[0]); err != nil {
		b.Fatal(err)
	}
	if err := bs.Bind(b.Context(), Binding{Connector: testkit.LinearFQN, Credential: "linear"}); err != nil {
		b.Fatal(err)
	}
	c := &Injector{Vault: v, Bindings: bs}
	op := linearOp(b, nil)
	out := outbound(b, "https://api.linear.app/graphql")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Inject(context.Background(), nil, op, out); err != nil {
			b.Fatal(err)
		}
	}
}

// fmtSecret shows which fields of s are set, not their values.
func fmtSecret(s inject.Secret) string {
	return fmt.Sprintf("{kind %s token %t user %q password %t key %q secret %t session %t service %q}", s.Kind, s.Token != "",
		s.Username, s.Password != "", s.AccessKeyID, s.SecretAccessKey != "", s.SessionToken != "", s.Service)
}

func FuzzParseSecretInput(f *testing.F) {
	f.Add("api_key", []byte("sk-live-0123456789\n"), "", "")
	f.Add("bearer", []byte("a\r\nb"), "", "")
	f.Add("basic", []byte("pässword\n"), "user", "")
	f.Add("aws_sigv4", []byte(`{"access_key_id":"AKIA","secret_access_key":"s3cr3t-0123456789","session_token":"t"}`), "", "s3")
	f.Add("aws_sigv4", []byte(`{"access_key_id":"AKIA","secret_access_key":"x\u0000y"}`), "", "s3")
	f.Add("oauth2", []byte(`{"token_url":"https://a.example/t","client_id":"c","refresh_token":"r-0123456789","scopes":"a b","expiry":"2026-01-02T15:04:05Z"}`), "", "")
	f.Add("oauth2", []byte(`{"token_url":"https://a.example/t","client_id":"c","refresh_token":"r","scopes":["a b"]}`), "", "")
	f.Fuzz(func(t *testing.T, kind string, input []byte, user, service string) {
		s, m, err := ParseSecretInput(kind, input, user, service)
		if err != nil {
			if !errors.Is(err, state.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap state.ErrInvalidArgument", err)
			}
			flags := kind + "\x00" + user + "\x00" + service // flags are not secret and may be quoted
			if len(input) >= 16 && strings.Contains(err.Error(), string(input)) && !strings.Contains(flags, string(input)) {
				t.Fatalf("error %q quotes the input", err)
			}
			return
		}
		c := Credential{Name: "fuzz", Kind: kind, Secret: s, OAuth: m}
		if err := validateCredential(&c); err != nil {
			t.Fatalf("ParseSecretInput accepted a secret Set refuses: %v", err)
		}
	})
}

// TestInjectAtTheClientsPlace checks that the real Injector puts the key
// where the client put its session's placeholder, among the spec's
// alternatives, removes the client's other copies, refuses another
// session's placeholder as placeholder_misuse, and that a binding naming a
// header pins one place.
func TestInjectAtTheClientsPlace(t *testing.T) {
	creds := sampleCredentials("https://oauth2.example.com/token")[:1] // "linear", api_key
	spec := map[string]any{"kind": "api_key", "header": "x-api-key", "alternatives": []any{
		map[string]any{"header": "Authorization", "format": "Bearer {token}"}, map[string]any{"query": "key"}}}
	op := linearOp(t, spec)
	sess := &dataplane.Session{ID: "s_1"}
	tests := []struct {
		name          string
		bind          Binding
		set           func(r *http.Request, ph, other string)
		xAPIKey, auth string
		query         string
		misuse        bool
	}{
		{name: "x-api-key", set: func(r *http.Request, ph, _ string) { r.Header.Set("X-Api-Key", ph) },
			xAPIKey: apiKeySecret},
		{name: "bearer", set: func(r *http.Request, ph, _ string) { r.Header.Set("Authorization", "Bearer "+ph) },
			auth: "Bearer " + apiKeySecret},
		{name: "query", set: func(r *http.Request, ph, _ string) { r.URL.RawQuery = "key=" + ph },
			query: "key=" + apiKeySecret},
		{name: "none: primary, client's bearer removed", set: func(*http.Request, string, string) {},
			xAPIKey: apiKeySecret},
		{name: "another session's placeholder", set: func(r *http.Request, _, other string) { r.Header.Set("X-Api-Key", other) },
			misuse: true},
		{name: "binding pins the header", bind: Binding{Header: "Authorization", Format: "Bearer {token}"},
			set: func(r *http.Request, ph, _ string) { r.Header.Set("Authorization", "Bearer "+ph) }, auth: "Bearer " + apiKeySecret},
		{name: "binding pins: placeholder elsewhere stays", bind: Binding{Header: "Authorization", Format: "Bearer {token}"},
			set:     func(r *http.Request, ph, _ string) { r.Header.Set("X-Api-Key", ph); r.Header.Del("Authorization") },
			xAPIKey: "placeholder", auth: "Bearer " + apiKeySecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bd := tt.bind
			bd.Connector, bd.Credential = testkit.LinearFQN, "linear"
			c, _ := injectorAt(t, t.TempDir(), creds, bd)
			ph := inject.Placeholder(c.PlaceholderKey, sess.ID, "linear")
			other := inject.Placeholder(c.PlaceholderKey, "s_2", "linear")
			out := outbound(t, "https://api.linear.app/graphql")
			tt.set(out, ph, other)
			_, err := c.Inject(context.Background(), sess, op, out)
			if tt.misuse {
				var de *dataplane.DenyError
				if !errors.As(err, &de) || de.Reason != policy.ReasonPlaceholder {
					t.Fatalf("Inject = %v, want a placeholder_misuse refusal", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.xAPIKey == "placeholder" {
				tt.xAPIKey = ph
			}
			if got := out.Header.Get("X-Api-Key"); got != tt.xAPIKey {
				t.Errorf("X-Api-Key = %q, want %q", got, tt.xAPIKey)
			}
			if got := out.Header.Get("Authorization"); got != tt.auth {
				t.Errorf("Authorization = %q, want %q", got, tt.auth)
			}
			if out.URL.RawQuery != tt.query {
				t.Errorf("query = %q, want %q", out.URL.RawQuery, tt.query)
			}
		})
	}
}

// TestPlaceholderWorkedOutOnce: a session's placeholder is the HMAC of
// Placeholders, its own per session and credential, and after the first
// request it costs no allocation (no HMAC per request); the cache is
// bounded.
func TestPlaceholderWorkedOutOnce(t *testing.T) {
	c, _ := injectorAt(t, t.TempDir(), nil)
	one, two := &dataplane.Session{ID: "s_one"}, &dataplane.Session{ID: "s_two"}
	for _, tc := range []struct {
		sess *dataplane.Session
		name string
	}{{one, "linear"}, {two, "linear"}, {one, "gemini"}} {
		if got, want := c.placeholder(tc.sess, tc.name), inject.Placeholder(c.PlaceholderKey, tc.sess.ID, tc.name); got != want {
			t.Errorf("%s %s: %q, want %q", tc.sess.ID, tc.name, got, want)
		}
	}
	if c.placeholder(one, "linear") == c.placeholder(two, "linear") || c.placeholder(one, "linear") == c.placeholder(one, "gemini") {
		t.Error("two sessions or two credentials share a placeholder")
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.placeholder(one, "linear") }); n != 0 {
		t.Errorf("a known placeholder costs %.0f allocations a request", n)
	}
	for i := range maxPlaceholders + 10 {
		c.placeholder(&dataplane.Session{ID: fmt.Sprint("s_", i)}, "linear")
	}
	if len(c.holders) > maxPlaceholders {
		t.Errorf("%d placeholders kept, bound %d", len(c.holders), maxPlaceholders)
	}
	if got := c.placeholder(one, "linear"); got != inject.Placeholder(c.PlaceholderKey, "s_one", "linear") {
		t.Errorf("after starting over: %q", got)
	}
}
