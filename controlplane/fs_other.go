//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package controlplane

import (
	"fmt"
	"os"
	"runtime"
)

// openNoFollow opens p read-only. This platform has no O_NOFOLLOW; scanPackage
// still refuses symlinks it sees.
func openNoFollow(p string) (*os.File, error) { return os.Open(p) }

// lockFile is unsupported on this platform: the store needs flock.
func lockFile(p string) (func(), error) {
	return nil, fmt.Errorf("locking %s: the connector store needs flock, which %s lacks", p, runtime.GOOS)
}
