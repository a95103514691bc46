//go:build linux

package audit

import (
	"errors"

	"golang.org/x/sys/unix"
)

// facts reads f's facts without asking for its times. A stat that asks
// for them (fstat does) marks the times as seen, and on a filesystem with
// multigrain timestamps (ext4, xfs, btrfs, tmpfs on Linux 6.13 and later)
// the next write then stamps the inode afresh: an inode update in the
// journal for every write call. statx with only the fields stillThere
// needs leaves the times alone, so a write stamps them once per clock
// tick as usual.
func facts(f file) (fileFacts, error) {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return statFacts(f)
	}
	const want = unix.STATX_TYPE | unix.STATX_NLINK | unix.STATX_SIZE
	var st unix.Statx_t
	err := unix.Statx(int(fd.Fd()), "", unix.AT_EMPTY_PATH, want, &st)
	if errors.Is(err, unix.ENOSYS) {
		return statFacts(f) // a kernel before statx (4.11)
	}
	if err != nil {
		return fileFacts{}, err
	}
	if st.Mask&want != want {
		return statFacts(f) // a filesystem that did not fill them in
	}
	return fileFacts{
		links:      uint64(st.Nlink),
		linksKnown: true,
		regular:    st.Mode&unix.S_IFMT == unix.S_IFREG,
		size:       int64(st.Size),
	}, nil
}
