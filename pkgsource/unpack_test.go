package pkgsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tar entry a test archive holds.
type entry struct {
	name string
	typ  byte
	body string
	mode int64
	size int64  // when not 0, the declared size (else len(body))
	link string // for links
}

// archive builds a gzip'd tar of entries.
func archive(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link, Format: tar.FormatPAX}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if e.size != 0 {
			h.Size = e.size
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			h = &tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "0123abcd"}}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if h.Typeflag == tar.TypeReg && e.size == 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil && !strings.Contains(err.Error(), "missed writing") {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// files lists the regular files under root with their contents.
func files(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

const spec = "aileron.connector.v1.json"

func TestUnpackTakesFilesAndDirectories(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries []entry
		sub     string // the root Unpack returns, under dir
		want    map[string]string
	}{
		{"flat", []entry{{name: spec, body: "{}"}, {name: "actions/", typ: tar.TypeDir}, {name: "actions/a/action.md", body: "x"}},
			"", map[string]string{spec: "{}", "actions/a/action.md": "x"}},
		{"one top-level directory is stripped", []entry{{name: "google-1.2.3/", typ: tar.TypeDir}, {name: "google-1.2.3/" + spec, body: "{}"}, {name: "google-1.2.3/manifest.toml", body: "m"}},
			"google-1.2.3", map[string]string{spec: "{}", "manifest.toml": "m"}},
		{"a top-level directory named only through its files", []entry{{name: "pkg/" + spec, body: "{}"}},
			"pkg", map[string]string{spec: "{}"}},
		{"dot-slash names and a git archive header", []entry{{name: "pax_global_header", typ: tar.TypeXGlobalHeader}, {name: "./", typ: tar.TypeDir}, {name: "./" + spec, body: "{}"}},
			"", map[string]string{spec: "{}"}},
		{"a file beside the directory keeps the root", []entry{{name: "pkg/" + spec, body: "{}"}, {name: "README", body: "r"}},
			"", map[string]string{"pkg/" + spec: "{}", "README": "r"}},
		{"a directory listed after its files", []entry{{name: "a/b", body: "1"}, {name: "a/", typ: tar.TypeDir}, {name: "c", body: "2"}},
			"", map[string]string{"a/b": "1", "c": "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pkg")
			root, err := Unpack(bytes.NewReader(archive(t, c.entries...)), dir)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(dir, c.sub); root != want {
				t.Errorf("root = %s, want %s", root, want)
			}
			got := files(t, root)
			if len(got) != len(c.want) {
				t.Errorf("files = %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestUnpackKeepsOnlyTheExecutableBit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pkg")
	b := archive(t, entry{name: spec, body: "{}", mode: 0o4777}, entry{name: "bin/tool", body: "#!", mode: 0o700})
	if _, err := Unpack(bytes.NewReader(b), dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{spec: 0o755, "bin/tool": 0o755} {
		info, err := os.Lstat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != want&^umask() {
			t.Errorf("%s: mode %v, want %v", name, info.Mode(), want)
		}
	}
	b = archive(t, entry{name: spec, body: "{}", mode: 0o666})
	dir2 := filepath.Join(t.TempDir(), "pkg")
	if _, err := Unpack(bytes.NewReader(b), dir2); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Lstat(filepath.Join(dir2, spec)); info.Mode() != 0o644&^umask() {
		t.Errorf("mode %v, want 0644", info.Mode())
	}
}

// umask is the process's file creation mask, read without changing it
// for long.
func umask() os.FileMode {
	dir, _ := os.MkdirTemp("", "umask")
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, "f")
	_ = os.WriteFile(p, nil, 0o777)
	info, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return 0o777 &^ info.Mode().Perm()
}

// Every hostile archive is refused with ErrInvalidArchive, naming what is
// wrong, and writes nothing outside dir.
func TestUnpackRefusesHostileArchives(t *testing.T) {
	small := limits{fileSize: 1 << 10, totalSize: 4 << 10, files: 5, dirs: 3, stream: 64 << 10}
	zeros := strings.Repeat("\x00", 1000)
	many := func(n int, typ byte, prefix string) []entry {
		var es []entry
		for i := range n {
			es = append(es, entry{name: prefix + string(rune('a'+i)), typ: typ, body: "x"})
		}
		return es
	}
	var bomb []entry
	for i := range 5 {
		bomb = append(bomb, entry{name: "z" + string(rune('a'+i)), body: zeros})
	}
	for _, c := range []struct {
		name    string
		entries []entry
		lim     limits
		want    string
	}{
		{"traversal", []entry{{name: spec, body: "{}"}, {name: "../escape", body: "x"}}, defaultLimits, `"../escape" has a ".." element`},
		{"traversal inside", []entry{{name: "a/../../escape", body: "x"}}, defaultLimits, `has a ".." element`},
		{"absolute path", []entry{{name: "/etc/passwd", body: "x"}}, defaultLimits, "is an absolute path"},
		{"backslash", []entry{{name: `..\escape`, body: "x"}}, defaultLimits, "holds a backslash"},
		{"control character", []entry{{name: "a\nb", body: "x"}}, defaultLimits, "holds a control character"},
		{"symlink", []entry{{name: spec, typ: tar.TypeSymlink, link: "/etc/passwd"}}, defaultLimits, "is a symlink"},
		{"hard link", []entry{{name: "a", body: "x"}, {name: spec, typ: tar.TypeLink, link: "a"}}, defaultLimits, "is a hard link"},
		{"character device", []entry{{name: "null", typ: tar.TypeChar}}, defaultLimits, "is a character device"},
		{"block device", []entry{{name: "sda", typ: tar.TypeBlock}}, defaultLimits, "is a block device"},
		{"FIFO", []entry{{name: "fifo", typ: tar.TypeFifo}}, defaultLimits, "is a FIFO"},
		{"duplicate file", []entry{{name: spec, body: "{}"}, {name: "./" + spec, body: "{\"evil\":1}"}}, defaultLimits, "is in the archive twice"},
		{"duplicate directory", []entry{{name: "a/", typ: tar.TypeDir}, {name: "a", typ: tar.TypeDir}}, defaultLimits, "is in the archive twice"},
		{"a file under a file", []entry{{name: "a", body: "x"}, {name: "a/b", body: "y"}}, defaultLimits, `lies under "a", which is a file`},
		{"a file over a directory", []entry{{name: "a/b", body: "y"}, {name: "a", body: "x"}}, defaultLimits, "other entries lie under it"},
		{"root as a file", []entry{{name: ".", body: "x"}}, defaultLimits, "names the archive's root as a file"},
		{"no file", []entry{{name: "a/", typ: tar.TypeDir}}, defaultLimits, "holds no file"},
		{"too many files", many(6, tar.TypeReg, "f"), small, "more than 5 files"},
		{"too many directories", many(4, tar.TypeDir, "d"), small, "more than 3 directories"},
		{"too many directories implied by a path", []entry{{name: "a/b/c/d/" + spec, body: "{}"}}, small, "more than 3 directories"},
		{"too many directories implied and explicit", []entry{{name: "a/", typ: tar.TypeDir}, {name: "b/c/" + spec, body: "{}"},
			{name: "a/x/y", body: "z"}}, small, "more than 3 directories"},
		{"a file too big", []entry{{name: spec, body: strings.Repeat("x", 1025)}}, small, "at most 1024 bytes"},
		{"declared over the file limit", []entry{{name: spec, size: MaxFileSize + 1}}, defaultLimits, "at most 67108864 bytes"},
		{"gzip bomb", bomb, small, "add up to more than 4096 bytes"},
		{"too long a name", []entry{{name: strings.Repeat("a/", 600) + "x", body: "x"}}, defaultLimits, "longer than 1024 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "pkg")
			_, err := unpack(bytes.NewReader(archive(t, c.entries...)), dir, c.lim)
			if !errors.Is(err, ErrInvalidArchive) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrInvalidArchive naming %q", err, c.want)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Errorf("wrote beside dir: %v", ents)
			}
			var size int64
			_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					info, _ := d.Info()
					size += info.Size()
				}
				return nil
			})
			if size > c.lim.totalSize {
				t.Errorf("wrote %d bytes, over the %d limit", size, c.lim.totalSize)
			}
		})
	}
}

