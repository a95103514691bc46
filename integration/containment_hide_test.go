//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/nstest"
)

// TestSandboxRunHidesTheDaemonsPaths: a command run as root in a fenced
// sandbox sees none of what the running daemon keeps (its home, and an
// audit directory and signing key its configuration file puts elsewhere),
// and cannot write the audit trail, whatever the launcher's own
// configuration says: launched with the daemon's --home (as the README
// shows) or with another home altogether, reaching the daemon's socket.
func TestSandboxRunHidesTheDaemonsPaths(t *testing.T) {
	elsewhere := t.TempDir()
	audit, key := filepath.Join(elsewhere, "audit"), filepath.Join(elsewhere, "keys", "audit.key")
	if err := os.Mkdir(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	d := startDaemonIn(t, nstest.New(t), map[string]any{
		"proxy": map[string]any{"listen": "127.0.0.1:0"},
		"admin": map[string]any{"web_listen": ""},
		"audit": map[string]any{"dir": audit, "key_file": key},
		"log":   map[string]any{"level": "debug"},
	})
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(d.cli(t, "session", "create", "--name", "hide", "--json")), &info); err != nil || info.ID == "" {
		t.Fatalf("session create: %v", err)
	}
	script := `echo "audit=$(ls -A '` + audit + `' 2>/dev/null | wc -l)"
echo "key=$(cat '` + key + `' 2>/dev/null | wc -c)"
echo "home=$(ls -A '` + d.home + `' 2>/dev/null | wc -l)"
if touch '` + audit + `/forged.jsonl' 2>/dev/null; then echo write=yes; else echo write=no; fi`
	otherHome := t.TempDir()
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"the daemon's --home", cleanEnv(d.home)},
		{"another home, the daemon's socket", append(cleanEnv(otherHome), "AILERON_ADMIN__SOCKET="+filepath.Join(d.home, "admin.sock"))},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, d.s.bin, "sandbox", "run", "--session", info.ID, "--user", "root", "--", "sh", "-c", script)
		cmd.Env, cmd.Dir = c.env, "/"
		out, err := cmd.CombinedOutput()
		cancel()
		got := strings.Fields(string(out))
		if err != nil || strings.Join(got, " ") != "audit=0 key=0 home=0 write=no" {
			t.Errorf("launched with %s, a root command saw: %v %q; want the daemon's home, audit directory and key hidden, the trail unwritable", c.name, err, out)
		}
	}
}
