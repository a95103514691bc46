package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConnectorInstallActionPins: an action requiring another connector by
// a wrong hash or a placeholder is refused by `connector install`; with
// --allow-unpinned the placeholder is accepted and the action is shown as
// unpinned by install and by `connector list`.
func TestConnectorInstallActionPins(t *testing.T) {
	home := t.TempDir()
	google := t.TempDir()
	writeFile(t, google, "aileron.connector.v1.json", mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json")))
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", google)
	m := regexp.MustCompile(`sha256:([0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("install google: exit %d\n%s%s", code, out, errOut)
	}
	ghash := m[1]
	linear := func(hash string) string {
		pkg := t.TempDir()
		writeFile(t, pkg, "aileron.connector.v1.json", mustRead(t, filepath.Join("..", "..", "action", "testdata", "linear", "aileron.connector.v1.json")))
		writeFile(t, pkg, "actions/triage/action.md", strings.Replace(triageAction, "HASH", hash, 1))
		return pkg
	}
	wrong := strings.Repeat("0", 64)
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", linear("sha256:"+wrong))
	if code != 1 || !strings.Contains(errOut, "requires.connectors[1] github://acme/aileron-connector-google@1.2.3: the hash is sha256:"+wrong+
		" but the installed package's hash is sha256:"+ghash) {
		t.Fatalf("wrong hash: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", linear("sha256:bound-at-release"))
	if code != 1 || !strings.Contains(errOut, `hash "sha256:bound-at-release" is a placeholder`) || !strings.Contains(errOut, "--allow-unpinned") {
		t.Fatalf("placeholder without the flag: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", "--allow-unpinned", linear("sha256:bound-at-release"))
	if code != 0 || !strings.Contains(out, "actions: triage (UNPINNED: github://acme/aileron-connector-google@1.2.3 by a placeholder hash)") {
		t.Fatalf("placeholder with the flag: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "connector", "list")
	if code != 0 || !strings.Contains(out, "UNPINNED: action triage of github://acme/aileron-connector-linear@1.0.0 requires github://acme/aileron-connector-google@1.2.3 by a placeholder hash") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = runCLI(t, home, "connector", "remove", "github://acme/aileron-connector-linear@1.0.0"); code != 0 {
		t.Fatalf("remove: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", linear("sha256:"+ghash))
	if code != 0 || !strings.Contains(out, "actions: triage (pinned)") {
		t.Fatalf("pinned: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ = runCLI(t, home, "connector", "list"); strings.Contains(out, "UNPINNED") {
		t.Fatalf("list shows a pinned action as unpinned:\n%s", out)
	}
}

// triageAction is a Linear action that also requires the Google
// connector by HASH.
const triageAction = `+++
name = "triage"
version = "1.0.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "self"
capabilities = ["network:api.linear.test:443", "credential:api_key"]

[[requires.connectors]]
name = "github://acme/aileron-connector-google"
version = "1.2.3"
hash = "HASH"
capabilities = ["network:gmail.googleapis.com:443"]

[[execute]]
id = "issue"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"
+++
Looks an issue up.
`

func writeFile(t *testing.T, dir, rel, body string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
