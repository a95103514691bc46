package pkgsource

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUnpack feeds Unpack arbitrary bytes: it never panics, and whatever
// it accepts is a tree of regular files and directories inside dir, within
// the limits.
func FuzzUnpack(f *testing.F) {
	f.Add(archive(f, entry{name: spec, body: "{}"}))
	f.Add(archive(f, entry{name: "p/", typ: tar.TypeDir}, entry{name: "p/" + spec, body: "{}"}, entry{name: "p/bin/x", body: "#!", mode: 0o755}))
	f.Add(archive(f, entry{name: "a", body: "x"}, entry{name: "../b", body: "y"}))
	f.Add(archive(f, entry{name: "l", typ: tar.TypeSymlink, link: "/etc"}))
	f.Add(archive(f, entry{name: "pax_global_header", typ: tar.TypeXGlobalHeader}, entry{name: "./a/b", body: "c"}))
	f.Add([]byte("\x1f\x8b"))
	lim := limits{fileSize: 4 << 10, totalSize: 16 << 10, files: 50, dirs: 50, stream: 256 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "pkg")
		root, err := unpack(bytes.NewReader(data), dir, lim)
		if ents, _ := os.ReadDir(parent); len(ents) > 1 {
			t.Fatalf("wrote beside dir: %v", ents)
		}
		if err != nil {
			return
		}
		if root != dir && filepath.Dir(root) != dir {
			t.Fatalf("root %s is not dir or a directory in it", root)
		}
		var n int
		var total int64
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !strings.HasPrefix(p, dir) {
				t.Fatalf("walked outside dir: %s", p)
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				t.Fatalf("%s is %v, not a regular file", p, d.Type())
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			n++
			total += info.Size()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 || n > lim.files || total > lim.totalSize {
			t.Fatalf("accepted %d files, %d bytes; limits %d files, %d bytes", n, total, lim.files, lim.totalSize)
		}
	})
}
