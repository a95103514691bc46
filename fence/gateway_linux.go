package fence

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aileronhq/aileron/audit"
)

// gatewayGroup is the NFLOG group of gateway idx, in the daemon's own
// network namespace (fenced sandboxes log in theirs).
func gatewayGroup(idx int) uint16 { return uint16(0x6100 + idx) }

// Attach makes the daemon the gateway of the clients in source (another
// container or machine whose default route and DNS server are the
// daemon's address listen): a policy DNS server on listen:53, transparent
// listeners on listen:443 and :80 taking connections to the synthetic
// addresses it hands out, and an nftables table in the daemon's namespace
// that accepts nothing else from source and forwards nothing for it,
// rejecting (TCP reset, ICMP administratively prohibited) and auditing
// each blocked packet (gatewayRules). source and listen must be of one
// family. The gateway lasts until Close or Shutdown.
func (m *Manager) Attach(ctx context.Context, session string, source netip.Prefix, listen netip.Addr) (Info, error) {
	if err := privileged(unix.CAP_NET_ADMIN); err != nil {
		return Info{}, err
	}
	probe, err := m.linkFor(0)
	if err != nil {
		return Info{}, err
	}
	iface, err := checkGateway(source, listen, probe.synth4, probe.synth6)
	if err != nil {
		return Info{}, err
	}
	sess, err := m.Session(session)
	if err != nil {
		return Info{}, fmt.Errorf("%w: session %s: %v", ErrBadRequest, session, err)
	}
	sb, err := m.reserve(Info{Session: sess.ID})
	if err != nil {
		return Info{}, err
	}
	sb.source = source.Masked()
	sb.link = link{table: "aileron_" + m.Tag + "_g" + strconv.Itoa(sb.idx), iface: iface, host4: listen, synth4: sb.link.synth4, synth6: sb.link.synth6}
	sb.info.Source, sb.info.DNS, sb.info.Address, sb.info.Address6, sb.info.Link = sb.source.String(), listen.String(), "", "", iface
	if err = m.claim(sb); err == nil {
		err = m.startGateway(sb)
	}
	if err == nil {
		if err = m.serve(sb, sess, []netip.Addr{listen}, 0, gatewayGroup(sb.idx)); errors.Is(err, unix.EADDRINUSE) {
			err = fmt.Errorf("%w: %v: another program holds that port on %s; stop it or listen on another address", ErrBadRequest, err, listen)
		}
	}
	if err == nil {
		err = m.publish(sb)
	}
	if err != nil {
		m.teardown(sb, false, false)
		return Info{}, err
	}
	m.record(audit.Event{Name: audit.EventSandboxStarted, Session: sess.ID, Details: map[string]string{
		"sandbox": sb.info.ID, "source": sb.info.Source, "dns": sb.info.DNS}})
	return sb.info, nil
}

// claim registers gateway sb from now until its teardown, refusing it
// when another gateway serves the same interface (a gateway's fence takes
// the whole interface, both address families, so a second one would
// refuse what the first serves) or clients that overlap.
func (m *Manager) claim(sb *sandbox) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, other := range m.gateways {
		if other.link.iface == sb.link.iface {
			return fmt.Errorf("%w: gateway %s (clients %s, listen %s) already serves interface %s, and an interface carries one gateway: its fence takes the whole interface, both address families; close it first (aileron sandbox close %s), or attach on another interface",
				ErrBadRequest, other.info.ID, other.source, other.info.DNS, sb.link.iface, other.info.ID)
		}
		if other.source.Overlaps(sb.source) {
			return fmt.Errorf("%w: %s overlaps gateway %s (%s); close it first", ErrBadRequest, sb.source, other.info.ID, other.source)
		}
	}
	if m.gateways == nil {
		m.gateways = map[string]*sandbox{}
	}
	m.gateways[sb.info.ID] = sb
	return nil
}

