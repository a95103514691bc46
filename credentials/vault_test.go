package credentials

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// Secret values used by the vault and injector tests. Each is distinctive
// enough that finding it in a file, an error or a log is never a fluke.
const (
	apiKeySecret   = "lin_api_SECRETvaultKEY0123456789"
	bearerSecret   = "ghp_BEARERsecretTOKEN0123456789"
	basicPassword  = "hunter2-BASICpassword-0123456789"
	awsSecretKey   = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSECRETKEY"
	awsSession     = "FwoGZXIvYXdzSESSIONtoken0123456789"
	oauthClientSec = "oauth-CLIENTsecret-0123456789"
	oauthAccess    = "ya29.ACCESStoken-0123456789"
	oauthRefresh   = "1//REFRESHtoken-0123456789"
)

// allSecrets lists every secret constant above.
func allSecrets() []string {
	return []string{apiKeySecret, bearerSecret, basicPassword, awsSecretKey, awsSession, oauthClientSec, oauthAccess, oauthRefresh}
}

// vaultAt returns an opened Vault rooted at home.
func vaultAt(t *testing.T, home string, clock *testkit.Clock) *Vault {
	t.Helper()
	v := &Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key"), Now: clock.Now}
	if err := v.Open(); err != nil {
		t.Fatal(err)
	}
	return v
}

// sampleCredentials returns one valid credential of every kind.
func sampleCredentials(tokenURL string) []Credential {
	return []Credential{
		{Name: "linear", Kind: inject.KindAPIKey, Secret: inject.Secret{Token: apiKeySecret}},
		{Name: "github", Kind: inject.KindBearer, Secret: inject.Secret{Token: bearerSecret}},
		{Name: "jira", Kind: inject.KindBasic, Secret: inject.Secret{Username: "bot@example.com", Password: basicPassword}},
		{Name: "aws.prod", Kind: inject.KindSigV4, Secret: inject.Secret{AccessKeyID: "AKIAEXAMPLE",
			SecretAccessKey: awsSecretKey, SessionToken: awsSession, Service: "execute-api"}},
		{Name: "google_mail", Kind: inject.KindOAuth2, OAuth: &OAuthMaterial{TokenURL: tokenURL, ClientID: "client-1",
			ClientSecret: oauthClientSec, Scopes: []string{"mail.read", "mail.send"}, AccessToken: oauthAccess,
			RefreshToken: oauthRefresh, Expiry: time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)}},
	}
}

// setAll stores every credential in cs.
func setAll(t *testing.T, v *Vault, cs []Credential) {
	t.Helper()
	for _, c := range cs {
		if err := v.Set(c); err != nil {
			t.Fatalf("Set(%s): %v", c.Name, err)
		}
	}
}

// assertNoSecrets fails if text contains any secret constant.
func assertNoSecrets(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range allSecrets() {
		if strings.Contains(text, s) {
			t.Errorf("%s contains the secret %.8s…", what, s)
		}
	}
}

func TestVaultRoundTrip(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	v := vaultAt(t, home, clock)
	want := sampleCredentials("https://oauth2.example.com/token")
	setAll(t, v, want)

	data, err := os.ReadFile(filepath.Join(home, "vault", VaultFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("age-encryption.org/v1\n")) {
		t.Errorf("vault file does not start with the age header: %.40q", data)
	}
	assertNoSecrets(t, "the vault file", string(data))
	for p, perm := range map[string]os.FileMode{
		filepath.Join(home, "vault", VaultFile): 0o600, filepath.Join(home, "keys", "vault.key"): 0o600,
		filepath.Join(home, "vault"): 0o700, filepath.Join(home, "keys"): 0o700,
	} {
		if got := testkit.Mode(t, p); got != perm {
			t.Errorf("%s has mode %v, want %v", p, got, perm)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(home, "vault", ".*"))
	if len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}

	fresh := vaultAt(t, home, clock)
	for _, w := range want {
		got, err := fresh.Get(w.Name)
		if err != nil {
			t.Fatalf("Get(%s) after reopen: %v", w.Name, err)
		}
		w.Secret.Kind = w.Kind
		w.CreatedAt, w.UpdatedAt = clock.Now(), clock.Now()
		gotJSON, _ := json.Marshal(credentialForCompare(got))
		wantJSON, _ := json.Marshal(credentialForCompare(w))
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("Get(%s) after reopen differs:\n got %s\nwant %s", w.Name, gotJSON, wantJSON)
		}
	}
}

// fmtV formats v every way fmt prints a struct.
func fmtV(v any) string { return fmt.Sprintf("%v %+v %#v %s", v, v, v, v) }

// credentialForCompare exposes every field of c for comparison (Credential
// hides its secrets from fmt on purpose).
func credentialForCompare(c Credential) map[string]any {
	return map[string]any{"name": c.Name, "kind": c.Kind, "secret": c.Secret, "oauth": c.OAuth,
		"created": c.CreatedAt, "updated": c.UpdatedAt}
}

