package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/config"
	"github.com/rs/zerolog"
)

func runCLI(t *testing.T, home string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("AILERON_HOME", home)
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndExitCodes(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "Usage:"},
		{[]string{"help"}, 0, "aileron session create"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"session"}, 2, "aileron session list [--json]"},
		{[]string{"help", "help"}, 0, "aileron session create"},
		{[]string{"session", "env"}, 2, "exactly one session ID"},
		{[]string{"connector", "remove"}, 2, "FQN@VERSION"},
		{[]string{"config", "defaults"}, 0, "proxy:"},
		{[]string{"config", "print"}, 0, "listen: 127.0.0.1:9080"},
		{[]string{"session", "list"}, 1, "is `aileron daemon` running?"},
		{[]string{"approvals", "--help"}, 0, "aileron approvals list [--state S] [--session ID]"},
		{[]string{"session", "-h"}, 0, "aileron session render ID"},
		{[]string{"help", "audit"}, 0, "aileron audit verify"},
		{[]string{"help", "approvals"}, 0, "show ID [--raw | --json]"},
		{[]string{"help", "daemon"}, 0, "Usage: aileron daemon"},
		{[]string{"help", "frob"}, 2, `unknown command "frob"`},
		{[]string{"sesion", "list"}, 2, `unknown command "sesion": did you mean "aileron session"?`},
		{[]string{"session", "lst"}, 2, `unknown subcommand "lst": did you mean "aileron session list"?`},
		{[]string{"approvals", "aprove", "ap_1"}, 2, `did you mean "aileron approvals approve"?`},
		{[]string{"credential", "bnd"}, 2, `did you mean "aileron credential bind"?`},
		{[]string{"connector", "frobnicate"}, 2, "(want install, list, verify, remove, approve, lock or statement; see aileron connector --help)"},
		{[]string{"trust", "add", "github://acme"}, 2, "want one AUTHORITY and --signers FILE"},
		{[]string{"trust", "lst"}, 2, `did you mean "aileron trust list"?`},
		{[]string{"connector", "install", "github://acme/google@1.2.3"}, 1, "no store.sources are configured: connector install reads them (and upstream.*, egress.*) from the config file --config names"},
		{[]string{"trust", "add", "github://acme", "--signers", "/nonexistent/acme.allowed_signers"}, 1, "--signers: open /nonexistent/acme.allowed_signers: no such file or directory; give the authority's allowed_signers file"},
		{[]string{"credential", "login", "--help"}, 0, "the authorization code flow with PKCE (S256)"},
		{[]string{"version"}, 0, "aileron "},
		{[]string{"version", "--json"}, 0, `"go": "go1.`},
		{[]string{"version", "extra"}, 2, "want no arguments"},
		{[]string{"help", "version"}, 0, "Usage: aileron version [--json]"},
		{[]string{"health"}, 1, "is `aileron daemon` running?"},
		{[]string{"helth"}, 2, `did you mean "aileron health"?`},
		{[]string{"audit", "tail", "--decision", "alow"}, 2, `did you mean "allow"?`},
		{[]string{"audit", "tail", "--event", "connector.proxy.rejectd"}, 2, `did you mean "connector.proxy.rejected"?`},
		{[]string{"audit", "tail", "--event", "nope.*"}, 2, "names no audit event"},
		{[]string{"audit", "tail", "--since", "5"}, 2, "a duration needs a unit"},
	} {
		code, out, errOut := runCLI(t, home, c.args...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("aileron %v: exit %d, output %q; want exit %d mentioning %q", c.args, code, out+errOut, c.code, c.want)
		}
	}
}

