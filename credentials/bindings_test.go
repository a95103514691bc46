package credentials

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// bindingsAt returns opened Bindings on its own handle of home's database.
func bindingsAt(t *testing.T, home string) *Bindings {
	t.Helper()
	b := &Bindings{DB: testkit.OpenDB(t, filepath.Join(home, state.FileName))}
	if err := b.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBindingsRoundTrip(t *testing.T) {
	home := t.TempDir()
	b := bindingsAt(t, home)
	linear := Binding{Connector: testkit.LinearFQN, Credential: "linear", Env: "LINEAR_API_KEY"}
	google := Binding{Connector: testkit.GoogleFQN, Credential: "google_mail", Header: "Authorization", Format: "Bearer {token}"}
	for _, bd := range []Binding{linear, google} {
		if err := b.Bind(t.Context(), bd); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "bindings.json")); !os.IsNotExist(err) {
		t.Errorf("bindings.json written; bindings belong in the database (%v)", err)
	}
	if n := testkit.CountRows(t, b.DB, "bindings"); n != 2 {
		t.Errorf("%d rows in bindings, want 2", n)
	}
	want := []Binding{google, linear} // sorted by connector
	if got := bindingsAt(t, home).List(); !reflect.DeepEqual(got, want) {
		t.Errorf("List after reopen = %+v, want %+v", got, want)
	}

	linear2 := Binding{Connector: testkit.LinearFQN, Credential: "linear-2", Query: "api_key"}
	if err := b.Bind(t.Context(), linear2); err != nil {
		t.Fatal(err)
	}
	if got, ok := b.Get(testkit.LinearFQN); !ok || got != linear2 {
		t.Errorf("Get after rebinding = %+v, %v; want the new binding", got, ok)
	}
	if n := len(b.List()); n != 2 {
		t.Errorf("rebinding left %d bindings, want 2", n)
	}

	if err := b.Unbind(t.Context(), testkit.GoogleFQN); err != nil {
		t.Fatal(err)
	}
	if err := b.Unbind(t.Context(), testkit.GoogleFQN); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("second Unbind = %v, want state.ErrNotFound", err)
	}
	fresh := bindingsAt(t, home)
	if _, ok := fresh.Get(testkit.GoogleFQN); ok {
		t.Error("Unbind was not persisted")
	}
	if got, _ := fresh.Get(testkit.LinearFQN); got != linear2 {
		t.Errorf("after reopen the linear binding is %+v, want %+v", got, linear2)
	}
}

