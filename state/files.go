package state

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the length in bytes of the keys LoadOrCreateKey keeps.
const KeySize = 32

// LoadOrCreateKey returns the KeySize-byte key in path, creating it first
// (random, mode 0600, directory 0700) if the file does not exist. A key
// file group or others may access wraps ErrInsecureFile; one of the wrong
// size wraps ErrCorruptState; what names it in messages ("session key").
func LoadOrCreateKey(path, what string) ([]byte, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		key := make([]byte, KeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generating %s: %w", what, err)
		}
		if err := CreatePrivateFile(path, key, what); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	if err := CheckPrivateFile(path, what); err != nil {
		return nil, err
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: %s %s is %d bytes, want %d; restore it from a backup "+
			"(a new key makes everything derived from the old one unusable)", ErrCorruptState, what, path, len(key), KeySize)
	}
	return key, nil
}

// CreatePrivateFile writes data to a NEW file at path, mode 0600 in a 0700
// directory, and syncs it. It fails with fs.ErrExist if the file appeared
// meanwhile, and removes a half-written file. what names the file in errors.
func CreatePrivateFile(path string, data []byte, what string) (err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s directory: %w", what, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w", what, err)
	}
	return f.Sync()
}

// CheckPrivateFile refuses p unless it is a regular file of the user this
// process runs as that only that user may access; the error wraps
// ErrInsecureFile, names the file as what and says how to fix it. A
// symbolic link (a Kubernetes secret volume's files are links into its
// ..data directory) is judged by the file it leads to.
func CheckPrivateFile(p, what string) error {
	info, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	uid, other := ownedByOther(info)
	if info.Mode().IsRegular() && info.Mode().Perm()&0o077 == 0 && !other {
		return nil
	}
	target := p
	if real, err := filepath.EvalSymlinks(p); err == nil && real != p {
		target = real
		p += " (a link to " + real + ")"
	}
	if other && info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s %s belongs to uid %d, not to the daemon's user (uid %d), who could read or rewrite it; "+
			"give it to the daemon's user (chown %d %s; chmod 600 %s)", ErrInsecureFile, what, p, uid, os.Geteuid(), os.Geteuid(), target, target)
	}
	return fmt.Errorf("%w: %s %s has mode %v; it must be a regular file only its owner can read (chmod 600 %s; "+
		"a Kubernetes secret volume: defaultMode 0400)", ErrInsecureFile, what, p, info.Mode(), target)
}

// WriteFileAtomic replaces p with data: a mode 0600 temporary file in the
// same directory (created 0700 if missing), fsync, rename, then fsync of
// the directory, so that a crash leaves the old file or the new one, never
// a mix.
func WriteFileAtomic(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every file system syncs directories
		d.Close()
	}
	return nil
}

// ReadBounded reads at most limit bytes of the file at p, failing (wrapping
// ErrCorruptState) if it is longer.
func ReadBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorruptState, p, limit)
	}
	return data, nil
}
