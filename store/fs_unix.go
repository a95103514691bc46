//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

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
