package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// npmClients returns the directory holding node_modules with the pinned
// agents and SDKs of testdata/npm (Claude Code, Codex, Gemini CLI, the
// Anthropic, OpenAI and Gemini SDKs, and undici, ws and https-proxy-agent,
// through which the SDKs are given the proxy), as scripts/test-deps.sh installs them:
// $AILERON_TEST_NPM_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/aileron/test-npm)
// /<first 16 hex of the lock file's SHA-256>, complete when it holds a file
// named ok. A missing install fails the test; it never skips it.
func npmClients(t *testing.T) string {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join("testdata", "npm", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	root := os.Getenv("AILERON_TEST_NPM_CACHE")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			cache = filepath.Join(home, ".cache")
		}
		root = filepath.Join(cache, "aileron", "test-npm")
	}
	dir := filepath.Join(root, hex.EncodeToString(sum[:])[:16])
	if _, err := os.Stat(filepath.Join(dir, "ok")); err != nil {
		t.Fatalf("the pinned npm clients are not installed in %s (%v); run `make test-deps` (scripts/test-deps.sh)", dir, err)
	}
	return dir
}

// npmBin returns the path of the named executable of the pinned npm
// clients (claude, codex, gemini).
func npmBin(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(npmClients(t), "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed with the pinned npm clients: %v; run `make test-deps`", name, err)
	}
	return p
}

// TestNPMClientsRun runs each pinned agent's --version in a network
// namespace of its own with no interface up, so nothing it does can reach
// any network: the install is complete and the binaries run on this
// machine's Node.
func TestNPMClientsRun(t *testing.T) {
	for _, tc := range []struct{ bin, want string }{
		{"claude", "2.1.197"},
		{"codex", "0.171.0"},
		{"gemini", "0.61.0"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			cmd := exec.Command(npmBin(t, tc.bin), "--version")
			cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=/usr/bin:/bin", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.want) {
				t.Fatalf("%s --version: %v\n%s", tc.bin, err, out)
			}
		})
	}
}
