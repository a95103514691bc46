package fence

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// nflogGroup is the NFLOG group blocked packets are logged to, inside the
// sandbox's own network namespace.
const nflogGroup = 7

// rule is a list of nftables expressions, built up by the helpers below.
type rule []expr.Any

func ifname(key expr.MetaKey, name string) rule {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return rule{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

// notIfname matches a packet whose interface (key) is not name.
func notIfname(key expr.MetaKey, name string) rule {
	r := ifname(key, name)
	r[1].(*expr.Cmp).Op = expr.CmpOpNeq
	return r
}

// Each sandbox or gateway sends its DNS server at most dnsPacketRate UDP
// packets a second (bursts of twice that); the rest are dropped before
// they cost a conntrack entry or a goroutine.
const dnsPacketRate = 200

// dnsFlood matches a UDP packet to port 53 beyond dnsPacketRate.
func dnsFlood() rule {
	return append(dport(unix.IPPROTO_UDP, 53),
		&expr.Limit{Type: expr.LimitTypePkts, Rate: dnsPacketRate, Unit: expr.LimitTimeSecond, Burst: 2 * dnsPacketRate, Over: true},
		drop())
}

// onlyFrom drops what is addressed to a, a sandbox's or gateway's own
// address, but arrives on another interface than iface (another link, or
// lo): its listeners serve that link alone.
func onlyFrom(iface string, a netip.Prefix) []expr.Any {
	return join(daddr(a), notIfname(expr.MetaKeyIIFNAME, iface), rule{drop()})
}

func nfproto(p byte) rule {
	return rule{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

func l4proto(p byte) rule {
	return rule{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}}}
}

// daddr matches the destination address against p (family checked first).
func daddr(p netip.Prefix) rule { return addrIn(p, 16, 24) }

// saddr matches the source address against p (family checked first).
func saddr(p netip.Prefix) rule { return addrIn(p, 12, 8) }

// addrIn matches the address at off4 (IPv4) or off6 (IPv6) in the network
// header against p.
func addrIn(p netip.Prefix, off4, off6 uint32) rule {
	fam, off := byte(unix.NFPROTO_IPV4), off4
	if p.Addr().Is6() {
		fam, off = unix.NFPROTO_IPV6, off6
	}
	n := uint32(p.Addr().BitLen() / 8)
	m := make([]byte, n)
	for i := 0; i < p.Bits(); i++ {
		m[i/8] |= 0x80 >> (i % 8)
	}
	r := nfproto(fam)
	r = append(r, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: m, Xor: make([]byte, n)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: p.Masked().Addr().AsSlice()})
	return r
}

func dport(proto byte, port uint16) rule {
	return append(l4proto(proto),
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)})
}

func established() rule {
	bits := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	return rule{&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: bits, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)}}
}

// Each sandbox or gateway opens at most newFlowRate TCP connections a
// second to its listeners (bursts of newFlowBurst); beyond that they are
// reset. This bounds what one sandbox costs the daemon's namespace in
// conntrack entries and the audit trail in refusal lines.
const (
	newFlowRate  = 100
	newFlowBurst = 200
)

// tooManyNew matches a TCP connection opened beyond the new-flow rate.
func tooManyNew() rule {
	bits := binaryutil.NativeEndian.PutUint32(expr.CtStateBitNEW)
	return append(l4proto(unix.IPPROTO_TCP),
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: bits, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Limit{Type: expr.LimitTypePkts, Rate: newFlowRate, Unit: expr.LimitTimeSecond, Burst: newFlowBurst, Over: true},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST, Code: unix.NFT_REJECT_TCP_RST})
}

// The ICMPv6 types of neighbour discovery (RFC 4861) and multicast
// listener discovery (RFC 2710, RFC 3810).
const (
	icmp6RouterSolicitation     = 133
	icmp6RouterAdvertisement    = 134
	icmp6NeighbourSolicitation  = 135
	icmp6NeighbourAdvertisement = 136
	icmp6ListenerReport         = 131 // MLDv1
	icmp6ListenerDone           = 132 // MLDv1
	icmp6ListenerReportV2       = 143
)

