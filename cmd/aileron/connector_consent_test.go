package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeGmail writes the gmail spec at version v in a fresh directory,
// with its hosts replaced by hosts when not empty.
func writeGmail(t *testing.T, v, hosts string) string {
	t.Helper()
	spec := strings.Replace(mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json")),
		`"version": "1.2.3"`, `"version": "`+v+`"`, 1)
	if hosts != "" {
		spec = strings.Replace(spec, `"hosts": ["gmail.googleapis.com"]`, `"hosts": [`+hosts+`]`, 1)
	}
	p := filepath.Join(t.TempDir(), "gmail.json")
	if err := os.WriteFile(p, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConnectorLockOffline: the lock printed in one home installs the same
// package in a second home without a prompt; a changed package of the same
// version is refused naming both hashes, and one the lock lacks too.
func TestConnectorLockOffline(t *testing.T) {
	homeA, homeB := t.TempDir(), t.TempDir()
	v1 := writeGmail(t, "1.0.0", "")
	if code, out, errOut := runCLI(t, homeA, "connector", "install", "--yes", v1); code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	code, lock, errOut := runCLI(t, homeA, "connector", "lock")
	if code != 0 || !strings.Contains(lock, `name = "github://acme/aileron-connector-google"`) || !strings.Contains(lock, "lock_version = 1") {
		t.Fatalf("lock: exit %d\n%s%s", code, lock, errOut)
	}
	if _, again, _ := runCLI(t, homeA, "connector", "lock"); again != lock {
		t.Errorf("the lock is not deterministic:\n%s\n---\n%s", lock, again)
	}
	lockFile := filepath.Join(t.TempDir(), "aileron.lock")
	if err := os.WriteFile(lockFile, []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, homeB, "connector", "install", "--lock", lockFile, v1)
	if code != 0 || !strings.Contains(out, "installed github://acme/aileron-connector-google@1.0.0") {
		t.Fatalf("install --lock on a second home: exit %d\n%s%s", code, out, errOut)
	}
	if _, lockB, _ := runCLI(t, homeB, "connector", "lock"); lockB != lock {
		t.Errorf("the second home's lock differs:\n%s\n---\n%s", lock, lockB)
	}
	changed := writeGmail(t, "1.0.0", `"gmail.googleapis.com", "evil.example.com"`)
	code, _, errOut = runCLI(t, t.TempDir(), "connector", "install", "--lock", lockFile, changed)
	if code != 1 || !strings.Contains(errOut, "does not match the lock") || strings.Count(errOut, "sha256:") < 3 {
		t.Errorf("install --lock of a changed package: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, t.TempDir(), "connector", "install", "--lock", lockFile, writeGmail(t, "1.0.1", ""))
	if code != 1 || !strings.Contains(errOut, "is not in the lock") {
		t.Errorf("install --lock of a version the lock lacks: exit %d\n%s", code, errOut)
	}
	if code, _, errOut = runCLI(t, homeB, "connector", "install", "--yes", "--lock", lockFile, v1); code != 2 {
		t.Errorf("--yes with --lock: exit %d\n%s", code, errOut)
	}
}

// TestConnectorApproveOffline: a widening upgrade is installed quarantined
// (list says so); approve shows the difference and needs a terminal or
// --yes, then serves it.
func TestConnectorApproveOffline(t *testing.T) {
	home := t.TempDir()
	runCLI(t, home, "connector", "install", "--yes", writeGmail(t, "1.0.0", ""))
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", writeGmail(t, "1.1.0", `"gmail.googleapis.com", "evil.example.com"`))
	if code != 0 || !strings.Contains(out, "QUARANTINED") || !strings.Contains(out, `host "evil.example.com:443"`) ||
		!strings.Contains(errOut, "will be installed but QUARANTINED") {
		t.Fatalf("widening install: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ = runCLI(t, home, "connector", "list"); !strings.Contains(out, "1.1.0    quarantined") || !strings.Contains(out, "1.0.0    yes") {
		t.Errorf("list:\n%s", out)
	}
	ref := "github://acme/aileron-connector-google@1.1.0"
	code, _, errOut = runCLI(t, home, "connector", "approve", ref)
	if code != 2 || !strings.Contains(errOut, `+ host "evil.example.com:443"`) || !strings.Contains(errOut, "stdin is not a terminal") {
		t.Errorf("approve without a terminal: exit %d\n%s", code, errOut)
	}
	if code, out, errOut = runCLI(t, home, "connector", "approve", "--yes", ref); code != 0 || !strings.Contains(out, "approved "+ref) {
		t.Fatalf("approve --yes: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ = runCLI(t, home, "connector", "list"); !strings.Contains(out, "1.1.0    yes") {
		t.Errorf("list after approve:\n%s", out)
	}
}
