//go:build unix

package state

import (
	"io/fs"
	"os"
	"syscall"
)

// ownedByOther reports the owner of the file info describes when it is
// not the user this process runs as (such a user could read or rewrite
// it, whatever its mode).
func ownedByOther(info fs.FileInfo) (uid int, other bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), int(st.Uid) != os.Geteuid()
}
