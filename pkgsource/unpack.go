package pkgsource

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// Archive limits. They match the store's package limits (store/pkghash.go),
// so that an archive that unpacks is never refused by the store for its size.
const (
	// MaxFileSize bounds one file of an archive (64 MiB).
	MaxFileSize = 64 << 20
	// MaxTotalSize bounds the sum of an archive's file sizes (256 MiB).
	MaxTotalSize = 256 << 20
	// MaxFiles bounds how many regular files an archive may hold.
	MaxFiles = 10000
	// MaxDirs bounds how many directories an archive may make: named by
	// an entry, or implied by the path of one.
	MaxDirs = 10000
	// MaxNameLen bounds the length of one entry's path, in bytes.
	MaxNameLen = 1024
)

// limits are the bounds one Unpack enforces; tests shrink them.
type limits struct {
	fileSize, totalSize int64
	files, dirs         int
	// stream bounds the decompressed tar stream: the files, plus room
	// for the headers and padding of every entry.
	stream int64
}

var defaultLimits = limits{
	fileSize: MaxFileSize, totalSize: MaxTotalSize, files: MaxFiles, dirs: MaxDirs,
	stream: MaxTotalSize + (MaxFiles+MaxDirs)*4096,
}

// ErrInvalidArchive is wrapped by every refusal of an archive's content.
var ErrInvalidArchive = errors.New("invalid package archive")

// Unpack reads a gzip'd tar from r and writes its files into dir, which
// must not exist yet (it is created, mode 0700). It returns the package
// root: dir, or, when every entry of the archive lies under one top-level
// directory (as `tar czf google-1.2.3.tar.gz google-1.2.3/` makes), that
// directory.
//
// Only regular files and directories are taken; a symlink, hard link,
// device, FIFO or any other entry type is refused, as is an absolute path,
// a path with a ".." element, a backslash or a control character, a path
// named twice, and an archive over MaxFiles, MaxDirs, MaxFileSize or
// MaxTotalSize. A pax global header (what `git archive` writes) carries no
// file and is skipped. Files are written 0644, or 0755 when the archive
// marks them executable. Refusals wrap ErrInvalidArchive and name the
// entry; on any error the caller removes dir.
func Unpack(r io.Reader, dir string) (root string, err error) {
	return unpack(r, dir, defaultLimits)
}

func unpack(r io.Reader, dir string, lim limits) (root string, err error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return "", fmt.Errorf("%w: not gzip data (%v); a package archive is a .tar.gz", ErrInvalidArchive, err)
	}
	defer zr.Close()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	u := unpacker{dir: dir, lim: lim, seen: map[string]int{}, tops: map[string]bool{}}
	tr := tar.NewReader(&boundedReader{r: zr, left: lim.stream})
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", archiveError(err)
		}
		if err := u.entry(hdr, tr); err != nil {
			return "", err
		}
	}
	if u.files == 0 {
		return "", fmt.Errorf("%w: the archive holds no file", ErrInvalidArchive)
	}
	return u.root(), nil
}

// archiveError wraps a failure to read the archive as ErrInvalidArchive,
// keeping an over-long stream's own message.
func archiveError(err error) error {
	if errors.Is(err, errStreamTooLong) {
		return fmt.Errorf("%w: %v", ErrInvalidArchive, err)
	}
	return fmt.Errorf("%w: reading the tar: %v", ErrInvalidArchive, err)
}

// unpacker is the state of one Unpack.
type unpacker struct {
	dir         string
	lim         limits
	seen        map[string]int  // cleaned path → its kind
	tops        map[string]bool // first path elements seen → is a directory
	files, dirs int
	total       int64
}

// entry writes one tar entry under u.dir.
func (u *unpacker) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	name, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	isDir := hdr.Typeflag == tar.TypeDir
	if !isDir && hdr.Typeflag != tar.TypeReg { // the reader reports a legacy TypeRegA as TypeReg or TypeDir
		return fmt.Errorf("%w: %q is a %s; a package holds only regular files and directories", ErrInvalidArchive, hdr.Name, typeName(hdr.Typeflag))
	}
	if name == "." {
		if !isDir {
			return fmt.Errorf("%w: %q names the archive's root as a file", ErrInvalidArchive, hdr.Name)
		}
		return nil
	}
	if err := u.claim(name, isDir, hdr.Name); err != nil {
		return err
	}
	if isDir {
		return os.MkdirAll(filepath.Join(u.dir, filepath.FromSlash(name)), 0o755)
	}
	if u.files++; u.files > u.lim.files {
		return fmt.Errorf("%w: more than %d files", ErrInvalidArchive, u.lim.files)
	}
	if hdr.Size > u.lim.fileSize {
		return fmt.Errorf("%w: %q is %d bytes; a package file may be at most %d bytes", ErrInvalidArchive, hdr.Name, hdr.Size, u.lim.fileSize)
	}
	if u.total += hdr.Size; u.total > u.lim.totalSize {
		return fmt.Errorf("%w: the files add up to more than %d bytes", ErrInvalidArchive, u.lim.totalSize)
	}
	return u.write(name, hdr, r)
}