// neighbourTypes are the solicitations and advertisements of neighbours;
// routerTypes those of routers.
func neighbourTypes() []byte {
	return []byte{icmp6NeighbourSolicitation, icmp6NeighbourAdvertisement}
}

func routerTypes() []byte { return []byte{icmp6RouterSolicitation, icmp6RouterAdvertisement} }

// neighbour matches IPv6 neighbour discovery (neighbourTypes and
// routerTypes, or only neighbourTypes when routerless: the daemon's end
// never takes router advertisements from a sandbox), which the link needs
// to work at all.
func neighbour(routerless bool) [][]expr.Any {
	types := neighbourTypes()
	if !routerless {
		types = append(types, routerTypes()...)
	}
	var out [][]expr.Any
	for _, t := range icmp6(types...) {
		out = append(out, join(t, rule{accept()}))
	}
	return out
}

// icmp6 matches ICMPv6 messages, one rule for each of types.
func icmp6(types ...byte) []rule {
	var out []rule
	for _, t := range types {
		out = append(out, append(l4proto(unix.IPPROTO_ICMPV6),
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{t}}))
	}
	return out
}

// quietMLD drops, without logging, the multicast listener reports the
// kernel itself sends to ff02::/16 when a link comes up: they go nowhere
// past the daemon's end, and an audit line for each would read as an
// attempt to get out.
func quietMLD() [][]expr.Any { return mldReports(drop()) }

// mldReports matches the multicast listener reports to ff02::/16 (MLDv1
// reports and dones, MLDv2 reports), with verdict v. A query is none of
// them: neither a sandbox nor a gateway's client has any to send, so one
// is refused, and logged, like any other packet.
func mldReports(v expr.Any) [][]expr.Any {
	var out [][]expr.Any
	for _, t := range icmp6(icmp6ListenerReport, icmp6ListenerDone, icmp6ListenerReportV2) {
		out = append(out, join(daddr(linkMulticast6), t, rule{v}))
	}
	return out
}

func accept() expr.Any { return &expr.Verdict{Kind: expr.VerdictAccept} }
func drop() expr.Any   { return &expr.Verdict{Kind: expr.VerdictDrop} }

func join(parts ...rule) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// logBlocked logs (at most 20 a second, bursts of 40) to group.
func logBlocked(group uint16) []expr.Any {
	return []expr.Any{&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
		&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_QTHRESHOLD, Group: group, QThreshold: 1}}
}

// rejectNow answers TCP with a reset and everything else with an ICMP
// "administratively prohibited", so a blocked attempt fails at once.
func rejectNow() [][]expr.Any {
	return [][]expr.Any{
		append(l4proto(unix.IPPROTO_TCP), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST, Code: unix.NFT_REJECT_TCP_RST}),
		{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}},
	}
}

// chain adds a base chain with the given rules to t.
func chain(c *nftables.Conn, t *nftables.Table, name string, typ nftables.ChainType, hook *nftables.ChainHook,
	prio *nftables.ChainPriority, policy nftables.ChainPolicy, rules [][]expr.Any) {
	ch := c.AddChain(&nftables.Chain{Name: name, Table: t, Type: typ, Hooknum: hook, Priority: prio, Policy: &policy})
	for _, r := range rules {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: r})
	}
}