func TestVaultOpenRefusesWhatItCannotRead(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, home string)
		want    error
		says    []string
	}{
		{"wrong key", func(t *testing.T, home string) {
			other := t.TempDir()
			vaultAt(t, other, testkit.NewClock())
			key, _ := os.ReadFile(filepath.Join(other, "keys", "vault.key"))
			os.WriteFile(filepath.Join(home, "keys", "vault.key"), key, 0o600)
		}, state.ErrCorruptState, []string{"vault.age", "vault.key", "different key", "left untouched"}},
		{"damaged vault", func(t *testing.T, home string) {
			os.WriteFile(filepath.Join(home, "vault", VaultFile), []byte("age-encryption.org/v1\ngarbage"), 0o600)
		}, state.ErrCorruptState, []string{"vault.age", "damaged"}},
		{"key missing", func(t *testing.T, home string) {
			os.Remove(filepath.Join(home, "keys", "vault.key"))
		}, state.ErrCorruptState, []string{"vault.key", "missing", "backup"}},
		{"key readable by others", func(t *testing.T, home string) {
			os.Chmod(filepath.Join(home, "keys", "vault.key"), 0o644)
		}, state.ErrInsecureFile, []string{"chmod 600", "vault.key"}},
		{"key not an age identity", func(t *testing.T, home string) {
			os.WriteFile(filepath.Join(home, "keys", "vault.key"), []byte("AGE-SECRET-KEY-1NOTAKEY\n"), 0o600)
		}, state.ErrCorruptState, []string{"AGE-SECRET-KEY-1", "vault.key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			setAll(t, vaultAt(t, home, testkit.NewClock()), sampleCredentials("https://oauth2.example.com/token")[:1])
			vaultFile := filepath.Join(home, "vault", VaultFile)
			tt.prepare(t, home)
			before, _ := os.ReadFile(vaultFile)
			v := &Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key")}
			err := v.Open()
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open = %v, want %v", err, tt.want)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Open error %q does not mention %q", err, s)
				}
			}
			after, _ := os.ReadFile(vaultFile)
			if !bytes.Equal(before, after) {
				t.Error("Open changed the vault file it could not read")
			}
			if _, err := v.Get("linear"); !errors.Is(err, state.ErrNotOpen) {
				t.Errorf("Get after a failed Open = %v, want state.ErrNotOpen", err)
			}
		})
	}
}

func TestVaultSetValidation(t *testing.T) {
	oauth := func(fn func(m *OAuthMaterial)) *OAuthMaterial {
		m := &OAuthMaterial{TokenURL: "https://auth.example.com/token", ClientID: "c", RefreshToken: oauthRefresh}
		fn(m)
		return m
	}
	tests := []struct {
		name string
		c    Credential
		says string
	}{
		{"empty name", Credential{Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret}}, "credential name"},
		{"name with slash", Credential{Name: "a/b", Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret}}, "credential name"},
		{"name too long", Credential{Name: strings.Repeat("a", 65), Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret}}, "credential name"},
		{"unknown kind", Credential{Name: "x", Kind: "hmac", Secret: inject.Secret{Token: apiKeySecret}}, "unknown kind"},
		{"kind mismatch", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Kind: "basic", Token: apiKeySecret}}, "differs"},
		{"empty token", Credential{Name: "x", Kind: "bearer"}, "token is empty"},
		{"token with LF", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret + "\nX-Evil: 1"}}, "LF"},
		{"token with CR", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Token: "\r" + apiKeySecret}}, "CR"},
		{"token with NUL", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret + "\x00"}}, "NUL"},
		{"password with LF", Credential{Name: "x", Kind: "basic", Secret: inject.Secret{Username: "u", Password: basicPassword + "\n"}}, "LF"},
		{"foreign field", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret, Password: basicPassword}}, "does not use password"},
		{"basic user with colon", Credential{Name: "x", Kind: "basic", Secret: inject.Secret{Username: "a:b", Password: basicPassword}}, "':'"},
		{"sigv4 without service", Credential{Name: "x", Kind: "aws_sigv4", Secret: inject.Secret{AccessKeyID: "AKIA", SecretAccessKey: awsSecretKey}}, "service is empty"},
		{"sigv4 session token with NUL", Credential{Name: "x", Kind: "aws_sigv4", Secret: inject.Secret{AccessKeyID: "AKIA",
			SecretAccessKey: awsSecretKey, SessionToken: awsSession + "\x00", Service: "s3"}}, "NUL"},
		{"oauth2 without material", Credential{Name: "x", Kind: "oauth2"}, "token_url"},
		{"oauth2 http token url", Credential{Name: "x", Kind: "oauth2", OAuth: oauth(func(m *OAuthMaterial) {
			m.TokenURL = "http://auth.example.com/token"
		})}, "https"},
		{"oauth2 without any token", Credential{Name: "x", Kind: "oauth2", OAuth: oauth(func(m *OAuthMaterial) { m.RefreshToken, m.AccessToken = "", "" })},
			"needs a refresh_token or an access_token"},
		{"oauth2 access token with LF", Credential{Name: "x", Kind: "oauth2", OAuth: oauth(func(m *OAuthMaterial) { m.AccessToken = oauthAccess + "\n" })}, "LF"},
		{"oauth2 scope with space", Credential{Name: "x", Kind: "oauth2", OAuth: oauth(func(m *OAuthMaterial) { m.Scopes = []string{"a b"} })}, "scope"},
		{"oauth material on api_key", Credential{Name: "x", Kind: "api_key", Secret: inject.Secret{Token: apiKeySecret}, OAuth: oauth(func(*OAuthMaterial) {})}, "only oauth2"},
	}
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.Set(tt.c)
			if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Set = %v, want state.ErrInvalidArgument saying %q", err, tt.says)
			}
			assertNoSecrets(t, "the error", err.Error())
		})
	}
	if got := v.List(); len(got) != 0 {
		t.Errorf("rejected credentials were stored: %v", got)
	}
}

