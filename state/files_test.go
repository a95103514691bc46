package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys", "k.key")
	k1, err := LoadOrCreateKey(p, "test key")
	if err != nil || len(k1) != KeySize {
		t.Fatalf("create: %d bytes, %v", len(k1), err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Dir(p)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("key directory mode %v, %v; want 0700", fi.Mode(), err)
	}
	k2, err := LoadOrCreateKey(p, "test key")
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("reload gave another key (%v)", err)
	}
	for _, tc := range []struct {
		name, says string
		data       []byte
		perm       os.FileMode
		want       error
	}{
		{"readable by others", "chmod 600", make([]byte, KeySize), 0o644, ErrInsecureFile},
		{"wrong size", "want 32", []byte("short"), 0o600, ErrCorruptState},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, tc.perm); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, tc.perm)
		if _, err := LoadOrCreateKey(p, "test key"); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
}

func TestRandomIDIsValid(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := RandomID("x_", 20)
		if err != nil || !ValidID(id, "x_", 20) || seen[id] {
			t.Fatalf("RandomID = %q, %v (valid %v, repeated %v)", id, err, ValidID(id, "x_", 20), seen[id])
		}
		seen[id] = true
	}
	for _, bad := range []string{"", "x_", "y_aaaaaaaaaaaaaaaaaaaa", "x_aaaaaaaaaaaaaaaaaaa", "x_../aaaaaaaaaaaaaaaaa", "x_AAAAAAAAAAAAAAAAAAAA"} {
		if ValidID(bad, "x_", 20) {
			t.Errorf("ValidID(%q) = true", bad)
		}
	}
}

// TestCheckPrivateFileFollowsLinks: a link is judged by the file it leads
// to (a Kubernetes secret volume's files are links into ..data): a link to
// a private file passes, a link to one others can read is refused, naming
// both and what to chmod; a directory is refused.
func TestCheckPrivateFileFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		perm os.FileMode
		ok   bool
	}{{"private", 0o400, true}, {"shared", 0o644, false}} {
		target := filepath.Join(data, c.name)
		if err := os.WriteFile(target, []byte("s"), c.perm); err != nil {
			t.Fatal(err)
		}
		_ = os.Chmod(target, c.perm)
		link := filepath.Join(dir, c.name+".secret")
		if err := os.Symlink(filepath.Join("..data", c.name), link); err != nil {
			t.Fatal(err)
		}
		err := CheckPrivateFile(link, "secret_file")
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: a link to a 0%o file was refused: %v", c.name, c.perm, err)
		case !c.ok && (!errors.Is(err, ErrInsecureFile) || !strings.Contains(err.Error(), "a link to "+target) ||
			!strings.Contains(err.Error(), "chmod 600 "+target) || !strings.Contains(err.Error(), "defaultMode")):
			t.Errorf("%s: %v; want ErrInsecureFile naming the link's target and the fix", c.name, err)
		}
	}
	if err := CheckPrivateFile(data, "secret_file"); !errors.Is(err, ErrInsecureFile) {
		t.Errorf("a directory: %v, want ErrInsecureFile", err)
	}
}
