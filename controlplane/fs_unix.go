//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package controlplane

import (
	"fmt"
	"os"
	"syscall"
)

// openNoFollow opens p read-only, failing if its last element is a symlink.
func openNoFollow(p string) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if pe, ok := err.(*os.PathError); ok && pe.Err == syscall.ELOOP {
			return nil, fmt.Errorf("%w: %s is a symlink; a package may hold only regular files", ErrInvalidPackage, p)
		}
		return nil, err
	}
	return f, nil
}

// lockFile takes an exclusive advisory lock (flock) on the file at p,
// creating it with mode 0600 if needed, and returns the function releasing
// it. Each call opens its own descriptor, so the lock also serialises
// goroutines of one process.
func lockFile(p string) (unlock func(), err error) {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
