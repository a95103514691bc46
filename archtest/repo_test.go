package archtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes bounds a tracked file outside testdata/: anything larger
// is build output or a data dump that does not belong in git.
const maxTrackedBytes = 1 << 20

// binaryMagics are the first bytes of executables, objects and archives a
// Go build or a C toolchain writes; none of them belongs in git outside
// testdata/.
var binaryMagics = [][]byte{
	[]byte("\x7fELF"),        // Linux, BSD
	{0xcf, 0xfa, 0xed, 0xfe}, // Mach-O 64-bit
	{0xce, 0xfa, 0xed, 0xfe}, // Mach-O 32-bit
	{0xca, 0xfe, 0xba, 0xbe}, // Mach-O universal
	[]byte("MZ"),             // Windows PE
	[]byte("!<arch>\n"),      // ar archives (.a, Go's .a)
	[]byte("\x00asm"),        // WebAssembly
	[]byte("mode: set\n"),    // go test -coverprofile output
	[]byte("mode: atomic\n"), // go test -coverprofile -race output
	[]byte("mode: count\n"),  // go test -covermode=count output
}

// TestNoBuildOutputTracked fails when git tracks a build product (an
// executable, an archive, a coverage profile) or any file over 1 MiB
// outside a testdata/ directory. A 33 MB binary once sat at the root.
func TestNoBuildOutputTracked(t *testing.T) {
	root, files := trackedFiles(t)
	if len(files) == 0 {
		t.Fatal("git ls-files listed nothing: the check would pass vacuously")
	}
	for _, rel := range files {
		if isTestData(rel) {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if fi.Size() > maxTrackedBytes {
			t.Errorf("%s is tracked and is %d bytes (limit %d outside testdata/): build output or data does not belong in git; "+
				"git rm --cached it and add it to .gitignore", rel, fi.Size(), maxTrackedBytes)
			continue
		}
		if magic := binaryMagic(t, p); magic != "" {
			t.Errorf("%s is tracked and starts like %s: build output does not belong in git; git rm --cached it and add it to .gitignore", rel, magic)
		}
	}
}

// trackedFiles returns the repository root and its tracked paths.
func trackedFiles(t *testing.T) (string, []string) {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && strings.Contains(string(ee.Stderr), "not a git repository") {
			t.Skip("not a git checkout: nothing is tracked, so nothing to check")
		}
		t.Fatalf("git rev-parse: %v (the check needs git)", err)
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return root, files
}

func isTestData(rel string) bool {
	return strings.HasPrefix(rel, "testdata/") || strings.Contains(rel, "/testdata/")
}

// binaryMagic names the kind of build product p starts like, or "".
func binaryMagic(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 32)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	head = head[:n]
	for _, m := range binaryMagics {
		if bytes.HasPrefix(head, m) {
			return strings.TrimSpace(strings.ToValidUTF8(string(m), "?"))
		}
	}
	return ""
}

func TestBinaryMagic(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		content []byte
		binary  bool
	}{
		{"elf", []byte("\x7fELF\x02\x01\x01rest"), true},
		{"pe", []byte("MZ\x90\x00"), true},
		{"cover", []byte("mode: atomic\nfoo.go:1.1,2.2 1 1\n"), true},
		{"go", []byte("package main\n"), false},
		{"empty", nil, false},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.content, 0o644); err != nil {
			t.Fatal(err)
		}
		if got := binaryMagic(t, p) != ""; got != c.binary {
			t.Errorf("%s: binary = %v, want %v", c.name, got, c.binary)
		}
	}
	for rel, want := range map[string]bool{"testdata/x": true, "integration/testdata/pki/a.pem": true, "docs/testdata.md": false, "aileron": false} {
		if got := isTestData(rel); got != want {
			t.Errorf("isTestData(%q) = %v, want %v", rel, got, want)
		}
	}
}
