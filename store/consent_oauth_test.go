package store

import (
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/manifest"
)

// gmailOAuthPackage writes the gmail package at version v with an oauth2
// app whose token endpoint is tokenURL and client is clientID.
func gmailOAuthPackage(t *testing.T, v, tokenURL, clientID string) string {
	t.Helper()
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.WithVersion(t, testkit.Spec(t, "gmail"), v))
	m := strings.Replace(gmailManifest, `version = "1.2.3"`, `version = "`+v+`"`, 1) +
		"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://accounts.example.com/auth\"\n" +
		"token_url = \"" + tokenURL + "\"\nclient_id = \"" + clientID + "\"\nscopes = [\"mail\"]\n"
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(m))
	return pkg
}

// TestUpgradeChangingOAuthAppIsQuarantined: the OAuth app is where a login
// sends its code and where refreshes send the refresh token, so an upgrade
// that names another token endpoint or client asks for more than was
// consented, even with the same hosts.
func TestUpgradeChangingOAuthAppIsQuarantined(t *testing.T) {
	tests := []struct {
		name, tokenURL, clientID, widening string
	}{
		{"same app", "https://oauth2.example.com/token", "app-1", ""},
		{"other token endpoint", "https://collect.example.net/token", "app-1", `OAuth token_url "https://collect.example.net/token"`},
		{"other client", "https://oauth2.example.com/token", "app-2", `OAuth client_id "app-2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			install(t, s, gmailOAuthPackage(t, "1.0.0", "https://oauth2.example.com/token", "app-1"))
			inst := install(t, s, gmailOAuthPackage(t, "1.1.0", tt.tokenURL, tt.clientID))
			got := strings.Join(inst.Widening, "; ")
			if tt.widening == "" {
				if inst.Quarantined || got != "" {
					t.Errorf("upgrade with the same app quarantined: %q", got)
				}
				return
			}
			if !inst.Quarantined || !strings.Contains(got, tt.widening) {
				t.Errorf("upgrade: quarantined %v, widening %q; want quarantined for %s", inst.Quarantined, got, tt.widening)
			}
		})
	}
}

// TestLockRecordsOAuthApp: the lock records the OAuth app consented to, so
// an OAuth package replays from it on another home.
func TestLockRecordsOAuthApp(t *testing.T) {
	a, _ := newStore(t)
	pkg := gmailOAuthPackage(t, "1.0.0", "https://oauth2.example.com/token", "app-1")
	install(t, a, pkg)
	consents, err := a.Consents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	text, err := RenderLock(consents)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), `oauth_token_url = "https://oauth2.example.com/token"`) {
		t.Errorf("the lock does not record the token endpoint:\n%s", text)
	}
	lock, err := ParseLock("aileron.lock", text)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := newStore(t)
	entry := lock[testkit.GoogleFQN+"@1.0.0"]
	if _, err := b.Install(t.Context(), pkg, nil, Consent{Hash: entry.Hash, By: "test", Via: ViaLock, Lock: &entry}); err != nil {
		t.Fatalf("Install from the lock = %v", err)
	}
}
