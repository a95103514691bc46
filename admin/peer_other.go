//go:build !linux

package admin

import "net"

// peerName does not know the peer outside Linux.
func peerName(*net.UnixConn) string { return "" }