// A stream of headers alone, that declares no bytes, still stops at the
// stream bound.
func TestUnpackBoundsTheDecompressedStream(t *testing.T) {
	lim := limits{fileSize: 1 << 10, totalSize: 4 << 10, files: 100000, dirs: 100000, stream: 16 << 10}
	var es []entry
	for i := range 200 {
		es = append(es, entry{name: strings.Repeat("n", 100) + string(rune(0x100+i)), body: ""})
	}
	_, err := unpack(bytes.NewReader(archive(t, es...)), filepath.Join(t.TempDir(), "pkg"), lim)
	if !errors.Is(err, ErrInvalidArchive) || !strings.Contains(err.Error(), "more than its size limits allow") {
		t.Fatalf("err = %v, want the stream bound", err)
	}
}

func TestUnpackRefusesWhatIsNotAnArchive(t *testing.T) {
	for name, data := range map[string][]byte{
		"not gzip":      []byte("PK\x03\x04 a zip file"),
		"gzip, not tar": gz(t, strings.Repeat("hello ", 200)),
		"truncated":     archive(t, entry{name: spec, body: strings.Repeat("x", 5000)})[:100],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Unpack(bytes.NewReader(data), filepath.Join(t.TempDir(), "pkg"))
			if !errors.Is(err, ErrInvalidArchive) {
				t.Fatalf("err = %v, want ErrInvalidArchive", err)
			}
		})
	}
}

func TestUnpackWantsAFreshDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := Unpack(bytes.NewReader(archive(t, entry{name: spec, body: "{}"})), dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("err = %v, want fs.ErrExist", err)
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
