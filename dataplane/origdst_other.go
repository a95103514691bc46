//go:build !linux

package dataplane

import (
	"net"
	"net/netip"
)

// originalDst returns c's local address: only Linux redirects keep the
// original destination.
func originalDst(c net.Conn) netip.AddrPort {
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	return netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
}
