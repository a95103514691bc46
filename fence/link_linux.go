package fence

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// link is one sandbox's wiring: names and addresses on both ends.
type link struct {
	hostName string     // the daemon's end of the veth ("" for a gateway)
	iface    string     // a gateway's interface: the one holding its listen address
	table    string     // the daemon-side nftables table
	host4    netip.Addr // the daemon's end: gateway, DNS and listeners
	host6    netip.Addr
	sand4    netip.Addr // the sandbox's end
	sand6    netip.Addr
	synth4   netip.Prefix // the DNS's synthetic ranges
	synth6   netip.Prefix
}

// wire creates the veth pair into the namespace nsFD, addresses and routes
// on both ends, and both nftables fences. On error it removes what it made.
func wire(nsFD int, l link) (err error) {
	inside, err := netlink.NewHandleAt(netns.NsHandle(nsFD))
	if err != nil {
		return fmt.Errorf("netlink in the sandbox's namespace: %w", err)
	}
	defer inside.Close()
	links, err := inside.LinkList()
	if err != nil {
		return fmt.Errorf("listing the sandbox's links: %w", err)
	}
	for _, k := range links {
		if k.Attrs().Name != "lo" {
			return fmt.Errorf("the sandbox's network namespace already has link %q: a fenced sandbox needs a new, empty one", k.Attrs().Name)
		}
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.hostName}, PeerName: "eth0", PeerNamespace: netlink.NsFd(nsFD)}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("creating veth %s: %w", l.hostName, err)
	}
	defer func() {
		if err != nil {
			unwire(l)
		}
	}()
	for _, knob := range []string{"accept_ra", "autoconf"} { // never take routes or addresses from a sandbox
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+l.hostName+"/"+knob, []byte("0"), 0o644)
	}
	if err := configure(l.hostName, []netip.Prefix{netip.PrefixFrom(l.host4, 30), netip.PrefixFrom(l.host6, 64)}); err != nil {
		return fmt.Errorf("the daemon's end: %w", err)
	}
	peer, err := inside.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("the sandbox's end: %w", err)
	}
	if err := up(inside, "lo", nil); err != nil {
		return err
	}
	if err := up(inside, "eth0", []netip.Prefix{netip.PrefixFrom(l.sand4, 30), netip.PrefixFrom(l.sand6, 64)}); err != nil {
		return err
	}
	for _, gw := range []netip.Addr{l.host4, l.host6} {
		if err := inside.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("the sandbox's route via %s: %w", gw, err)
		}
	}
	return fences(nsFD, l)
}

// fences installs the nftables fence inside the sandbox and on the
// daemon's end, each in one transaction.
func fences(nsFD int, l link) error {
	in, err := nftables.New(nftables.WithNetNSFd(nsFD))
	if err != nil {
		return err
	}
	insideRules(in, l)
	if err := in.Flush(); err != nil {
		return fmt.Errorf("installing the sandbox's nftables fence: %w", err)
	}
	host, err := nftables.New()
	if err != nil {
		return err
	}
	hostRules(host, l)
	if err := host.Flush(); err != nil {
		return fmt.Errorf("installing the daemon-side nftables fence %s: %w", l.table, err)
	}
	return nil
}

func configure(name string, addrs []netip.Prefix) error {
	h, err := netlink.NewHandle()
	if err != nil {
		return err
	}
	defer h.Close()
	return up(h, name, addrs)
}

// up assigns addrs to the link name (IPv6 without duplicate-address
// detection, so it can be bound at once) and brings it up.
func up(h *netlink.Handle, name string, addrs []netip.Prefix) error {
	k, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	for _, a := range addrs {
		ad := &netlink.Addr{IPNet: &net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())}}
		if a.Addr().Is6() {
			ad.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(k, ad); err != nil {
			return fmt.Errorf("address %s on %s: %w", a, name, err)
		}
	}
	if err := h.LinkSetUp(k); err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	return nil
}

// unwire removes the daemon's end of the veth (the kernel removes its
// peer with it) and the daemon-side table. Either may already be gone.
func unwire(l link) error {
	var errs []error
	if k, err := netlink.LinkByName(l.hostName); l.hostName != "" && err == nil { // a gateway has no link
		if err := netlink.LinkDel(k); err != nil {
			errs = append(errs, fmt.Errorf("removing veth %s: %w", l.hostName, err))
		}
	}
	if c, err := nftables.New(); err == nil {
		if ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet); err == nil {
			for _, t := range ts {
				if t.Name == l.table {
					c.DelTable(t)
					if err := c.Flush(); err != nil && !errors.Is(err, os.ErrNotExist) {
						errs = append(errs, fmt.Errorf("removing nftables table %s: %w", l.table, err))
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}
