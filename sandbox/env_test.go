package sandbox

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
)

func testInfo() sessions.Info {
	return sessions.Info{
		ID:           "s_abcdefghijklmnopqrst",
		ProxyURL:     "http://s_abcdefghijklmnopqrst:tok-en_0123456789abcdefghijklmnopqr@127.0.0.1:9080",
		CACertPath:   "/home/o'brien/.aileron/sessions/s_abcdefghijklmnopqrst/ca.pem",
		CABundlePath: "/home/o'brien/.aileron/sessions/s_abcdefghijklmnopqrst/ca-bundle.pem",
	}
}

func TestEnv(t *testing.T) {
	info := testInfo()
	tests := []struct {
		apiURL string
		want   map[string]string
		absent []string
	}{
		{"", map[string]string{
			"HTTPS_PROXY": info.ProxyURL, "HTTP_PROXY": info.ProxyURL, "https_proxy": info.ProxyURL, "http_proxy": info.ProxyURL,
			"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
			"SSL_CERT_FILE": info.CABundlePath, "REQUESTS_CA_BUNDLE": info.CABundlePath, "CURL_CA_BUNDLE": info.CABundlePath,
			"NODE_EXTRA_CA_CERTS": info.CABundlePath, "GIT_SSL_CAINFO": info.CABundlePath,
			"NODE_USE_ENV_PROXY": "1", "AILERON_SESSION_ID": info.ID,
		}, []string{"AILERON_API_URL"}},
		{"https://aileron.internal/v1", map[string]string{"AILERON_API_URL": "https://aileron.internal/v1"}, nil},
	}
	for _, tt := range tests {
		got := map[string]string{}
		for _, v := range Env(info, tt.apiURL) {
			if _, dup := got[v.Name]; dup {
				t.Errorf("%s set twice", v.Name)
			}
			got[v.Name] = v.Value
		}
		for k, want := range tt.want {
			if got[k] != want {
				t.Errorf("apiURL %q: %s = %q, want %q", tt.apiURL, k, got[k], want)
			}
		}
		for _, k := range tt.absent {
			if _, ok := got[k]; ok {
				t.Errorf("apiURL %q: %s set", tt.apiURL, k)
			}
		}
	}
}

func TestRenderShell(t *testing.T) {
	vars := []EnvVar{{"A", "plain"}, {"B", "it's"}, {"C", ""}, {"D", "$(touch x) `y` \\ \"q\"\nline2"}}
	want := "export A='plain'\n" +
		"export B='it'\\''s'\n" +
		"export C=''\n" +
		"export D='$(touch x) `y` \\ \"q\"\nline2'\n"
	if got := RenderShell(vars); got != want {
		t.Errorf("RenderShell =\n%s\nwant\n%s", got, want)
	}
}

// TestRenderShellEvaluates runs the rendered script in a real POSIX shell and
// reads every value back: quoting must survive quotes, $, backquotes and
// newlines, and an invalid name must not inject a command.
func TestRenderShellEvaluates(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal("sh is required (run make test to install test dependencies)")
	}
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	vars := append(Env(testInfo(), "https://api.example/v1"),
		EnvVar{"TRICKY", "a'b\"c$(touch " + pwned + ")`touch " + pwned + "`\nd"},
		EnvVar{"BAD\ntouch " + pwned, "x"},
	)
	script := RenderShell(vars)
	for _, v := range vars[:len(vars)-1] {
		cmd := exec.Command(sh, "-c", script+`printf '%s' "$`+v.Name+`"`)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", v.Name, err, script)
		}
		if string(out) != v.Value {
			t.Errorf("%s read back as %q, want %q", v.Name, out, v.Value)
		}
	}
	if out, err := exec.Command("ls", dir).Output(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("rendered script ran a command: %s %v", out, err)
	}
}

// TestEnvNamesCannotBeBound: a credential binding may export a placeholder
// under an env name of its choice; none of the names Env sets itself may be
// taken, or a binding could turn the sandbox's proxy or trust settings off.
func TestEnvNamesCannotBeBound(t *testing.T) {
	db, err := state.Open(t.Context(), filepath.Join(t.TempDir(), state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	b := &credentials.Bindings{DB: db}
	if err := b.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, v := range Env(testInfo(), DefaultAPIURL) {
		if strings.ToUpper(v.Name) != v.Name {
			continue // lower-case twins: binding env names are upper case
		}
		err := b.Bind(t.Context(), credentials.Binding{Connector: "github://acme/aileron-connector-linear", Credential: "linear", Env: v.Name})
		if !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("binding env %s: %v, want it refused", v.Name, err)
		}
	}
}
