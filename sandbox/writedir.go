package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrWriteDir is wrapped by every WriteDir error.
var ErrWriteDir = errors.New("cannot write the sandbox tools directory")

// ToolsFile and BinDir are where WriteDir puts tools.txt and the shims,
// relative to its directory. In a sandbox, tools.txt is typically mounted at
// /etc/aileron/tools.txt and the bin directory's files in /usr/local/bin (or
// the bin directory is put first in PATH, as Launch does with PathPrefix).
const (
	ToolsFile = "tools.txt"
	BinDir    = "bin"
)

// WriteDir writes the rendering under dir: dir/tools.txt (0644) and one
// executable shim per command in dir/bin (0755), each file replaced
// atomically. dir and dir/bin are created (0755) when missing. Shims of an
// earlier rendering (files carrying the shim marker) that r no longer has
// are removed; any other file in dir/bin is left alone, but one that a shim
// would overwrite is an error. Every failure wraps ErrWriteDir and names the
// path.
func (r *Rendering) WriteDir(dir string) error {
	bin := filepath.Join(dir, BinDir)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrWriteDir, err)
	}
	want := make(map[string]bool, len(r.Shims))
	for _, s := range r.Shims {
		if p := nameProblem(s.Name); p != "" {
			return fmt.Errorf("%w: shim name %q is not a safe file name: %s", ErrWriteDir, s.Name, p)
		}
		want[s.Name] = true
		path := filepath.Join(bin, s.Name)
		ours, err := isShim(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %w", ErrWriteDir, err)
		}
		if err == nil && !ours {
			return fmt.Errorf("%w: %s exists and is not an Aileron shim; move it away or choose another --out directory", ErrWriteDir, path)
		}
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWriteDir, err)
	}
	for _, e := range entries {
		path := filepath.Join(bin, e.Name())
		if want[e.Name()] || !e.Type().IsRegular() {
			continue
		}
		if ours, err := isShim(path); err == nil && ours {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("%w: removing the stale shim: %w", ErrWriteDir, err)
			}
		}
	}
	for _, s := range r.Shims {
		if err := writeAtomic(filepath.Join(bin, s.Name), s.Script, 0o755); err != nil {
			return err
		}
	}
	return writeAtomic(filepath.Join(dir, ToolsFile), r.ToolsTxt, 0o644)
}

// isShim reports whether path is a regular file whose second line is the
// shim marker.
func isShim(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false, err
	}
	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return false, err
	}
	return bytes.HasPrefix(head[:n], []byte("#!/bin/sh\n"+shimMarker+"\n")), nil
}

// writeAtomic writes data to path through a temporary file in the same
// directory and a rename, with mode perm.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".aileron-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWriteDir, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: writing %s: %w", ErrWriteDir, path, err)
	}
	return nil
}