// Kinds of a path seen in an archive.
const (
	implicitDir = iota + 1 // the parent of an entry, not an entry itself
	explicitDir
	file
)

// claim records name as taken, refusing a second entry of the same path, a
// path under a file, and a file where other entries need a directory. It
// notes the first element for root.
func (u *unpacker) claim(name string, isDir bool, raw string) error {
	switch k := u.seen[name]; {
	case k == explicitDir || k == file:
		return fmt.Errorf("%w: %q is in the archive twice", ErrInvalidArchive, raw)
	case k == implicitDir && !isDir:
		return fmt.Errorf("%w: %q is a file, but other entries lie under it", ErrInvalidArchive, raw)
	}
	if isDir && u.seen[name] == 0 {
		if err := u.countDir(); err != nil {
			return err
		}
	}
	u.seen[name] = file
	if isDir {
		u.seen[name] = explicitDir
	}
	for p := path.Dir(name); p != "." && p != "/"; p = path.Dir(p) {
		switch u.seen[p] {
		case file:
			return fmt.Errorf("%w: %q lies under %q, which is a file", ErrInvalidArchive, raw, p)
		case 0:
			if err := u.countDir(); err != nil {
				return err
			}
			u.seen[p] = implicitDir
		}
	}
	top, rest, _ := strings.Cut(name, "/")
	u.tops[top] = u.tops[top] || isDir || rest != ""
	return nil
}

// countDir counts one more directory the archive makes, named by an entry
// or implied by an entry's path: a deep path in each of many files would
// otherwise make millions.
func (u *unpacker) countDir() error {
	if u.dirs++; u.dirs > u.lim.dirs {
		return fmt.Errorf("%w: more than %d directories", ErrInvalidArchive, u.lim.dirs)
	}
	return nil
}

// write creates the file name (never existing before) from r, which holds
// hdr.Size bytes.
func (u *unpacker) write(name string, hdr *tar.Header, r io.Reader) (err error) {
	p := filepath.Join(u.dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	n, err := io.Copy(f, io.LimitReader(r, hdr.Size))
	if err != nil {
		return archiveError(err)
	}
	if n != hdr.Size {
		return fmt.Errorf("%w: %q ends after %d of its %d bytes", ErrInvalidArchive, hdr.Name, n, hdr.Size)
	}
	return nil
}

// root is the package root: the single top-level directory when every
// entry lies under it, else dir.
func (u *unpacker) root() string {
	if len(u.tops) != 1 {
		return u.dir
	}
	for top, isDir := range u.tops {
		if isDir {
			return filepath.Join(u.dir, top)
		}
	}
	return u.dir
}

// cleanName checks an entry's path and returns it cleaned (slash-separated,
// relative, "." for the root).
func cleanName(name string) (string, error) {
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%w: entry %q %s", ErrInvalidArchive, name, why)
	}
	switch {
	case name == "":
		return bad("has no name")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("is longer than %d bytes", MaxNameLen))
	case strings.HasPrefix(name, "/"):
		return bad("is an absolute path; a package archive holds relative paths only")
	case strings.ContainsRune(name, '\\'):
		return bad("holds a backslash; paths in a package archive are separated by /")
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return bad("holds a control character")
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return bad("has a \"..\" element; a package archive may not reach outside its directory")
		}
	}
	return path.Clean(name), nil
}

// typeName names a tar entry type for a refusal.
func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "FIFO"
	case tar.TypeGNUSparse:
		return "sparse file"
	}
	return fmt.Sprintf("entry of type %q", t)
}

var errStreamTooLong = errors.New("the archive unpacks to more than its size limits allow")

// boundedReader fails once more than left bytes are read: a gzip bomb
// stops at the bound however well it compresses.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errStreamTooLong
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}
