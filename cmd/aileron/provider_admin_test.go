package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/providers"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// providerHome serves the admin API of a home of its own (the connector
// store, the vault and the bindings, real, on the home's database) on the
// home's admin socket, as the daemon does, sets AILERON_HOME to it and
// returns it and the API's client.
func providerHome(t *testing.T) (string, *admin.Client) {
	t.Helper()
	home := t.TempDir()
	t.Setenv("AILERON_HOME", home)
	db := testkit.OpenDB(t, filepath.Join(home, state.FileName))
	vault := &credentials.Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key"), DB: db}
	if err := vault.Open(); err != nil {
		t.Fatal(err)
	}
	binds := &credentials.Bindings{DB: db}
	if err := binds.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := &admin.API{Store: &store.Store{Dir: filepath.Join(home, "store"), DB: db}, Vault: vault, Bindings: binds}
	sock := filepath.Join(home, "admin.sock")
	ln, err := admin.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: api.Handler(), ConnContext: admin.ConnContext}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return home, &admin.Client{Socket: sock}
}

// providerCLI runs `aileron ARGS…` with stdin.
func providerCLI(stdin string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// installed lists the installed versions of fqn ("VERSION active" or
// "VERSION").
func installed(t *testing.T, c *admin.Client, fqn string) []string {
	t.Helper()
	list, err := c.ListConnectors(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range list {
		if i.FQN == fqn {
			out = append(out, i.Version+map[bool]string{true: " active", false: ""}[i.Active])
		}
	}
	return out
}

// TestProviderAddChecksFirst: a bad --env (and a bad --name or --host) is
// refused before the package is installed or the key stored, with exit 2
// naming the flag.
func TestProviderAddChecksFirst(t *testing.T) {
	_, c := providerHome(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--name", "w", "--host", "w.example", "--env", "foo-bar"}, `--env: env "foo-bar" must match`},
		{[]string{"--name", "w", "--host", "w.example", "--env", "OK_KEY,HTTPS_PROXY"}, "--env: env HTTPS_PROXY is set by aileron"},
		{[]string{"--name", "W", "--host", "w.example"}, `--name "W"`},
		{[]string{"--name", "w", "--host", "w.example/v1"}, `--host "w.example/v1"`},
	} {
		code, _, errOut := providerCLI("k\n", append([]string{"provider", "add", "openai-compatible"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("provider add openai-compatible %v: exit %d, %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if got := installed(t, c, "local://openai-compatible/w"); len(got) != 0 {
		t.Errorf("refused adds installed %v", got)
	}
	if creds, err := c.ListCredentials(t.Context()); err != nil || len(creds) != 0 {
		t.Errorf("refused adds stored credentials %v (%v)", creds, err)
	}
}

// TestProviderAddNewHost: adding an OpenAI-compatible provider again
// with another host replaces its package (the next version, the old one
// removed); adding it again unchanged changes nothing; a clash with
// another provider is one line saying what to do; provider remove
// uninstalls and unbinds it and keeps the key.
func TestProviderAddNewHost(t *testing.T) {
	_, c := providerHome(t)
	const fqn = "local://openai-compatible/v"
	for _, step := range []struct {
		host, want string
		versions   []string
	}{
		{"a.example", "OPENAI_BASE_URL=https://a.example/v1", []string{"1.0.0 active"}},
		{"b.example:8443", "OPENAI_BASE_URL=https://b.example:8443/v1", []string{"1.0.1 active"}},
		{"b.example:8443", "@1.0.1 installed", []string{"1.0.1 active"}},
		{"a.example", "@1.0.2 installed", []string{"1.0.2 active"}},
	} {
		code, out, errOut := providerCLI("k\n", "provider", "add", "openai-compatible", "--name", "v", "--host", step.host)
		if code != 0 || !strings.Contains(out, step.want) {
			t.Fatalf("provider add --host %s: exit %d\n%s%s", step.host, code, out, errOut)
		}
		if got := installed(t, c, fqn); !slices.Equal(got, step.versions) {
			t.Errorf("after --host %s: installed %v, want %v", step.host, got, step.versions)
		}
	}
	// The command is the consent to each package it wrote, a new host
	// included: recorded as provider add, never quarantined.
	cons, err := c.ConnectorConsents(t.Context())
	if err != nil || len(cons) != 1 || cons[0].Ref() != fqn+"@1.0.2" || cons[0].Via != store.ViaProvider ||
		!strings.HasPrefix(cons[0].By, "uid ") {
		t.Errorf("consents after provider add = %+v, %v; want %s@1.0.2 via provider add", cons, err, fqn)
	}
	code, _, errOut := providerCLI("k\n", "provider", "add", "openai-compatible", "--name", "w", "--host", "a.example")
	want := "aileron provider: provider w cannot be installed: its host a.example clashes with connector local://openai-compatible/v; " +
		"choose another --host or --name, or remove the other first (`aileron provider remove v`)\n"
	if code != 1 || errOut != want {
		t.Errorf("a host clash: exit %d\n%s\nwant one line:\n%s", code, errOut, want)
	}
	gmail := filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json")
	offer, err := c.OfferConnector(t.Context(), gmail)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InstallConnector(t.Context(), gmail, store.Consent{Hash: offer.Hash, Via: store.ViaYes}); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = providerCLI("k\n", "provider", "add", "openai-compatible", "--name", "google", "--host", "g.example")
	want = "aileron provider: provider google cannot be installed: its name (the tool google) clashes with connector github://acme/aileron-connector-google; " +
		"choose another --host or --name, or remove the other first (`aileron connector remove github://acme/aileron-connector-google@VERSION`)\n"
	if code != 1 || errOut != want {
		t.Errorf("a name clash: exit %d\n%s\nwant one line:\n%s", code, errOut, want)
	}
	code, out, errOut := providerCLI("", "provider", "remove", "v")
	if code != 0 || !strings.Contains(out, "stays in the vault as credential openai-compatible-v") {
		t.Errorf("provider remove: exit %d\n%s%s", code, out, errOut)
	}
	if got := installed(t, c, fqn); len(got) != 0 {
		t.Errorf("after provider remove: installed %v", got)
	}
	if b, _ := c.ListBindings(t.Context()); len(b) != 0 {
		t.Errorf("after provider remove: bindings %v", b)
	}
	if code, _, errOut := providerCLI("", "provider", "remove", "v"); code != 1 || !strings.Contains(errOut, "provider v is not installed") {
		t.Errorf("provider remove again: exit %d, %q", code, errOut)
	}
}

// TestWarnLocalHost: provider add warns for localhost and literal
// loopback or private addresses, which need egress.allow_cidrs (and
// loopback is skipped by NO_PROXY); a name is not resolved.
func TestWarnLocalHost(t *testing.T) {
	for _, c := range []struct {
		host, want string
	}{
		{"127.0.0.1:8000", "is loopback"},
		{"localhost:11434", "is loopback"},
		{"[::1]:8443", "is loopback"},
		{"10.1.2.3", "is a private address"},
		{"192.168.1.20:8443", "is a private address"},
		{"100.64.0.7", "is a private address"},
		{"[fd00::5]", "is a private address"},
		{"llm.internal", ""},
		{"llm.example.com:8443", ""},
	} {
		p, err := providers.Compatible("vllm", c.host, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.host, err)
		}
		var w bytes.Buffer
		warnLocalHost(&w, p)
		if c.want == "" && w.Len() != 0 || c.want != "" && !strings.Contains(w.String(), c.want) {
			t.Errorf("--host %s: warning %q, want %q", c.host, w.String(), c.want)
		}
		if c.want != "" && (!strings.Contains(w.String(), "egress.allow_cidrs") || !strings.Contains(w.String(), "upstream.ca_files")) {
			t.Errorf("--host %s: warning %q does not say what the server needs", c.host, w.String())
		}
	}
}
