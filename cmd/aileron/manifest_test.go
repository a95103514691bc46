package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A package whose manifest grants less than its spec reaches is refused by
// `aileron connector install`, naming each excess; one that matches
// installs and shows its grants, as does a spec without a manifest.
func TestConnectorInstallManifest(t *testing.T) {
	home := t.TempDir()
	spec := mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json"))
	pkg := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("aileron.connector.v1.json", spec)
	write("manifest.toml", "[connector]\nname = \"github://acme/aileron-connector-google\"\nversion = \"1.2.3\"\n"+
		"[capabilities.network]\nhosts = [\"www.googleapis.com:443\"]\n[capabilities.credential]\nkind = \"api_key\"\n")
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", pkg)
	for _, want := range []string{
		filepath.Join(pkg, "manifest.toml"),
		`reaches host "gmail.googleapis.com:443" (used by google/gmail.messages.search`,
		`reaches credential kind "oauth2"`,
		"add it to the manifest or remove it from the spec",
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("install: exit %d, stdout %q, stderr %q; want exit 1 naming %q", code, out, errOut, want)
		}
	}
	if _, out, _ := runCLI(t, home, "connector", "list"); strings.Contains(out, "aileron-connector-google") {
		t.Errorf("refused package is listed:\n%s", out)
	}

	write("manifest.toml", "[connector]\nname = \"github://acme/aileron-connector-google\"\nversion = \"1.2.3\"\n"+
		"[capabilities.network]\nhosts = [\"gmail.googleapis.com:443\"]\n[capabilities.credential]\nkind = \"oauth2\"\n")
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", pkg)
	if code != 0 || !strings.Contains(out, "grants (its manifest.toml): hosts gmail.googleapis.com:443; credential oauth2") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	linear := filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json")
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", linear)
	if code != 0 || !strings.Contains(out, "grants (no manifest: exactly what its spec reaches): hosts api.linear.app:443; credential") {
		t.Fatalf("install linear: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = runCLI(t, home, "connector", "list"); code != 0 ||
		!strings.Contains(out, "hosts gmail.googleapis.com:443; credential oauth2 (manifest)") ||
		!strings.Contains(out, "hosts api.linear.app:443; credential") || !strings.Contains(out, "(spec)") {
		t.Errorf("list: exit %d\n%s", code, out)
	}
}
