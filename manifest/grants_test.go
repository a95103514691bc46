package manifest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

func spec(hosts []string, kind string) *policy.Spec {
	return &policy.Spec{Connector: policy.Connector{FQN: "github://acme/x", Version: "1.0.0"},
		Tools: []policy.Tool{{Name: "t", Operations: []policy.OperationSpec{{Name: "op", Hosts: hosts, Credential: policy.Credential{Kind: kind}}}}}}
}

func TestReach(t *testing.T) {
	got := Reach(spec([]string{"B.example.com", "a.example.com:8443", "b.example.com:443"}, "bearer"))
	want := Grants{Hosts: []string{"a.example.com:8443", "b.example.com:443"}, CredentialKinds: []string{"bearer"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Reach = %+v, want %+v", got, want)
	}
}

// TestCheckFailsClosed: a host entry that does not parse (ParseSpec never
// lets one through, but Check does not rely on it) is an excess, never
// skipped.
func TestCheckFailsClosed(t *testing.T) {
	m, err := Parse("m.toml", []byte(head+"[capabilities.network]\nhosts = [\"a.example.com:443\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(spec([]string{"a.example.com"}, "")); err != nil {
		t.Fatalf("Check refused a matching spec: %v", err)
	}
	err = m.Check(spec([]string{"a.example.com", "*.example.com"}, ""))
	if !errors.Is(err, ErrExceedsManifest) || !strings.Contains(err.Error(), `host "*.example.com"`) {
		t.Errorf("Check = %v, want the unparsable host refused", err)
	}
}

// TestGrantsCarryScopesAndImports: what a manifest asks besides hosts and
// kinds (its credential scope, OAuth scopes and app, runtime imports) is part
// of its grants, so a consent can show and bound it.
func TestGrantsCarryScopesAndImports(t *testing.T) {
	m, err := Parse("m.toml", []byte(head+`[capabilities.credential]
kind = "oauth2"
scope = "Read your mail"
[capabilities.credential.oauth2]
authorize_url = "https://auth.example.com/authorize"
token_url = "https://auth.example.com/token"
client_id = "app"
scopes = ["mail.send", "mail.read"]
[capabilities.runtime]
imports = ["wasi:http/outgoing-handler", "wasi:cli/stdout"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Grants{CredentialKinds: []string{"oauth2"}, CredentialScope: "Read your mail",
		OAuthScopes: []string{"mail.read", "mail.send"}, Imports: []string{"wasi:cli/stdout", "wasi:http/outgoing-handler"}, FromManifest: true,
		OAuthAuthorizeURL: "https://auth.example.com/authorize", OAuthTokenURL: "https://auth.example.com/token", OAuthClientID: "app"}
	if got := m.Grants(); !reflect.DeepEqual(got, want) {
		t.Errorf("Grants = %+v\nwant     %+v", got, want)
	}
}
