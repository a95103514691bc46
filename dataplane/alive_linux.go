package dataplane

import (
	"net"
	"syscall"
)

// peekAlive reports whether an idle pooled connection may be reused: the
// upstream has neither closed it nor sent anything unasked. One
// non-blocking MSG_PEEK, no read goroutine per idle connection.
func peekAlive(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	err = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = rerr == syscall.EAGAIN // nothing to read, and not closed
		return true
	})
	return err == nil && alive
}
