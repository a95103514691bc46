package admin

import (
	"net"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// peerName returns "uid N (NAME)" for the user of the process at the other
// end of c, or "" when the kernel does not say.
func peerName(c *net.UnixConn) string {
	raw, err := c.SyscallConn()
	if err != nil {
		return ""
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return ""
	}
	uid := strconv.FormatUint(uint64(cred.Uid), 10)
	if u, err := user.LookupId(uid); err == nil {
		return "uid " + uid + " (" + u.Username + ")"
	}
	return "uid " + uid
}