func TestBindingValidation(t *testing.T) {
	ok := Binding{Connector: testkit.LinearFQN, Credential: "linear"}
	with := func(fn func(b *Binding)) Binding {
		b := ok
		fn(&b)
		return b
	}
	tests := []struct {
		name string
		b    Binding
		says string // "" means valid
	}{
		{"minimal", ok, ""},
		{"header and raw key format", with(func(b *Binding) { b.Header, b.Format = "Authorization", "{key}" }), ""},
		{"custom header", with(func(b *Binding) { b.Header = "X-Api-Key" }), ""},
		{"query", with(func(b *Binding) { b.Query = "api_key" }), ""},
		{"env", with(func(b *Binding) { b.Env = "LINEAR_API_KEY" }), ""},
		{"env with underscore start", with(func(b *Binding) { b.Env = "_KEY2" }), ""},
		{"several env", with(func(b *Binding) { b.Env = "GEMINI_API_KEY,GOOGLE_API_KEY" }), ""},
		{"env list with an empty name", with(func(b *Binding) { b.Env = "GEMINI_API_KEY,,GOOGLE_API_KEY" }), "empty name"},
		{"env list ending in a comma", with(func(b *Binding) { b.Env = "GEMINI_API_KEY," }), "empty name"},
		{"env list with a space", with(func(b *Binding) { b.Env = "GEMINI_API_KEY, GOOGLE_API_KEY" }), "[A-Z_][A-Z0-9_]*"},
		{"env named twice", with(func(b *Binding) { b.Env = "API_KEY,API_KEY" }), "named twice"},
		{"env list with a reserved name", with(func(b *Binding) { b.Env = "API_KEY,HTTPS_PROXY" }), "set by aileron"},
		{"env list too long", with(func(b *Binding) { b.Env = strings.Repeat("ABCDEFG,", 200) + "X" }), "limit"},
		{"bad fqn", with(func(b *Binding) { b.Connector = "linear" }), "no scheme"},
		{"unknown fqn scheme", with(func(b *Binding) { b.Connector = "ftp://a/b" }), "unknown scheme"},
		{"empty credential", with(func(b *Binding) { b.Credential = "" }), "credential name"},
		{"credential with space", with(func(b *Binding) { b.Credential = "my key" }), "credential name"},
		{"header with space", with(func(b *Binding) { b.Header = "X Api Key" }), "not a valid HTTP header name"},
		{"header with colon", with(func(b *Binding) { b.Header = "X-Key:" }), "not a valid HTTP header name"},
		{"host header", with(func(b *Binding) { b.Header = "host" }), "framing header"},
		{"content-length", with(func(b *Binding) { b.Header = "Content-Length" }), "framing header"},
		{"transfer-encoding", with(func(b *Binding) { b.Header = "transfer-encoding" }), "framing header"},
		{"connection", with(func(b *Binding) { b.Header = "Connection" }), "framing header"},
		{"proxy-authorization", with(func(b *Binding) { b.Header = "Proxy-Authorization" }), "framing header"},
		{"te", with(func(b *Binding) { b.Header = "TE" }), "framing header"},
		{"header and query", with(func(b *Binding) { b.Header, b.Query = "X-Key", "key" }), "choose one"},
		{"query with ampersand", with(func(b *Binding) { b.Query = "a&b" }), "query parameter"},
		{"query with equals", with(func(b *Binding) { b.Query = "a=b" }), "query parameter"},
		{"format without placeholder", with(func(b *Binding) { b.Format = "Bearer" }), "no {token} or {key}"},
		{"format with other placeholder", with(func(b *Binding) { b.Format = "Bearer {secret}" }), "{secret}"},
		{"format with LF", with(func(b *Binding) { b.Format = "{token}\nX-Evil: 1" }), "control character"},
		{"format with stray brace", with(func(b *Binding) { b.Format = "{token}}" }), "'}' without '{'"},
		{"format unclosed", with(func(b *Binding) { b.Format = "{token" }), "'{' without '}'"},
		{"env lower case", with(func(b *Binding) { b.Env = "linear_api_key" }), "[A-Z_][A-Z0-9_]*"},
		{"env starting with digit", with(func(b *Binding) { b.Env = "1KEY" }), "[A-Z_][A-Z0-9_]*"},
		{"env with dash", with(func(b *Binding) { b.Env = "API-KEY" }), "[A-Z_][A-Z0-9_]*"},
		{"env replacing the proxy", with(func(b *Binding) { b.Env = "HTTPS_PROXY" }), "set by aileron"},
		{"env in aileron's namespace", with(func(b *Binding) { b.Env = "AILERON_API_URL" }), "set by aileron"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bindingsAt(t, t.TempDir())
			err := b.Bind(t.Context(), tt.b)
			if tt.says == "" {
				if err != nil {
					t.Fatalf("Bind(%+v) = %v, want success", tt.b, err)
				}
				if got, _ := b.Get(tt.b.Connector); got != tt.b {
					t.Errorf("Get = %+v, want %+v", got, tt.b)
				}
				return
			}
			if !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("Bind(%+v) = %v, want state.ErrInvalidArgument saying %q", tt.b, err, tt.says)
			}
			if len(b.List()) != 0 {
				t.Error("an invalid binding was stored")
			}
		})
	}
}

func TestBindingEnvConflicts(t *testing.T) {
	b := bindingsAt(t, t.TempDir())
	if err := b.Bind(t.Context(), Binding{Connector: testkit.LinearFQN, Credential: "linear", Env: "API_KEY"}); err != nil {
		t.Fatal(err)
	}
	// The same credential may feed the same variable from another connector.
	if err := b.Bind(t.Context(), Binding{Connector: "local://me/linear-beta", Credential: "linear", Env: "API_KEY"}); err != nil {
		t.Errorf("same credential, same env: %v", err)
	}
	err := b.Bind(t.Context(), Binding{Connector: testkit.GoogleFQN, Credential: "google_mail", Env: "API_KEY"})
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "API_KEY") {
		t.Errorf("another credential, same env: %v, want state.ErrConflict naming API_KEY", err)
	}
	err = b.Bind(t.Context(), Binding{Connector: testkit.GoogleFQN, Credential: "google_mail", Env: "GOOGLE_KEY,API_KEY"})
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "API_KEY") {
		t.Errorf("another credential, a list holding the same env: %v, want state.ErrConflict naming API_KEY", err)
	}
	// Rebinding the connector that owns the variable to another credential is fine.
	if err := b.Bind(t.Context(), Binding{Connector: testkit.LinearFQN, Credential: "linear-2", Env: "OTHER_KEY"}); err != nil {
		t.Errorf("rebinding: %v", err)
	}
}

func TestBindingsBeforeOpen(t *testing.T) {
	b := &Bindings{DB: testkit.OpenDB(t, filepath.Join(t.TempDir(), state.FileName))}
	if err := b.Bind(t.Context(), Binding{Connector: testkit.LinearFQN, Credential: "linear"}); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Bind = %v, want state.ErrNotOpen", err)
	}
	if err := b.Unbind(t.Context(), testkit.LinearFQN); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Unbind = %v, want state.ErrNotOpen", err)
	}
	if _, ok := b.Get(testkit.LinearFQN); ok || b.List() != nil {
		t.Error("Get or List before Open returned bindings")
	}
	if err := (&Bindings{}).Open(t.Context()); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("Open without DB = %v, want state.ErrInvalidArgument", err)
	}
}
