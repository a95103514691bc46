package dataplane

import (
	"net"
	"net/netip"
	"syscall"
	"unsafe"
)

// soOriginalDst is SO_ORIGINAL_DST (IPv4) and IP6T_SO_ORIGINAL_DST (IPv6):
// the destination a connection had before a netfilter redirect.
const soOriginalDst = 80

// originalDst returns where the client sent c before any redirect, or c's
// local address when it was not redirected.
func originalDst(c net.Conn) netip.AddrPort {
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	sc, ok := c.(syscall.Conn)
	if !ok {
		return local
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return local
	}
	var got netip.AddrPort
	_ = raw.Control(func(fd uintptr) {
		var buf [28]byte // sockaddr_in6; sockaddr_in fits too
		size := uint32(len(buf))
		level := syscall.SOL_IP
		if local.Addr().Is6() {
			level = syscall.SOL_IPV6
		}
		_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, uintptr(level), soOriginalDst,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno != 0 {
			return
		}
		port := uint16(buf[2])<<8 | uint16(buf[3])
		switch {
		case buf[0] == syscall.AF_INET && size >= 8:
			got = netip.AddrPortFrom(netip.AddrFrom4([4]byte(buf[4:8])), port)
		case buf[0] == syscall.AF_INET6 && size >= 24:
			got = netip.AddrPortFrom(netip.AddrFrom16([16]byte(buf[8:24])), port)
		}
	})
	if got.IsValid() {
		return got
	}
	return local
}
