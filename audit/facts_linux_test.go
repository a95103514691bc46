package audit

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestFactsFallBackWhenStatxIsRefused: a kernel without statx (ENOSYS)
// or a seccomp profile that refuses it (EPERM) gets the same facts through
// Stat; another failure is the check's failure.
func TestFactsFallBackWhenStatxIsRefused(t *testing.T) {
	f, _ := fileOfALine(t)
	for _, tc := range []struct {
		errno   unix.Errno
		wantErr bool
	}{{unix.ENOSYS, false}, {unix.EPERM, false}, {unix.EIO, true}} {
		refuse := func(int, string, int, int, *unix.Statx_t) error { return tc.errno }
		ff, err := factsWith(f, refuse)
		if tc.wantErr {
			if err == nil {
				t.Errorf("statx failing with %v: no error, want it reported", tc.errno)
			}
			continue
		}
		if err != nil || !ff.linksKnown || ff.links != 1 || ff.size != 5 {
			t.Errorf("statx failing with %v: %+v, %v; want Stat's facts (1 link, 5 bytes)", tc.errno, ff, err)
		}
	}
	partial := func(fd int, path string, flags, mask int, st *unix.Statx_t) error {
		err := unix.Statx(fd, path, flags, mask, st)
		st.Mask &^= unix.STATX_NLINK
		st.Nlink = 0 // as if unknown: trusting it would call the file deleted
		return err
	}
	if ff, err := factsWith(f, partial); err != nil || ff.links != 1 {
		t.Errorf("statx without STATX_NLINK in its mask: %+v, %v; want Stat's facts (1 link)", ff, err)
	}
}
