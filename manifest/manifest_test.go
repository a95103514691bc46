package manifest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const full = `
[connector]
name = "github://acme/aileron-connector-google"
version = "1.2.3"
provenance_hash = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

[capabilities.network]
hosts = ["gmail.googleapis.com:443", "[2001:db8::1]:8443"]

[capabilities.credential]
kind = "oauth2"
scope = "read and send mail"

[capabilities.credential.oauth2]
authorize_url = "https://accounts.example.com/o/oauth2/auth"
token_url = "https://oauth2.example.com/token"
client_id = "app-123"
scopes = ["mail.read", "mail.send"]
client_secret = "not-so-secret"
token_endpoint_auth_method = "client_secret_post"

[capabilities.runtime]
imports = ["http.fetch"]

[provides]
intents = ["email.search", "email.send"]
`

func TestParseFull(t *testing.T) {
	m, err := Parse("manifest.toml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{
		File: "manifest.toml", Name: "github://acme/aileron-connector-google", Version: "1.2.3",
		ProvenanceHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		Hosts:          []string{"gmail.googleapis.com:443", "[2001:db8::1]:8443"},
		Credential: &Credential{Kind: "oauth2", Scope: "read and send mail", OAuth2: &OAuth2{
			AuthorizeURL: "https://accounts.example.com/o/oauth2/auth", TokenURL: "https://oauth2.example.com/token",
			ClientID: "app-123", Scopes: []string{"mail.read", "mail.send"}, ClientSecret: "not-so-secret",
			TokenEndpointAuthMethod: "client_secret_post"}},
		Imports: []string{"http.fetch"},
		Intents: []string{"email.search", "email.send"},
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", m, want)
	}
}

func TestParseMinimal(t *testing.T) {
	m, err := Parse("m.toml", []byte("[connector]\nname = \"local://me/tool\"\nversion = \"0.1.0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Credential != nil || m.Hosts != nil || m.ProvenanceHash != "" {
		t.Errorf("minimal manifest grants something: %+v", m)
	}
}

const head = "[connector]\nname = \"github://acme/x\"\nversion = \"1.0.0\"\n"

// oauthHead is a manifest whose oauth2 table lacks only optional keys.
const oauthHead = head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\n" +
	"authorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\nclient_id = \"c\"\n"

// TestParseAuthMethod: each method is kept as written, and leaving it out
// leaves the default to the login.
func TestParseAuthMethod(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{"", ""},
		{"client_secret = \"s\"\n", ""},
		{"client_secret = \"s\"\ntoken_endpoint_auth_method = \"client_secret_basic\"\n", "client_secret_basic"},
		{"client_secret = \"s\"\ntoken_endpoint_auth_method = \"client_secret_post\"\n", "client_secret_post"},
		{"token_endpoint_auth_method = \"none\"\n", "none"},
	} {
		m, err := Parse("m.toml", []byte(oauthHead+c.extra))
		if err != nil {
			t.Fatalf("%q: %v", c.extra, err)
		}
		if got := m.Credential.OAuth2.TokenEndpointAuthMethod; got != c.want {
			t.Errorf("%q: TokenEndpointAuthMethod = %q, want %q", c.extra, got, c.want)
		}
	}
}

