//go:build linux

package integration

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
)

// The IPv6 gateway's network: a second link between the daemon's
// namespace and the agent's.
const (
	gw6Listen = "2001:db8:100::1"
	gw6Agent  = "2001:db8:100::2"
	gw6Source = "2001:db8:100::/64"
	gw0Other6 = "2001:db8:101::1" // an IPv6 address on the IPv4 gateway's interface
)

// TestGatewayNeverAnswersForgedSources is the second half of invariant 11
// for gateways: a client that puts an address it does not own on its
// packets (here a fake-internet address the daemon routes to) gets no
// answer at all, over IPv4 and IPv6, TCP, UDP and ICMP, on an IPv4 gateway
// and an IPv6 one, in either family on each gateway's interface, even
// with forwarding on in the gateway's namespace and rp_filter off, so that
// the fence's own rules are all that stands between a forged source and
// an answer. Its own addresses are refused at once, and every audit
// line names the packet's source. A second gateway on an interface that
// has one is refused, saying which; the IPv4 and IPv6 gateways on their
// own interfaces both answer DNS.
func TestGatewayNeverAnswersForgedSources(t *testing.T) {
	g, capA, capI := newGatewayWorld(t)
	hA, hG, hI := nsHandle(t, g.aileron), nsHandle(t, g.agent), nsHandle(t, g.inet)
	if err := hA.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gw1"}, PeerName: "agent1", PeerNamespace: netlink.NsFd(int(g.agent))}); err != nil {
		t.Fatalf("creating the IPv6 agent link: %v", err)
	}
	addAddrs(t, hA, "gw1", gw6Listen+"/64")
	addAddrs(t, hA, "gw0", gw0Other6+"/64")
	addAddrs(t, hG, "agent1", gw6Agent+"/64")
	addAddrs(t, hI, "inet0", forged4.String()+"/32", forged6.String()+"/128")
	agent1, _ := hG.LinkByName("agent1")
	if err := hG.RouteAdd(&netlink.Route{LinkIndex: agent1.Attrs().Index, Gw: net.ParseIP(gw6Listen)}); err != nil {
		t.Fatalf("the agent's IPv6 default route: %v", err)
	}
	sysctl(t, g.aileron, "1", "ipv4/ip_forward", "ipv6/conf/all/forwarding")
	sysctl(t, g.aileron, "0", "ipv4/conf/all/rp_filter", "ipv4/conf/default/rp_filter", "ipv4/conf/gw0/rp_filter", "ipv4/conf/gw1/rp_filter")

	var v4, v6 struct{ ID, Source, DNS, Link string }
	if err := json.Unmarshal([]byte(g.d.cli(t, "sandbox", "attach", "--session", g.session, "--source", gwSource, "--listen", gwListen, "--json")), &v4); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := g.d.run(t.Context(), "sandbox", "attach", "--session", g.session, "--source", "2001:db8:101::/64", "--listen", gw0Other6)
	if err == nil || !hasWords(stderr, v4.ID, "already serves interface gw0", "aileron sandbox close "+v4.ID) {
		t.Errorf("a second gateway on gw0: %v %q; want a refusal naming %s and what to do", err, stderr, v4.ID)
	}
	if err := json.Unmarshal([]byte(g.d.cli(t, "sandbox", "attach", "--session", g.session, "--source", gw6Source, "--listen", gw6Listen, "--json")), &v6); err != nil {
		t.Fatal(err)
	}
	checkGatewayLinks(t, g, map[string]string{v4.ID: "gw0", v6.ID: "gw1"}, map[string]string{v4.ID: v4.Link, v6.ID: v6.Link})
	for _, c := range []struct{ server, qtype string }{{gwListen, "A"}, {gw6Listen, "AAAA"}} {
		checkGatewayDNS(t, g, c.server, c.qtype)
	}

	gw0, _ := hA.LinkByName("gw0")
	gw1, _ := hA.LinkByName("gw1")
	listen4, listen6 := netip.MustParseAddr(gwListen), netip.MustParseAddr(gw6Listen)
	var onGW0, onGW1 = forgedSet(t, forged4, listen4), forgedSet(t, forged4, netip.Addr{})
	onGW0 = append(onGW0, forgedSet(t, forged6, netip.Addr{})...) // the other family on the IPv4 gateway's interface
	onGW1 = append(onGW1, forgedSet(t, forged6, listen6)...)
	sendFrames(t, g.agent, "agent0", gw0.Attrs().HardwareAddr, onGW0)
	sendFrames(t, g.agent, "agent1", gw1.Attrs().HardwareAddr, onGW1)

	probeRefusals(t, g.agent, far4)
	probeRefusals(t, g.agent, far6)
	auditNames(t, g.d, g.session, map[netip.Addr]bool{
		forged4: true, forged6: true,
		netip.MustParseAddr(gwAgent): false, netip.MustParseAddr(gw6Agent): false,
	})
	checkGatewayOtherFamily(t, g)
	checkNoAnswerTo(t, len(onGW0)+len(onGW1), capA.stop(), capI.stop())
}

// checkGatewayLinks: each gateway of want (ID → the interface it takes)
// names that interface as its link, in attach --json (got) and in the LINK
// column of sandbox list.
func checkGatewayLinks(t *testing.T, g *gatewayWorld, want, got map[string]string) {
	t.Helper()
	table := g.d.cli(t, "sandbox", "list")
	for id, iface := range want {
		if got[id] != iface {
			t.Errorf("attach --json named %s's link %q; want its interface %s", id, got[id], iface)
		}
		shown := false
		for _, line := range strings.Split(table, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == id {
				shown = f[len(f)-1] == iface
			}
		}
		if !shown {
			t.Errorf("sandbox list does not show %s's interface %s in LINK:\n%s", id, iface, table)
		}
	}
}

// checkGatewayDNS: the gateway listening on server answers a query of
// qtype for the allowed host, from the agent's namespace.
func checkGatewayDNS(t *testing.T, g *gatewayWorld, server, qtype string) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(fenceHost+".", dns.StringToType[qtype])
	var r *dns.Msg
	err := inNetns(g.agent, func() (err error) {
		r, err = dns.Exchange(q, net.JoinHostPort(server, "53"))
		return err
	})
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("%s query to the gateway on %s: %v %v; want one answer", qtype, server, r, err)
	}
	if err == nil && strings.Contains(r.String(), "REFUSED") {
		t.Errorf("%s query refused by %s", qtype, server)
	}
}
