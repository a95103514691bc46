package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPrivateFileRefusesAnotherUsersFile: a mode 0600 file that
// belongs to another user than the daemon's is readable, and writable,
// by that user: docs/approvals.md says a secret file must belong to the
// user the daemon runs as, so it is refused, directly or through a link.
// (Run as root: the file is given to nobody, uid 65534.)
func TestCheckPrivateFileRefusesAnotherUsersFile(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "agent-made.secret")
	if err := os.WriteFile(other, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatalf("giving the file to uid 65534: %v (the test needs root)", err)
	}
	link := filepath.Join(dir, "hook.secret")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{other, link} {
		err := CheckPrivateFile(p, "secret_file")
		if !errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), "belongs to uid 65534") ||
			!strings.Contains(err.Error(), fmt.Sprintf("chown %d %s", os.Geteuid(), other)) {
			t.Errorf("%s (mode 0600, owned by uid 65534, the daemon is uid %d): %v; want ErrInsecureFile naming the owner and the chown", p, os.Geteuid(), err)
		}
	}
}