// TestParseRejects breaks each rule once: the error names the key path and
// the rule, and says what to write instead.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, doc, key, rule, says string
	}{
		{"no name", "[connector]\nversion = \"1.0.0\"\n", "connector.name", "required", "FQN"},
		{"bad name", "[connector]\nname = \"google\"\nversion = \"1.0.0\"\n", "connector.name", "fqn", "scheme://"},
		{"no version", "[connector]\nname = \"github://acme/x\"\n", "connector.version", "required", "version ="},
		{"bad version", "[connector]\nname = \"github://acme/x\"\nversion = \"v1\"\n", "connector.version", "semver", ""},
		{"provenance not sha256", head + "provenance_hash = \"md5:abc\"\n", "connector.provenance_hash", "provenance_hash", "sha256:<64"},
		{"provenance upper hex", head + "provenance_hash = \"sha256:" + strings.Repeat("A", 64) + "\"\n", "connector.provenance_hash", "provenance_hash", "lower-case"},
		{"host without port", head + "[capabilities.network]\nhosts = [\"api.example.com\"]\n", "capabilities.network.hosts[0]", "host", "host:port"},
		{"host wildcard", head + "[capabilities.network]\nhosts = [\"*.example.com:443\"]\n", "capabilities.network.hosts[0]", "host", "wildcard"},
		{"host with scheme", head + "[capabilities.network]\nhosts = [\"https://a.example.com:443\"]\n", "capabilities.network.hosts[0]", "host", "scheme"},
		{"host with path", head + "[capabilities.network]\nhosts = [\"a.example.com:443/x\"]\n", "capabilities.network.hosts[0]", "host", "path"},
		{"host bad port", head + "[capabilities.network]\nhosts = [\"a.example.com:0\"]\n", "capabilities.network.hosts[0]", "host", "port"},
		{"host not canonical", head + "[capabilities.network]\nhosts = [\"API.Example.com.:443\"]\n", "capabilities.network.hosts[0]", "host_canonical", `write "api.example.com:443"`},
		{"host twice", head + "[capabilities.network]\nhosts = [\"a.example.com:443\", \"a.example.com:443\"]\n", "capabilities.network.hosts[1]", "host_duplicate", "twice"},
		{"no kind", head + "[capabilities.credential]\nscope = \"x\"\n", "capabilities.credential.kind", "required", "oauth2"},
		{"kind typo", head + "[capabilities.credential]\nkind = \"oauth\"\n", "capabilities.credential.kind", "credential_kind", `did you mean "oauth2"`},
		{"oauth2 table on api_key", head + "[capabilities.credential]\nkind = \"api_key\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\nclient_id = \"c\"\n", "capabilities.credential.oauth2", "oauth2_kind", "kind = \"oauth2\""},
		{"oauth2 no client_id", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\n", "capabilities.credential.oauth2.client_id", "required", "client_id"},
		{"oauth2 no token_url", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\nclient_id = \"c\"\n", "capabilities.credential.oauth2.token_url", "required", "https://"},
		{"oauth2 http url", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"http://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\nclient_id = \"c\"\n", "capabilities.credential.oauth2.authorize_url", "oauth2_url", "https://"},
		{"oauth2 userinfo url", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://u:p@a.example.com/t\"\nclient_id = \"c\"\n", "capabilities.credential.oauth2.token_url", "oauth2_url", "user information"},
		{"oauth2 scope twice", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\nclient_id = \"c\"\nscopes = [\"a\", \"a\"]\n", "capabilities.credential.oauth2.scopes[1]", "name_duplicate", "twice"},
		{"oauth2 auth method unknown", oauthHead + "client_secret = \"s\"\ntoken_endpoint_auth_method = \"client_secret_jwt\"\n", "capabilities.credential.oauth2.token_endpoint_auth_method", "auth_method", "client_secret_basic, client_secret_post, none"},
		{"oauth2 auth method typo", oauthHead + "client_secret = \"s\"\ntoken_endpoint_auth_method = \"client_secret_pots\"\n", "capabilities.credential.oauth2.token_endpoint_auth_method", "auth_method", `did you mean "client_secret_post"`},
		{"oauth2 auth method none with secret", oauthHead + "client_secret = \"s\"\ntoken_endpoint_auth_method = \"none\"\n", "capabilities.credential.oauth2.token_endpoint_auth_method", "auth_method_secret", "remove the secret"},
		{"oauth2 auth method post without secret", oauthHead + "token_endpoint_auth_method = \"client_secret_post\"\n", "capabilities.credential.oauth2.token_endpoint_auth_method", "auth_method_secret", "needs a client_secret"},
		{"oauth2 auth method basic without secret", oauthHead + "token_endpoint_auth_method = \"client_secret_basic\"\n", "capabilities.credential.oauth2.token_endpoint_auth_method", "auth_method_secret", "needs a client_secret"},
		{"oauth2 auth method key misspelled", oauthHead + "client_secret = \"s\"\ntoken_endpoint_auth_metod = \"client_secret_post\"\n", "capabilities.credential.oauth2.token_endpoint_auth_metod", "unknown_key", `did you mean "token_endpoint_auth_method"`},
		{"empty import", head + "[capabilities.runtime]\nimports = [\"\"]\n", "capabilities.runtime.imports[0]", "name_empty", "bare name"},
		{"intent with space", head + "[provides]\nintents = [\"send mail\"]\n", "provides.intents[0]", "name_chars", "one word"},
		{"unknown top key", head + "[capabilites]\n", "capabilites", "unknown_key", `did you mean "capabilities"`},
		{"unknown connector key", head + "verison = \"1\"\n", "connector.verison", "unknown_key", `did you mean "version"`},
		{"unknown network key", head + "[capabilities.network]\nhost = [\"a.example.com:443\"]\n", "capabilities.network.host", "unknown_key", `did you mean "hosts"`},
		{"unknown oauth2 key", head + "[capabilities.credential]\nkind = \"oauth2\"\n[capabilities.credential.oauth2]\nauthorize_url = \"https://a.example.com/a\"\ntoken_url = \"https://a.example.com/t\"\nclient_id = \"c\"\nclient_secert = \"s\"\n", "capabilities.credential.oauth2.client_secert", "unknown_key", `did you mean "client_secret"`},
		{"unknown key, no suggestion", head + "[provides]\nzzzzzzzz = 1\n", "provides.zzzzzzzz", "unknown_key", "known: intents"},
		{"hosts not a list", head + "[capabilities.network]\nhosts = \"a.example.com:443\"\n", "", "toml", "type"},
		{"name not a string", "[connector]\nname = 1\nversion = \"1.0.0\"\n", "", "toml", "type"},
		{"credential not a table", head + "[capabilities]\ncredential = \"oauth2\"\n", "", "toml", "type"},
		{"syntax", "[connector]\nname = \n", "", "toml", "syntax error on line 2"},
		{"NUL byte", head + "\x00", "", "encoding", "UTF-8"},
		{"not UTF-8", head + "# \xff\n", "", "encoding", "UTF-8"},
		{"too large", head + "# " + strings.Repeat("x", MaxSize) + "\n", "", "size_limit", "limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Parse("pkg/manifest.toml", []byte(c.doc))
			if err == nil {
				t.Fatalf("Parse accepted %q: %+v", c.doc, m)
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Errorf("error does not wrap ErrInvalidManifest: %v", err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Key != c.key || ve.Rule != c.rule {
				t.Errorf("error = %v (%+v), want key %q rule %q", err, ve, c.key, c.rule)
			}
			if !strings.Contains(err.Error(), "pkg/manifest.toml") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not name the file and say %q", err, c.says)
			}
		})
	}
}

// TestParseReportsEveryProblem: one pass names all broken rules.
func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse("m.toml", []byte("[connector]\nname = \"x\"\nversion = \"1\"\nnmae = \"y\"\n[capabilities.network]\nhosts = [\"*:1\"]\n"))
	for _, want := range []string{"connector.name:", "connector.version:", "connector.nmae:", "capabilities.network.hosts[0]:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not report %s", err, want)
		}
	}
}