// With no daemon running, connector commands work on the store directly,
// and a bad spec is refused with the file, JSON path and rule.
func TestConnectorCommandsOffline(t *testing.T) {
	home := t.TempDir()
	spec := filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json")
	// Nobody to ask: stdin is not a terminal, and there is no --yes.
	code, out, errOut := runCLI(t, home, "connector", "install", spec)
	if code != 2 || !strings.Contains(errOut, "stdin is not a terminal") || !strings.Contains(errOut, "--yes") ||
		!strings.Contains(errOut, "hosts:              gmail.googleapis.com:443") {
		t.Errorf("install without a terminal or --yes: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI(t, home, "connector", "list"); strings.Contains(out, "aileron-connector-google") {
		t.Fatalf("installed without consent:\n%s", out)
	}
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", spec)
	if code != 0 || !strings.Contains(out, "installed github://acme/aileron-connector-google@1.2.3 sha256:") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI(t, home, "connector", "list"); code != 0 || !strings.Contains(out, "aileron-connector-google  1.2.3    yes") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	body := strings.Replace(mustRead(t, spec), `"gmail.googleapis.com"`, `"https://gmail.googleapis.com/path"`, 1)
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runCLI(t, home, "connector", "install", "--yes", bad)
	if code != 1 || !strings.Contains(errOut, "bad.json") || !strings.Contains(errOut, "hosts[0]") || !strings.Contains(errOut, "scheme") {
		t.Errorf("bad spec: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ = runCLI(t, home, "connector", "verify"); code != 0 || !strings.Contains(out, "match their content hashes") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
	if code, out, _ = runCLI(t, home, "connector", "remove", "github://acme/aileron-connector-google@1.2.3"); code != 0 {
		t.Errorf("remove: exit %d\n%s", code, out)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadmeCommandsAreTheUsage: README's Commands block is the usage text
// `aileron help` prints, line for line, so the two cannot drift.
func TestReadmeCommandsAreTheUsage(t *testing.T) {
	readme := mustRead(t, filepath.Join("..", "..", "README.md"))
	_, block, ok := strings.Cut(readme, "## Commands\n\n```\n")
	block, _, _ = strings.Cut(block, "```")
	lines := strings.Split(usage[strings.Index(usage, "Usage:\n")+len("Usage:\n"):strings.Index(usage, "\n\nEvery command")], "\n")
	for i := range lines {
		lines[i] = strings.TrimPrefix(lines[i], "  ")
	}
	if want := strings.Join(lines, "\n") + "\n"; !ok || block != want {
		t.Errorf("README's Commands block differs from the usage text; paste this:\n%s", want)
	}
}

// TestAdvertise: proxy_url names proxy.advertise, else the bound address,
// but never a wildcard no client can dial (then the host name, warned).
func TestAdvertise(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct{ advertise, bound, want string }{
		{"", "127.0.0.1:9080", "127.0.0.1:9080"},
		{"aileron:9080", "0.0.0.0:9080", "aileron:9080"},
		{"", "0.0.0.0:9080", net.JoinHostPort(host, "9080")},
		{"", "[::]:9080", net.JoinHostPort(host, "9080")},
	} {
		var logs strings.Builder
		log := zerolog.New(&logs)
		d := &daemon{cfg: &config.Config{Proxy: config.Proxy{Advertise: tc.advertise}}, log: &log}
		if got := d.advertise(tc.bound); got != tc.want {
			t.Errorf("advertise %q, bound %s: %s, want %s", tc.advertise, tc.bound, got, tc.want)
		}
		if warned := strings.Contains(logs.String(), "proxy.advertise_guessed"); warned != (tc.advertise == "" && tc.bound != "127.0.0.1:9080") {
			t.Errorf("advertise %q, bound %s: warned %v: %s", tc.advertise, tc.bound, warned, logs.String())
		}
	}
}

// TestCompletions: the candidates the completion scripts get for the word
// being completed.
func TestCompletions(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"se"}, "session"},
		{[]string{"ap"}, "approvals"},
		{[]string{"help", "co"}, "completion config connector"},
		{[]string{"session", ""}, "create delete env list render"},
		{[]string{"approvals", "test"}, "test-webhooks"},
		{[]string{"session", "create", "--n"}, "--name"},
		{[]string{"audit", "tail", "--json", "--s"}, "--session --since"},
		{[]string{"daemon", "--c"}, "--config --cpu-profile"},
		{[]string{"session", "env", ""}, ""},
		{[]string{"__"}, ""},
		{[]string{"completion", ""}, "bash fish zsh"},
	} {
		if got := strings.Join(completions(tc.words), " "); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.words, got, tc.want)
		}
	}
}

// TestWatchNumbersStay: an approval keeps the number it was shown with;
// when one before it is decided meanwhile, "a 2" does not fall on the next
// one.
func TestWatchNumbersStay(t *testing.T) {
	w := &watcher{}
	a, b, c := approvals.Approval{ID: "ap_a"}, approvals.Approval{ID: "ap_b"}, approvals.Approval{ID: "ap_c"}
	for _, ap := range []approvals.Approval{a, b, c} {
		w.num(ap.ID)
	}
	w.list = []approvals.Approval{b, c} // ap_a was decided elsewhere
	if got, ok := w.pick("2"); !ok || got.ID != "ap_b" {
		t.Fatalf("2 picks %v %v, want ap_b", got.ID, ok)
	}
	if _, ok := w.pick("1"); ok {
		t.Fatal("1 (decided meanwhile) picks another approval")
	}
	if got, ok := w.pick("ap_c"); !ok || got.ID != "ap_c" {
		t.Fatalf("an id picks %v", got.ID)
	}
	if w.num("ap_d") != 4 {
		t.Fatal("a new approval reuses a number")
	}
}

// TestConnectorInstallFromStdin: `connector install -` takes a spec's JSON
// on stdin (an image without a shell), and leaves no file behind.
func TestConnectorInstallFromStdin(t *testing.T) {
	home := t.TempDir()
	t.Setenv("AILERON_HOME", home)
	spec := mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json"))
	var out, errb bytes.Buffer
	if code := run([]string{"connector", "install", "--yes", "-"}, strings.NewReader(spec), &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "installed github://acme/aileron-connector-linear@") {
		t.Fatalf("install -: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if left, _ := filepath.Glob(filepath.Join(home, "stdin-spec-*")); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	out.Reset()
	if code := run([]string{"connector", "install", "--yes", "-"}, strings.NewReader("{not json"), &out, &errb); code == 0 {
		t.Fatal("a bad spec on stdin was installed")
	}
}

// A command without flags has no empty "Flags:" heading in its usage.
func TestUsageWithoutFlags(t *testing.T) {
	code, out, errOut := runCLI(t, t.TempDir(), "connector", "statement", "--help")
	if code != 0 || strings.Contains(out+errOut, "Flags:") || !strings.HasSuffix(out+errOut, "\"Signing a package\".\n") {
		t.Errorf("connector statement --help: exit %d\n%s%s", code, out, errOut)
	}
}
