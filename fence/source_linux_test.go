package fence

import (
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aileronhq/aileron/internal/nstest"
)

// spoofed is an IP packet from src to dst: a TCP SYN whose sequence
// number is mark, or a UDP datagram carrying mark.
func spoofed(t *testing.T, src, dst netip.AddrPort, tcp bool, mark uint32) []byte {
	t.Helper()
	var ip interface {
		gopacket.SerializableLayer
		gopacket.NetworkLayer
	}
	proto := layers.IPProtocolUDP
	if tcp {
		proto = layers.IPProtocolTCP
	}
	if src.Addr().Is4() {
		ip = &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	} else {
		ip = &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
	}
	var l4 interface {
		gopacket.SerializableLayer
		SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
	}
	payload := gopacket.Payload{byte(mark >> 24), byte(mark >> 16), byte(mark >> 8), byte(mark)}
	if tcp {
		l4, payload = &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: mark, SYN: true, Window: 64240}, nil
	} else {
		l4 = &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
	}
	if err := l4.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, l4, payload); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// linkCapture records the frames leaving one link, from the thread's
// namespace.
type linkCapture struct {
	fd     int
	mu     sync.Mutex
	frames [][]byte
	done   chan struct{}
}

func captureOut(ifindex int) (*linkCapture, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	c := &linkCapture{fd: fd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		buf := make([]byte, 65536)
		for {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				c.mu.Lock()
				c.frames = append(c.frames, append([]byte(nil), buf[:n]...))
				c.mu.Unlock()
			}
		}
	}()
	return c, nil
}

