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
func facts(f file) (fileFacts, error) { return factsWith(f, unix.Statx) }

// factsWith is facts with the statx system call as a parameter (tests
// make it fail).
func factsWith(f file, statx func(int, string, int, int, *unix.Statx_t) error) (fileFacts, error) {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return statFacts(f)
	}
	const want = unix.STATX_TYPE | unix.STATX_NLINK | unix.STATX_SIZE
	var st unix.Statx_t
	err := statx(int(fd.Fd()), "", unix.AT_EMPTY_PATH, want, &st)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		// A kernel before statx (4.11), or a seccomp profile that
		// answers for it with EPERM (older container runtimes, an
		// allow-list recorded from a build that used fstat): never a
		// reason to refuse every request. A security module that
		// forbids reading the file's attributes fails Stat too.
		return statFacts(f)
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
