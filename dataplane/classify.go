package dataplane

import (
	"net/netip"
)

// special lists the IPv4 and IPv6 ranges the proxy never dials unless
// egress.allow_cidrs says so, with the class name reported in denials. The
// order matters: the first match names the class.
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "metadata"},
	{netip.MustParsePrefix("100.100.100.200/32"), "metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link_local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "reserved"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("100::/64"), "discard"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link_local"},
	{netip.MustParsePrefix("fec0::/10"), "site_local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64Well  = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	teredo     = netip.MustParsePrefix("2001::/32")
	ipv4Compat = netip.MustParsePrefix("::/96")
)

// Classify names the special-purpose class of ip, or returns "" for a
// publicly routable address. IPv6 forms that carry an IPv4 address
// (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo) are judged by the IPv4
// address they carry, so ::ffff:127.0.0.1 is "ipv4_mapped(loopback)".
func Classify(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	if ip.Is4In6() {
		return wrap("ipv4_mapped", Classify(ip.Unmap()))
	}
	ip = ip.WithZone("")
	for _, s := range special {
		if s.prefix.Contains(ip) {
			return s.class
		}
	}
	if !ip.Is6() {
		return ""
	}
	b := ip.As16()
	switch {
	case nat64Well.Contains(ip):
		return wrap("nat64", classify4(b[12], b[13], b[14], b[15]))
	case nat64Local.Contains(ip):
		return "nat64_local"
	case sixToFour.Contains(ip):
		return wrap("6to4", classify4(b[2], b[3], b[4], b[5]))
	case teredo.Contains(ip):
		// The client's IPv4 address is the last 32 bits, inverted.
		return wrap("teredo", classify4(^b[12], ^b[13], ^b[14], ^b[15]))
	case ipv4Compat.Contains(ip):
		return wrap("ipv4_compatible", classify4(b[12], b[13], b[14], b[15]))
	}
	return ""
}

func classify4(a, b, c, d byte) string {
	return Classify(netip.AddrFrom4([4]byte{a, b, c, d}))
}

// wrap reports an embedded address's class under the embedding's name; a
// public embedded address makes the whole address public.
func wrap(kind, inner string) string {
	if inner == "" {
		return ""
	}
	return kind + "(" + inner + ")"
}