// checkGateway refuses what Attach cannot fence: families that differ, a
// link-local client range, a listen address the daemon does not have, a
// synthetic range that would hand out the clients' own addresses or the
// daemon's. It returns the
// interface that holds listen.
func checkGateway(source netip.Prefix, listen netip.Addr, synth4, synth6 netip.Prefix) (string, error) {
	if !source.IsValid() || !listen.IsValid() || source.Addr().Is4() != listen.Is4() || source.Addr().Is4In6() || listen.Is4In6() {
		return "", fmt.Errorf("%w: want a source prefix and a listen address of one family (e.g. 172.30.0.0/24 and 172.30.0.2)", ErrBadRequest)
	}
	if source.Contains(listen) && source.Bits() == listen.BitLen() {
		return "", fmt.Errorf("%w: the source %s is only the listen address", ErrBadRequest, source)
	}
	if source.Overlaps(linkLocal6) {
		return "", fmt.Errorf("%w: the source %s holds link-local addresses (fe80::/10); give the clients' routable range (the gateway answers link-local sources with ICMPv6 errors only, and serves them nothing)", ErrBadRequest, source)
	}
	synth := synth4
	if listen.Is6() {
		synth = synth6
	}
	if synth.Overlaps(source) || synth.Contains(listen) {
		return "", fmt.Errorf("%w: the synthetic range %s (sandbox.synthetic_cidr) overlaps the clients %s or holds the listen address %s; pick ranges apart", ErrBadRequest, synth, source, listen)
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return "", fmt.Errorf("listing the daemon's addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == listen {
			k, err := netlink.LinkByIndex(a.LinkIndex)
			if err != nil {
				return "", fmt.Errorf("the interface of %s: %w", listen, err)
			}
			if k.Attrs().Name == "lo" {
				return "", fmt.Errorf("%w: %s is on the loopback interface; give the daemon's address on the clients' network", ErrBadRequest, listen)
			}
			return k.Attrs().Name, nil
		}
	}
	return "", fmt.Errorf("%w: %s is not an address of the daemon's network namespace; give the daemon's own address on the clients' network (ip addr shows them)", ErrBadRequest, listen)
}

// startGateway installs the gateway's table (gatewayRules).
func (m *Manager) startGateway(sb *sandbox) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	gatewayRules(c, sb.link, sb.source, gatewayGroup(sb.idx))
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing the gateway's nftables table %s: %w", sb.link.table, err)
	}
	return nil
}

// gatewayPorts are what a gateway serves on its listen address.
var gatewayPorts = []struct {
	proto byte
	port  uint16
}{{unix.IPPROTO_UDP, 53}, {unix.IPPROTO_TCP, 53}, {unix.IPPROTO_TCP, 443}, {unix.IPPROTO_TCP, 80}}

// blockedMark marks, in conntrack, the flows of a gateway's clients that
// are to be refused.
const blockedMark = 0xa11e

