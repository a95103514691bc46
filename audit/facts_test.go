package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFactsSeeADeletedOrCutFile: the check each write call makes reads
// the open file's names and size, whatever way it reads them.
func TestFactsSeeADeletedOrCutFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		read func(file) (fileFacts, error)
	}{{"facts", facts}, {"stat", statFacts}} {
		t.Run(tc.name, func(t *testing.T) {
			f, p := fileOfALine(t)
			ff, err := tc.read(f)
			if err != nil || !ff.linksKnown || ff.links != 1 || !ff.regular || ff.size != 5 {
				t.Fatalf("open file: %+v, %v; want 1 link, regular, 5 bytes", ff, err)
			}
			if err := os.Truncate(p, 2); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			ff, err = tc.read(f)
			if err != nil || !ff.linksKnown || ff.links != 0 || ff.size != 2 {
				t.Fatalf("cut and deleted: %+v, %v; want 0 links, 2 bytes", ff, err)
			}
		})
	}
}

// fileOfALine is a new file holding "line\n", open for appending (closed
// at the test's end), and its path.
func fileOfALine(t *testing.T) (*os.File, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write([]byte("line\n")); err != nil {
		t.Fatal(err)
	}
	return f, p
}
