package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"

	"github.com/aileronhq/aileron/state"
)

// On a database several nodes share (Postgres), a package installed on one
// node must reach the others: its canonical byte stream (see HashPackage),
// which names each file and its size before its bytes, is kept in the
// store_packages table, and a node that lacks a package directory rebuilds
// it from there, checking the stream's hash first and re-hashing the result
// like any other package. A single node (SQLite) keeps packages on disk
// only.

// sharePackage records the package staged at pkg under hash, unless it is
// recorded already.
func (s *Store) sharePackage(ctx context.Context, tx *state.Tx, pkg, hash string) error {
	if !s.DB.Shared() {
		return nil
	}
	files, err := scanPackage(pkg)
	if err != nil {
		return err
	}
	var stream bytes.Buffer
	got, _, err := hashFiles(pkg, files, &stream)
	if err != nil {
		return err
	}
	if got != hash {
		return fmt.Errorf("%w: the staged package changed while it was installed", ErrInvalidPackage)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO store_packages (hash, stream, installed_at) VALUES (?, ?, ?)
		ON CONFLICT (hash) DO NOTHING`, hash, stream.Bytes(), state.FormatTime(s.now()))
	if err != nil {
		return fmt.Errorf("recording package %s for the fleet: %w", hash, err)
	}
	return nil
}

// unsharePackage forgets the package hash once no version uses it.
func (s *Store) unsharePackage(ctx context.Context, tx *state.Tx, hash string) error {
	if !s.DB.Shared() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM store_packages WHERE hash = ?`, hash); err != nil {
		return fmt.Errorf("removing package %s from the fleet: %w", hash, err)
	}
	return nil
}

// fetchPackage rebuilds the missing package directory of hash from the
// database. It reports false, nil when the database has no such package
// (or packages are not shared). The stream must hash to hash, and every
// path in it must stay inside the package; failures wrap ErrTampered.
func (s *Store) fetchPackage(ctx context.Context, hash string) (bool, error) {
	if !s.DB.Shared() || !isHexHash(hash) {
		return false, nil
	}
	var stream []byte
	err := s.DB.QueryRowContext(ctx, `SELECT stream FROM store_packages WHERE hash = ?`, hash).Scan(&stream)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.DB.Unavailable(fmt.Errorf("reading package %s from %s: %w", hash, s.DB.Path(), err))
	}
	if sum := sha256.Sum256(stream); hex.EncodeToString(sum[:]) != hash {
		return false, fmt.Errorf("%w: package %s in %s does not hash to its name", ErrTampered, hash, s.DB.Path())
	}
	staging, err := s.newStaging()
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(staging)
	pkg := filepath.Join(staging, "pkg")
	if err := unpackStream(stream, pkg); err != nil {
		return false, fmt.Errorf("%w: package %s in %s: %w", ErrTampered, hash, s.DB.Path(), err)
	}
	return true, s.place(pkg, hash, staging, false)
}

// unpackStream writes the files of a canonical package stream under dir.
// Each entry is path NUL size NUL bytes; paths are slash-separated,
// relative, clean, in strictly increasing order, and within the package
// limits.
func unpackStream(stream []byte, dir string) error {
	files, err := parseStream(stream)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// streamFile is one file of a parsed stream.
type streamFile struct {
	rel  string
	data []byte
}

// parseStream splits a canonical package stream into its files, refusing
// anything HashPackage would not have produced.
func parseStream(stream []byte) ([]streamFile, error) {
	var files []streamFile
	var total int64
	for len(stream) > 0 {
		rel, rest, ok := bytes.Cut(stream, []byte{0})
		if !ok {
			return nil, errors.New("truncated stream: a path without its size")
		}
		sizeText, rest, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return nil, fmt.Errorf("truncated stream after %q", rel)
		}
		size, err := strconv.ParseInt(string(sizeText), 10, 64)
		if err != nil || size < 0 || size > MaxPackageFileSize || strconv.FormatInt(size, 10) != string(sizeText) {
			return nil, fmt.Errorf("file %q has size %q", rel, sizeText)
		}
		if int64(len(rest)) < size {
			return nil, fmt.Errorf("file %q is cut short", rel)
		}
		name := string(rel)
		if err := checkStreamPath(name); err != nil {
			return nil, err
		}
		if n := len(files); n > 0 && files[n-1].rel >= name {
			return nil, fmt.Errorf("file %q is out of order", name)
		}
		total += size
		if len(files) >= MaxPackageFiles || total > MaxPackageSize {
			return nil, errors.New("the package is over the store's limits")
		}
		files = append(files, streamFile{rel: name, data: rest[:size]})
		stream = rest[size:]
	}
	return files, nil
}

// checkStreamPath refuses a path that is empty, absolute, not clean, or
// climbs out of the package.
func checkStreamPath(rel string) error {
	if rel == "" || rel[0] == '/' || path.Clean(rel) != rel || rel == "." || rel == ".." ||
		len(rel) >= 3 && rel[:3] == "../" || bytes.ContainsAny([]byte(rel), "\\\x00") {
		return fmt.Errorf("file path %q is not a clean relative path inside the package", rel)
	}
	return nil
}