func TestVaultAcceptsLoopbackHTTPTokenURL(t *testing.T) {
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	for _, u := range []string{"http://127.0.0.1:8080/token", "http://localhost/token", "http://[::1]:9/t"} {
		c := sampleCredentials(u)[4]
		if err := v.Set(c); err != nil {
			t.Errorf("Set with token_url %s: %v", u, err)
		}
	}
}

func TestVaultListNeverShowsValues(t *testing.T) {
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token"))
	list := v.List()
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, "List as JSON", string(data))
	var names []string
	for _, in := range list {
		names = append(names, in.Name)
		if (in.Expiry != nil) != (in.Kind == inject.KindOAuth2) {
			t.Errorf("%s: Expiry = %v; want it exactly for oauth2", in.Name, in.Expiry)
		}
	}
	if got := strings.Join(names, ","); got != "aws.prod,github,google_mail,jira,linear" {
		t.Errorf("List names = %s, want them sorted", got)
	}
	for _, c := range sampleCredentials("https://oauth2.example.com/token") {
		for _, form := range []string{c.String(), fmtV(c)} {
			assertNoSecrets(t, "a formatted Credential", form)
		}
	}
}

func TestVaultRotationIsVisibleToTheNextGet(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	v := vaultAt(t, home, clock)
	c := Credential{Name: "linear", Kind: inject.KindAPIKey, Secret: inject.Secret{Token: "old-token-0123456789"}}
	setAll(t, v, []Credential{c})
	first, _ := v.Get("linear")

	c.Secret.Token = apiKeySecret // same clock reading: UpdatedAt must still move
	setAll(t, v, []Credential{c})
	got, err := v.Get("linear")
	if err != nil || got.Secret.Token != apiKeySecret {
		t.Fatalf("Get after rotation = %v (token rotated: %v)", err, got.Secret.Token == apiKeySecret)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.After(first.UpdatedAt) {
		t.Errorf("rotation: created %v→%v, updated %v→%v; want created kept and updated advanced",
			first.CreatedAt, got.CreatedAt, first.UpdatedAt, got.UpdatedAt)
	}
	if reopened, _ := vaultAt(t, home, clock).Get("linear"); reopened.Secret.Token != apiKeySecret || !reopened.UpdatedAt.Equal(got.UpdatedAt) {
		t.Error("the rotation was not persisted")
	}
}

func TestVaultGetReturnsACopy(t *testing.T) {
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token"))
	c, _ := v.Get("google_mail")
	c.OAuth.Scopes[0] = "changed"
	c.OAuth.AccessToken = "changed"
	again, _ := v.Get("google_mail")
	if again.OAuth.Scopes[0] != "mail.read" || again.OAuth.AccessToken != oauthAccess {
		t.Error("changing a Get result changed the vault")
	}
}

func TestVaultUpdateOAuthToken(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	v := vaultAt(t, home, clock)
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token"))
	before, _ := v.Get("google_mail")
	clock.Advance(time.Hour)
	exp := clock.Now().Add(time.Hour)
	if err := v.UpdateOAuthToken("google_mail", inject.OAuthToken{AccessToken: "new-access-0123456789", Expiry: exp}); err != nil {
		t.Fatal(err)
	}
	got, _ := vaultAt(t, home, clock).Get("google_mail")
	m := got.OAuth
	if m.AccessToken != "new-access-0123456789" || !m.Expiry.Equal(exp) || m.RefreshToken != oauthRefresh {
		t.Errorf("after reopen: access updated %v, expiry %v, refresh kept %v",
			m.AccessToken == "new-access-0123456789", m.Expiry, m.RefreshToken == oauthRefresh)
	}
	if !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a refresh changed UpdatedAt from %v to %v", before.UpdatedAt, got.UpdatedAt)
	}
	if err := v.UpdateOAuthToken("google_mail", inject.OAuthToken{AccessToken: "a", RefreshToken: "rotated-refresh"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := v.Get("google_mail"); got.OAuth.RefreshToken != "rotated-refresh" {
		t.Error("a rotated refresh token was not kept")
	}

	for _, tt := range []struct {
		name, cred string
		tok        inject.OAuthToken
		want       error
	}{
		{"unknown", "nope", inject.OAuthToken{AccessToken: "a"}, state.ErrNotFound},
		{"not oauth2", "linear", inject.OAuthToken{AccessToken: "a"}, state.ErrInvalidArgument},
		{"empty access token", "google_mail", inject.OAuthToken{}, state.ErrInvalidArgument},
		{"access token with LF", "google_mail", inject.OAuthToken{AccessToken: "a\nb"}, state.ErrInvalidArgument},
	} {
		if err := v.UpdateOAuthToken(tt.cred, tt.tok); !errors.Is(err, tt.want) {
			t.Errorf("%s: UpdateOAuthToken = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestVaultDelete(t *testing.T) {
	home := t.TempDir()
	v := vaultAt(t, home, testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token")[:2])
	if err := v.Delete("linear"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Get("linear"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want state.ErrNotFound", err)
	}
	if err := v.Delete("linear"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("second Delete = %v, want state.ErrNotFound", err)
	}
	fresh := vaultAt(t, home, testkit.NewClock())
	if _, err := fresh.Get("linear"); !errors.Is(err, state.ErrNotFound) {
		t.Error("the deletion was not persisted")
	}
	if _, err := fresh.Get("github"); err != nil {
		t.Errorf("Delete removed another entry: %v", err)
	}
}

func TestVaultFailedWriteChangesNothing(t *testing.T) {
	home := t.TempDir()
	v := vaultAt(t, home, testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token")[:1])
	file := filepath.Join(home, "vault", VaultFile)
	os.Remove(file) // a non-empty directory in its place makes the rename fail
	testkit.WriteFile(t, file, "blocker", []byte("x"))

	c := Credential{Name: "linear", Kind: inject.KindAPIKey, Secret: inject.Secret{Token: "rotated-0123456789"}}
	if err := v.Set(c); err == nil {
		t.Fatal("Set succeeded although the vault file could not be replaced")
	}
	if got, _ := v.Get("linear"); got.Secret.Token != apiKeySecret {
		t.Error("a failed Set changed the in-memory vault")
	}
	if err := v.Delete("linear"); err == nil {
		t.Error("Delete succeeded although the vault file could not be replaced")
	}
	if _, err := v.Get("linear"); err != nil {
		t.Errorf("a failed Delete changed the in-memory vault: %v", err)
	}
}

func TestVaultBeforeOpen(t *testing.T) {
	v := &Vault{Dir: t.TempDir(), KeyFile: filepath.Join(t.TempDir(), "k")}
	c := sampleCredentials("https://oauth2.example.com/token")[0]
	if err := v.Set(c); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Set = %v, want state.ErrNotOpen", err)
	}
	if _, err := v.Get("linear"); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Get = %v, want state.ErrNotOpen", err)
	}
	if err := v.Delete("linear"); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Delete = %v, want state.ErrNotOpen", err)
	}
	if err := v.UpdateOAuthToken("linear", inject.OAuthToken{AccessToken: "a"}); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("UpdateOAuthToken = %v, want state.ErrNotOpen", err)
	}
	if v.List() != nil {
		t.Error("List before Open is not nil")
	}
	if err := (&Vault{Dir: t.TempDir()}).Open(); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("Open without KeyFile = %v, want state.ErrInvalidArgument", err)
	}
}

func TestVaultConcurrentRotationAndReads(t *testing.T) {
	v := vaultAt(t, t.TempDir(), testkit.NewClock())
	setAll(t, v, sampleCredentials("https://oauth2.example.com/token")[:1])
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := v.Get("linear")
				if err != nil || !strings.HasPrefix(c.Secret.Token, "tok-") && c.Secret.Token != apiKeySecret {
					t.Errorf("concurrent Get = %v", err)
					return
				}
				v.List()
			}
		})
	}
	for i := range 20 {
		c := Credential{Name: "linear", Kind: inject.KindAPIKey, Secret: inject.Secret{Token: "tok-" + strings.Repeat("x", i+1)}}
		if err := v.Set(c); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
	if c, _ := v.Get("linear"); c.Secret.Token != "tok-"+strings.Repeat("x", 20) {
		t.Error("the last rotation did not win")
	}
}