// gatewayRules, in the daemon's namespace, for what arrives on the listen
// address's interface (l.iface, given over to the gateway's clients):
//   - first, before conntrack (gatewaySources): a packet whose source is
//     not in source, or not routed back out of l.iface, is logged and
//     dropped unanswered, the other address family's included, unless it
//     is link-scoped (neighbour discovery, multicast listener reports) or
//     from an IPv6 link-local address (logged and refused there with an
//     ICMPv6 error, which leaves by the interface it came in on);
//   - TCP 443 and 80 from source to the synthetic range of its family go
//     to the listen address (DNAT; SO_ORIGINAL_DST keeps the original
//     destination);
//   - packets to the listen address pass to the input chain, which accepts
//     only DNS, 443 and 80 from source, replies and neighbour discovery;
//   - every other flow of a client is logged (its original destination)
//     and marked, and sent to the listen address too, where the input
//     chain rejects it at once (TCP reset, ICMP administratively
//     prohibited; conntrack turns the answer back into one from the
//     original destination). Without that detour, a packet for an address
//     the daemon has no route to would vanish without an answer;
//   - nothing is forwarded from or to that interface.
func gatewayRules(c *nftables.Conn, l link, source netip.Prefix, group uint16) {
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: l.table})
	gatewaySources(c, t, l, source, group)
	listen, from, iif := l.host4, saddr(source), ifname(expr.MetaKeyIIFNAME, l.iface)
	synth, fam := l.synth4, byte(unix.NFPROTO_IPV4)
	if listen.Is6() {
		synth, fam = l.synth6, unix.NFPROTO_IPV6
	}
	self := daddr(netip.PrefixFrom(listen, listen.BitLen()))
	dnat := func(port uint16) rule {
		r := rule{&expr.Immediate{Register: 1, Data: listen.AsSlice()}}
		n := &expr.NAT{Type: expr.NATTypeDestNAT, Family: uint32(fam), RegAddrMin: 1, Specified: true}
		if port != 0 {
			r = append(r, &expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(port)})
			n.RegProtoMin = 2
		}
		return append(r, n)
	}
	mark := binaryutil.NativeEndian.PutUint32(blockedMark)
	var nat [][]expr.Any
	for _, port := range []uint16{443, 80} {
		nat = append(nat, join(iif, from, daddr(synth), dport(unix.IPPROTO_TCP, port), dnat(port)))
	}
	nat = append(nat, join(iif, self, rule{accept()}))
	for _, nd := range neighbour(true) {
		nat = append(nat, join(iif, rule(nd)))
	}
	for _, m := range mldReports(accept()) { // the clients' kernels announce their multicast groups: not NATed, not logged
		nat = append(nat, join(iif, rule(m)))
	}
	nat = append(nat, join(iif, rule(logBlocked(group))),
		join(iif, rule{&expr.Immediate{Register: 1, Data: mark}, &expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true}}),
		join(iif, nfproto(fam), dnat(0)))
	chain(c, t, "prerouting", nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, nftables.ChainPolicyAccept, nat)
	marked := rule{&expr.Ct{Key: expr.CtKeyMARK, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: mark}}
	in := reject(join(iif, marked))
	for _, p := range gatewayPorts {
		// the gateway's DNS and listeners serve its interface alone (the
		// address may be the machine's own, with other services on it)
		in = append(in, join(self, notIfname(expr.MetaKeyIIFNAME, l.iface), dport(p.proto, p.port), rule{drop()}))
	}
	in = append(in, join(iif, dnsFlood()), join(iif, established(), rule{accept()}), join(iif, tooManyNew()))
	for _, p := range gatewayPorts {
		in = append(in, join(iif, from, self, dport(p.proto, p.port), rule{accept()}))
	}
	for _, nd := range neighbour(true) {
		in = append(in, join(iif, rule(nd)))
	}
	for _, m := range quietMLD() { // ... and dropped without an audit line: not an attempt to get out
		in = append(in, join(iif, rule(m)))
	}
	in = append(in, join(iif, rule(logBlocked(group))))
	in = append(in, reject(iif)...)
	chain(c, t, "input", nftables.ChainTypeFilter, nftables.ChainHookInput, nftables.ChainPriorityFilter, nftables.ChainPolicyAccept, in)
	fwd := [][]expr.Any{join(iif, rule(logBlocked(group)))}
	fwd = append(fwd, reject(iif)...)
	fwd = append(fwd, join(ifname(expr.MetaKeyOIFNAME, l.iface), rule{drop()}))
	chain(c, t, "forward", nftables.ChainTypeFilter, nftables.ChainHookForward, nftables.ChainPriorityFilter, nftables.ChainPolicyAccept, fwd)
}

// reject rejects at once what matches match.
func reject(match rule) [][]expr.Any {
	var out [][]expr.Any
	for _, r := range rejectNow() {
		out = append(out, join(match, rule(r)))
	}
	return out
}