// insideRules is the fence in the sandbox's namespace: out only to
// Aileron's DNS (gw, port 53) and to ports 443 and 80 of the synthetic
// ranges; a packet whose source is not the sandbox's own is logged and
// dropped (insideSources); every other packet is logged and rejected. In
// only what answers those.
func insideRules(c *nftables.Conn, l link) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "aileron_fence"})
	gw := netip.PrefixFrom(l.host4, 32)
	out := [][]expr.Any{join(ifname(expr.MetaKeyOIFNAME, "lo"), rule{accept()})}
	out = append(out, insideSources(c, t)...)
	out = append(out, [][]expr.Any{
		join(established(), rule{accept()}),
		join(daddr(gw), dport(unix.IPPROTO_UDP, 53), rule{accept()}),
		join(daddr(gw), dport(unix.IPPROTO_TCP, 53), rule{accept()}),
	}...)
	for _, p := range []netip.Prefix{l.synth4, l.synth6} {
		for _, port := range []uint16{443, 80} {
			out = append(out, join(daddr(p), dport(unix.IPPROTO_TCP, port), rule{accept()}))
		}
	}
	out = append(out, logBlocked(nflogGroup))
	out = append(out, rejectNow()...)
	chain(c, t, "output", nftables.ChainTypeFilter, nftables.ChainHookOutput, nftables.ChainPriorityFilter, nftables.ChainPolicyDrop, out)
	in := [][]expr.Any{
		join(ifname(expr.MetaKeyIIFNAME, "lo"), rule{accept()}),
		join(established(), rule{accept()}),
	}
	in = append(in, neighbour(false)...)
	chain(c, t, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter, nftables.ChainPolicyDrop, in)
}

// hostRules is the daemon's end: what arrives on the sandbox's link from
// another source than the sandbox's two addresses is dropped before
// anything can answer it (hostSources); connections to ports 443 and 80 of
// the synthetic ranges are redirected to the sandbox's transparent
// listeners (the kernel keeps the original destination for
// SO_ORIGINAL_DST); from the sandbox's link, and only from the sandbox's
// own addresses, only DNS and those listeners are accepted; nothing is
// forwarded anywhere, so the fence holds even if the inside one is gone.
func hostRules(c *nftables.Conn, l link) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: l.table})
	hostSources(c, t, l)
	iif := ifname(expr.MetaKeyIIFNAME, l.hostName)
	src := map[bool]rule{false: saddr(netip.PrefixFrom(l.sand4, 32)), true: saddr(netip.PrefixFrom(l.sand6, 128))}
	var nat [][]expr.Any
	for _, p := range []netip.Prefix{l.synth4, l.synth6} {
		for _, port := range []uint16{443, 80} {
			nat = append(nat, join(iif, src[p.Addr().Is6()], daddr(p), dport(unix.IPPROTO_TCP, port), rule{
				&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
				&expr.Redir{RegisterProtoMin: 1}}))
		}
	}
	chain(c, t, "prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, nftables.ChainPolicyAccept, nat)
	in := [][]expr.Any{onlyFrom(l.hostName, netip.PrefixFrom(l.host4, 32)), onlyFrom(l.hostName, netip.PrefixFrom(l.host6, 128)),
		join(iif, dnsFlood()), join(iif, established(), rule{accept()}), join(iif, tooManyNew())}
	for _, a := range []netip.Prefix{netip.PrefixFrom(l.host4, 32), netip.PrefixFrom(l.host6, 128)} {
		for _, p := range []struct {
			proto byte
			port  uint16
		}{{unix.IPPROTO_UDP, 53}, {unix.IPPROTO_TCP, 53}, {unix.IPPROTO_TCP, 443}, {unix.IPPROTO_TCP, 80}} {
			in = append(in, join(iif, src[a.Addr().Is6()], daddr(a), dport(p.proto, p.port), rule{accept()}))
		}
	}
	for _, r := range neighbour(true) {
		in = append(in, join(iif, r))
	}
	in = append(in, join(iif, rule{drop()}))
	chain(c, t, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter, nftables.ChainPolicyAccept, in)
	fwd := [][]expr.Any{join(iif, rule{drop()}), join(ifname(expr.MetaKeyOIFNAME, l.hostName), rule{drop()})}
	chain(c, t, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter, nftables.ChainPolicyAccept, fwd)
}
