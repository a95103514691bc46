package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFleetKeyOneKeyPerFleet(t *testing.T) {
	db := openTestDB(t, filepath.Join(t.TempDir(), FileName))
	ctx := t.Context()
	nodeA := filepath.Join(t.TempDir(), "fleet.key")
	a, err := LoadFleetKey(ctx, db, nodeA)
	if err != nil {
		t.Fatalf("first node: %v", err)
	}
	if fi, err := os.Stat(nodeA); err != nil || fi.Mode().Perm() != 0o600 || !a.Created {
		t.Fatalf("fleet key file: %v, %v, created %v; want mode 0600, made by this call", fi, err, a.Created)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(nodeA), ".fleet.key.new-*")); len(left) != 0 {
		t.Fatalf("temporary key files left: %v", left)
	}
	// A node without the file, once the fleet has a key: told to copy it.
	nodeB := filepath.Join(t.TempDir(), "fleet.key")
	if _, err := LoadFleetKey(ctx, db, nodeB); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "copy the fleet key file") {
		t.Fatalf("node without the key = %v; want ErrConflict saying to copy it", err)
	}
	if _, err := os.Stat(nodeB); err == nil {
		t.Fatal("a refused node was left a key file")
	}
	// A node with a copy: the same derivations.
	raw, _ := os.ReadFile(nodeA)
	if err := os.WriteFile(nodeB, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := LoadFleetKey(ctx, db, nodeB)
	if err != nil {
		t.Fatalf("node with a copy: %v", err)
	}
	if a.ID() != b.ID() || b.Created || !bytes.Equal(a.Derive("p", "s_1", 32), b.Derive("p", "s_1", 32)) {
		t.Fatal("two nodes with one key derive differently")
	}
	if bytes.Equal(a.Derive("p", "s_1", 32), a.Derive("p", "s_2", 32)) || bytes.Equal(a.Derive("p", "s_1", 32), a.Derive("q", "s_1", 32)) {
		t.Fatal("distinct contexts or purposes derive the same bytes")
	}
	// A node with another key: refused.
	nodeC := filepath.Join(t.TempDir(), "fleet.key")
	if err := os.WriteFile(nodeC, bytes.Repeat([]byte{1}, KeySize), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFleetKey(ctx, db, nodeC); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "is not the key of the fleet") {
		t.Fatalf("node with another key = %v; want ErrConflict", err)
	}
	// A key file others may read: refused.
	if err := os.Chmod(nodeB, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFleetKey(ctx, db, nodeB); !errors.Is(err, ErrInsecureFile) {
		t.Fatalf("readable fleet key = %v; want ErrInsecureFile", err)
	}
}