// FuzzManifest: Parse never panics, and whatever it accepts is canonical
// and self-consistent.
func FuzzManifest(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(head))
	f.Add([]byte(head + "[capabilities.network]\nhosts = [\"API.example.com:443\"]\n"))
	f.Add([]byte("[capabilities.credential.oauth2]\nscopes = [1]\n"))
	f.Add([]byte(oauthHead + "client_secret = \"s\"\ntoken_endpoint_auth_method = \"client_secret_post\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("f.toml", data)
		if err != nil {
			if m != nil || !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("failed parse returned %v, %v", m, err)
			}
			return
		}
		if m.Name == "" || m.Version == "" {
			t.Fatalf("accepted without name or version: %+v", m)
		}
		again, err := Parse("f.toml", data)
		if err != nil || !reflect.DeepEqual(m, again) {
			t.Fatalf("Parse not deterministic")
		}
		for _, h := range m.Hosts {
			if strings.ContainsAny(h, "*/ ") || !strings.Contains(h, ":") {
				t.Fatalf("accepted host %q", h)
			}
		}
		if c := m.Credential; c != nil && c.OAuth2 != nil && c.Kind != "oauth2" {
			t.Fatalf("oauth2 table accepted with kind %q", c.Kind)
		}
		if c := m.Credential; c != nil && c.OAuth2 != nil {
			switch o := c.OAuth2; o.TokenEndpointAuthMethod {
			case "":
			case AuthMethodNone:
				if o.ClientSecret != "" {
					t.Fatalf("method none accepted with a client_secret")
				}
			case AuthMethodBasic, AuthMethodPost:
				if o.ClientSecret == "" {
					t.Fatalf("method %s accepted without a client_secret", o.TokenEndpointAuthMethod)
				}
			default:
				t.Fatalf("accepted token_endpoint_auth_method %q", o.TokenEndpointAuthMethod)
			}
		}
	})
}
