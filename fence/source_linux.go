package fence

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// A refusal is an answer: a TCP reset or an ICMP error, sent to the
// refused packet's source. Were that source forged, the answer would carry
// what the sender chose (a reset's acknowledgement number, the payload an
// ICMP error quotes) to an address of the sender's choosing. So every
// fence checks a packet's source before anything can answer it, in its
// own rules (the host's rp_filter is loose by default and IPv6 has none):
// a packet whose source the sandbox (or the gateway's client) does not
// own is logged, with foreignPrefix, and dropped unanswered.
//
// What any source may still send on a fenced link: neighbour
// solicitations and advertisements to a link multicast address (duplicate
// address detection's come from ::), neighbour discovery from a link-local
// address, and multicast listener reports. The kernel answers neighbour
// discovery on the link it came in on, and nothing answers the reports;
// neither is ever forwarded. A router solicitation from anywhere else is
// foreign like any packet: a gateway would refuse it, to its source. A
// multicast listener query passes from no source (no sandbox or client has
// one to send): it is checked, and refused, like any other packet.

// foreignPrefix is the NFLOG prefix of a packet dropped for its source.
const foreignPrefix = "foreign"

// foreignChain is the regular chain a foreign source jumps to.
const foreignChain = "foreign"

var (
	linkLocal6     = netip.MustParsePrefix("fe80::/10")
	linkMulticast6 = netip.MustParsePrefix("ff02::/16")
)

// addForeign adds to t the chain foreignChain: what jumps to it is logged
// to group (none when group is 0; at most 20 a second, bursts of 40) and
// dropped. It must be added before the rules that jump to it.
func addForeign(c *nftables.Conn, t *nftables.Table, group uint16) {
	ch := c.AddChain(&nftables.Chain{Name: foreignChain, Table: t})
	if group != 0 {
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{
			&expr.Limit{Type: expr.LimitTypePkts, Rate: 20, Unit: expr.LimitTimeSecond, Burst: 40},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_QTHRESHOLD | 1<<unix.NFTA_LOG_PREFIX,
				Group: group, QThreshold: 1, Data: []byte(foreignPrefix)}}})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{drop()}})
}

func toForeign() rule { return rule{&expr.Verdict{Kind: expr.VerdictJump, Chain: foreignChain}} }

// notLocalSource matches a packet whose source is not an address of the
// interface it leaves by (fib saddr . oif type != local): in the
// sandbox's namespace, an address the sandbox does not own.
func notLocalSource() rule {
	return rule{&expr.Fib{Register: 1, FlagSADDR: true, FlagOIF: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)}}
}

// routedBack matches a packet whose source the daemon routes back out of
// the interface it came in on (fib saddr . iif oif: a strict reverse-path
// check).
func routedBack() rule {
	return rule{&expr.Fib{Register: 1, FlagSADDR: true, FlagIIF: true, ResultOIF: true},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)}}
}

// linkScoped accepts, arriving on iif, what any source may send on a
// fenced link (see above).
func linkScoped(iif rule) [][]expr.Any {
	var out [][]expr.Any
	for _, nd := range icmp6(neighbourTypes()...) {
		out = append(out, join(iif, daddr(linkMulticast6), nd, rule{accept()}),
			join(iif, saddr(linkLocal6), nd, rule{accept()}))
	}
	for _, nd := range icmp6(routerTypes()...) {
		out = append(out, join(iif, saddr(linkLocal6), nd, rule{accept()}))
	}
	for _, m := range mldReports(accept()) {
		out = append(out, join(iif, rule(m)))
	}
	return out
}

// sourcesChain adds the base chain "sources" on prerouting, before
// conntrack (priority raw), so a dropped packet costs no conntrack entry.
func sourcesChain(c *nftables.Conn, t *nftables.Table, rules [][]expr.Any) {
	chain(c, t, "sources", nftables.ChainTypeFilter, nftables.ChainHookPrerouting, nftables.ChainPriorityRaw, nftables.ChainPolicyAccept, rules)
}

// insideSources are the first rules of the inside fence's output chain,
// after loopback: neighbour discovery passes, the kernel's multicast
// listener reports are dropped quietly, and a packet whose source is not
// the sandbox's own address (its two addresses and its link-local one) is
// logged and dropped, never rejected.
func insideSources(c *nftables.Conn, t *nftables.Table) [][]expr.Any {
	addForeign(c, t, nflogGroup)
	out := neighbour(false)
	out = append(out, quietMLD()...)
	return append(out, join(notLocalSource(), toForeign()))
}

// hostSources is the daemon's end's first check of what arrives on the
// sandbox's link: from the sandbox's two addresses, or link-scoped;
// everything else is dropped, unlogged (the inside fence logs it; only
// with the inside fence gone can it arrive here).
func hostSources(c *nftables.Conn, t *nftables.Table, l link) {
	iif := ifname(expr.MetaKeyIIFNAME, l.hostName)
	rules := linkScoped(iif)
	rules = append(rules, join(iif, saddr(netip.PrefixFrom(l.sand4, 32)), rule{accept()}),
		join(iif, saddr(netip.PrefixFrom(l.sand6, 128)), rule{accept()}),
		join(iif, rule{drop()}))
	sourcesChain(c, t, rules)
}

// gatewaySources is a gateway's first check of what arrives on its
// interface: from its clients' range and routed back out of that
// interface, or link-scoped, it passes; from any other IPv6 link-local
// source it is logged and refused with an ICMPv6 error, which the kernel
// sends out of the interface the packet came in on (never a TCP reset,
// whose route is looked up anew); everything else, the other address
// family included, is logged as foreign and dropped.
func gatewaySources(c *nftables.Conn, t *nftables.Table, l link, source netip.Prefix, group uint16) {
	addForeign(c, t, group)
	iif := ifname(expr.MetaKeyIIFNAME, l.iface)
	rules := linkScoped(iif)
	rules = append(rules, join(iif, saddr(source), routedBack(), rule{accept()}),
		join(iif, saddr(linkLocal6), rule(logBlocked(group))),
		join(iif, saddr(linkLocal6), rule{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}}),
		join(iif, toForeign()))
	sourcesChain(c, t, rules)
}
