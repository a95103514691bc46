//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import "os"

// openNoFollow opens p read-only. This platform has no O_NOFOLLOW; scanPackage
// still refuses symlinks it sees.
func openNoFollow(p string) (*os.File, error) { return os.Open(p) }
