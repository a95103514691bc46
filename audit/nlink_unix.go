//go:build unix

package audit

import (
	"os"
	"syscall"
)

// links is how many names fi's file has (0: deleted while open); ok is
// false when the platform does not say.
func links(fi os.FileInfo) (n uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true //nolint:unconvert // uint16 on some platforms
}

// lockFile takes an exclusive advisory lock on f without waiting.
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