func (c *linkCapture) stop() [][]byte {
	_ = unix.Shutdown(c.fd, unix.SHUT_RDWR)
	_ = unix.Close(c.fd)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// TestInsideFenceDropsForeignSources: a packet a sandbox sends with a
// source it does not own (a root process with a raw socket forging one)
// is reported through NFLOG as foreign, with that source, and dropped:
// no reset or ICMP error leaves the sandbox's link for the forged address,
// over IPv4 or IPv6, TCP or UDP. Without the check, the fence's refusal
// would carry the packet's chosen bytes to that address.
func TestInsideFenceDropsForeignSources(t *testing.T) {
	ns, l, got := insideFence(t)
	forged4, forged6 := netip.MustParseAddr("203.0.113.78"), netip.MustParseAddr("2001:db8:f::78")
	far4, far6 := netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("2001:db8:f::9")
	frames := watchSandboxLink(t, ns, func() {
		for i, c := range []struct {
			src, dst netip.AddrPort
			tcp      bool
		}{
			{netip.AddrPortFrom(forged4, 40001), netip.AddrPortFrom(far4, 443), true},
			{netip.AddrPortFrom(forged4, 40002), netip.AddrPortFrom(far4, 53), false},
			{netip.AddrPortFrom(forged6, 40003), netip.AddrPortFrom(far6, 443), true},
			{netip.AddrPortFrom(forged6, 40004), netip.AddrPortFrom(far6, 53), false},
			{netip.AddrPortFrom(forged4, 40005), netip.AddrPortFrom(l.host4, 53), true}, // to Aileron's DNS: allowed, were the source its own
		} {
			if err := nstest.SendRaw(spoofed(t, c.src, c.dst, c.tcp, 0x5ec0de00+uint32(i))); err != nil {
				t.Errorf("sending %s → %s: %v", c.src, c.dst, err)
			}
		}
		want := map[netip.Addr]int{forged4: 3, forged6: 2}
		deadline := time.After(3 * time.Second)
		for want[forged4]+want[forged6] > 0 {
			select {
			case b := <-got:
				if !b.foreign || want[b.src] == 0 {
					t.Errorf("NFLOG reported %s %s → %s (foreign %v); want the forged sources, marked foreign", b.proto, b.src, b.dst, b.foreign)
				}
				want[b.src]--
			case <-deadline:
				t.Errorf("NFLOG did not report every forged packet as foreign: %v still missing", want)
				want = nil
			}
		}
	})
	checkLinkQuiet(t, frames, "a forged source got an answer")
}

// TestInsideFenceLogsListenerQueries: of multicast listener discovery, a
// sandbox's kernel sends reports, which the inside fence drops without an
// audit line; a query, which no sandbox has to send, is refused and
// reported through NFLOG like any other packet, and leaves the link no
// more than a report does.
func TestInsideFenceLogsListenerQueries(t *testing.T) {
	ns, _, got := insideFence(t)
	own, query := netip.MustParseAddr("fe80::2"), netip.MustParseAddr("ff02::1")
	frames := watchSandboxLink(t, ns, func() {
		for _, m := range []struct {
			dst  string
			typ  uint8
			body []byte
		}{
			{"ff02::16", icmp6ListenerReportV2, make([]byte, 4)}, // no records
			{query.String(), 130, make([]byte, 20)},              // a general query
		} {
			if err := nstest.SendRaw(listenerMessage(t, own, netip.MustParseAddr(m.dst), m.typ, m.body)); err != nil {
				t.Errorf("sending ICMPv6 %d: %v", m.typ, err)
			}
		}
		for deadline := time.After(3 * time.Second); ; {
			select {
			case b := <-got:
				if b.proto != "icmpv6" || b.src != own || b.dst != query || b.foreign {
					t.Errorf("NFLOG reported %s %s → %s (foreign %v); want only the query, from the sandbox's own address", b.proto, b.src, b.dst, b.foreign)
					continue
				}
			case <-deadline:
				t.Error("NFLOG did not report the multicast listener query")
			}
			break
		}
	})
	checkLinkQuiet(t, frames, "a multicast listener query left the sandbox")
}

// listenerMessage is an ICMPv6 message of type typ from src to dst, body
// after its four-byte header.
func listenerMessage(t *testing.T, src, dst netip.Addr, typ uint8, body []byte) []byte {
	t.Helper()
	ip := &layers.IPv6{Version: 6, HopLimit: 1, NextHeader: layers.IPProtocolICMPv6, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	if err := ic.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ip, ic, gopacket.Payload(body)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// watchSandboxLink makes, in ns, a sandbox's link (sandboxLink), runs fn
// there, and returns the frames that left by the link meanwhile and in the
// 200 ms after (an answer, were one sent, leaves at once).
func watchSandboxLink(t *testing.T, ns netns.NsHandle, fn func()) [][]byte {
	t.Helper()
	var frames [][]byte
	in(t, ns, func() {
		v0 := sandboxLink(t)
		if v0 == nil {
			return
		}
		capt, err := captureOut(v0.Attrs().Index)
		if err != nil {
			t.Errorf("capture: %v", err)
			return
		}
		fn()
		time.Sleep(200 * time.Millisecond)
		frames = capt.stop()
	})
	return frames
}

// checkLinkQuiet fails t, saying why that matters, for each of frames
// that is more than the kernel's own link chatter.
func checkLinkQuiet(t *testing.T, frames [][]byte, why string) {
	t.Helper()
	for _, f := range frames {
		p := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if nl := p.NetworkLayer(); nl != nil && !linkChatter(p) {
			t.Errorf("the sandbox's link carried %v → %v: %s", nl.NetworkFlow().Src(), nl.NetworkFlow().Dst(), why)
		}
	}
}

// linkChatter reports whether p is the kernel's own neighbour discovery or
// multicast listener report, which a link carries whatever the fence does
// (a report only where no fence drops it).
func linkChatter(p gopacket.Packet) bool {
	ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
	if !ok {
		return false
	}
	switch ic.TypeCode.Type() {
	case 131, 132, 133, 134, 135, 136, 143:
		return true
	}
	return false
}

// sandboxLink makes, in the thread's namespace, a sandbox's link: veth v0
// with the sandbox's addresses (its link-local one fe80::2, without
// duplicate address detection), routes to the far ranges through a next
// hop whose neighbour entry is fixed (so an answer would leave at once,
// without resolution), and returns v0.
func sandboxLink(t *testing.T) netlink.Link {
	h, err := netlink.NewHandle()
	if err != nil {
		t.Error(err)
		return nil
	}
	defer h.Close()
	d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}
	if err := h.LinkAdd(d); err != nil {
		t.Errorf("veth: %v", err)
		return nil
	}
	peer, err := h.LinkByName("v1")
	if err == nil {
		err = h.LinkSetUp(peer)
	}
	if err == nil {
		err = h.LinkSetUp(d)
	}
	for _, a := range []string{"192.0.2.2/24", "2001:db8:2::2/64", "fe80::2/64"} {
		p := netip.MustParsePrefix(a)
		if err == nil {
			err = h.AddrAdd(d, &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: unix.IFA_F_NODAD})
		}
	}
	for _, r := range []struct{ dst, gw string }{{"203.0.113.0/24", "192.0.2.1"}, {"2001:db8:f::/48", "2001:db8:2::1"}} {
		if err != nil {
			break
		}
		err = h.NeighAdd(&netlink.Neigh{LinkIndex: d.Attrs().Index, IP: net.ParseIP(r.gw), HardwareAddr: peer.Attrs().HardwareAddr, State: netlink.NUD_PERMANENT})
		if err == nil {
			_, dst, _ := net.ParseCIDR(r.dst)
			err = h.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Dst: dst, Gw: net.ParseIP(r.gw)})
		}
	}
	if err != nil {
		t.Errorf("the sandbox's link: %v", err)
		return nil
	}
	return d
}
