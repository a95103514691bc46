package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Connector package limits, enforced at install and again whenever an
// installed package is hashed.
const (
	// SpecFileName is the connector spec at the root of every package.
	SpecFileName = "aileron.connector.v1.json"
	// SignatureFileName is the publisher's signature at a package's root
	// (see package signing). It is not part of the package hash, which it
	// signs.
	SignatureFileName = "aileron.connector.sig"
	// MaxPackageFileSize bounds one file in a package (64 MiB).
	MaxPackageFileSize = 64 << 20
	// MaxPackageSize bounds the sum of a package's file sizes (256 MiB).
	MaxPackageSize = 256 << 20
	// MaxPackageFiles bounds how many regular files a package may hold.
	MaxPackageFiles = 10000
)

// pkgFile is one regular file of a package: its slash-separated path relative
// to the package root and its size when scanned.
type pkgFile struct {
	rel  string
	size int64
}

// HashPackage returns the lower-case hex SHA-256 of the package rooted at
// dir, which names its directory in the store.
//
// The hash covers the package's canonical byte stream: for every regular file
// under dir, in byte-wise lexical order of its slash-separated path relative
// to dir, the path, a NUL byte, the file's size in decimal ASCII, a NUL byte,
// then the file's bytes. Directories contribute only through the paths of the
// files they hold (an empty directory changes nothing); file modes and times
// are not hashed. Every file counts, hidden ones included: a stray .DS_Store
// or .git directory is part of the package and of its hash exactly as it is.
// The one exception is SignatureFileName at the root: the publisher's
// signature over the hash cannot be part of it, so adding, changing or
// removing it leaves the hash as it was.
//
// A package may hold only directories and regular files. Symlinks, devices,
// sockets and pipes are refused, as are files over MaxPackageFileSize, more
// than MaxPackageFiles files, or more than MaxPackageSize bytes in all. These
// failures wrap ErrInvalidPackage; I/O failures are returned as they are.
func HashPackage(dir string) (string, error) {
	hash, _, err := hashPackageSpec(dir)
	return hash, err
}

// hashPackageSpec is HashPackage that also returns the bytes of the package's
// spec file as they were hashed (nil if there is none), so that what is
// parsed is exactly what was verified.
func hashPackageSpec(dir string) (hash string, spec []byte, err error) {
	files, err := scanPackage(dir)
	if err != nil {
		return "", nil, err
	}
	return hashFiles(dir, files, nil)
}

// scanPackage lists the regular files under root in canonical order and
// enforces the package limits. Failures about content wrap
// ErrInvalidPackage.
func scanPackage(root string) ([]pkgFile, error) {
	var files []pkgFile
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			if !d.IsDir() {
				return fmt.Errorf("%w: %s is not a directory", ErrInvalidPackage, root)
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case t&fs.ModeSymlink != 0:
			return fmt.Errorf("%w: %s is a symlink; a package may hold only regular files (copy the target in instead)", ErrInvalidPackage, p)
		case !t.IsRegular():
			return fmt.Errorf("%w: %s is a special file (%v); a package may hold only regular files", ErrInvalidPackage, p, t)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > MaxPackageFileSize {
			return fmt.Errorf("%w: %s is %d bytes; a package file may be at most %d bytes (64 MiB)", ErrInvalidPackage, p, info.Size(), MaxPackageFileSize)
		}
		total += info.Size()
		if total > MaxPackageSize {
			return fmt.Errorf("%w: %s holds more than %d bytes (256 MiB) of files", ErrInvalidPackage, root, MaxPackageSize)
		}
		if len(files) == MaxPackageFiles {
			return fmt.Errorf("%w: %s holds more than %d files", ErrInvalidPackage, root, MaxPackageFiles)
		}
		files = append(files, pkgFile{rel: rel, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	return files, nil
}

// hashFiles streams the canonical byte stream of files (as listed by
// scanPackage under root) through SHA-256, and into also when it is not nil,
// keeping a copy of the spec file's bytes. A file that changed size or type
// since the scan is an error wrapping ErrInvalidPackage.
func hashFiles(root string, files []pkgFile, also io.Writer) (hash string, spec []byte, err error) {
	sum := sha256.New()
	var h io.Writer = sum
	if also != nil {
		h = io.MultiWriter(sum, also)
	}
	for _, f := range files {
		if f.rel == SignatureFileName {
			continue
		}
		io.WriteString(h, f.rel)
		h.Write([]byte{0})
		io.WriteString(h, strconv.FormatInt(f.size, 10))
		h.Write([]byte{0})
		var w io.Writer = h
		var buf *bytes.Buffer
		if f.rel == SpecFileName {
			buf = bytes.NewBuffer(make([]byte, 0, f.size))
			w = io.MultiWriter(h, buf)
		}
		if err := copyExactly(w, filepath.Join(root, filepath.FromSlash(f.rel)), f.size); err != nil {
			return "", nil, err
		}
		if buf != nil {
			spec = buf.Bytes()
		}
	}
	return hex.EncodeToString(sum.Sum(nil)), spec, nil
}

// copyExactly copies the regular file at p, which must still be size bytes
// long, into w without following a symlink at p.
func copyExactly(w io.Writer, p string, size int64) error {
	f, err := openNoFollow(p)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() || info.Size() != size {
		return fmt.Errorf("%w: %s changed while it was being read", ErrInvalidPackage, p)
	}
	n, err := io.Copy(w, io.LimitReader(f, size+1))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("%w: %s changed while it was being read", ErrInvalidPackage, p)
	}
	return nil
}

// copyPackageFile copies the regular file src to dst (which must not exist),
// keeping only the executable bits of its mode, and refusing a file larger
// than MaxPackageFileSize.
func copyPackageFile(src, dst string) (err error) {
	in, err := openNoFollow(src)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file", ErrInvalidPackage, src)
	}
	mode := os.FileMode(0o644)
	if info.Mode()&0o111 != 0 {
		mode = 0o755
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	n, err := io.Copy(out, io.LimitReader(in, MaxPackageFileSize+1))
	if err != nil {
		return err
	}
	if n > MaxPackageFileSize {
		return fmt.Errorf("%w: %s is larger than %d bytes (64 MiB), the limit for a package file", ErrInvalidPackage, src, MaxPackageFileSize)
	}
	return nil
}
