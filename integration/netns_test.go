//go:build linux

package integration

import (
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func nsHandle(t *testing.T, ns netns.NsHandle) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// inNetns runs fn on an OS thread inside ns; the thread is discarded after.
func inNetns(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// addAddrs assigns addrs to link name (IPv6 without DAD) and brings it up.
func addAddrs(t *testing.T, h *netlink.Handle, name string, addrs ...string) {
	t.Helper()
	k, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		p := netip.MustParsePrefix(a)
		ad := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if p.Addr().Is6() {
			ad.Flags = unix.IFA_F_NODAD
		}
		if err := h.AddrAdd(k, ad); err != nil {
			t.Fatalf("address %s on %s: %v", a, name, err)
		}
	}
	if err := h.LinkSetUp(k); err != nil {
		t.Fatal(err)
	}
}

// frame is one packet an AF_PACKET capture saw.
type frame struct {
	link     string
	outgoing bool
	data     []byte
}

// capture records every frame on every link of a namespace, links made
// later included, from start until stop.
type capture struct {
	fd     int
	mu     sync.Mutex
	frames []frame
	names  map[int]string
	h      *netlink.Handle
	done   chan struct{}
}

func startCapture(t *testing.T, ns netns.NsHandle) *capture {
	t.Helper()
	c := &capture{names: map[int]string{}, h: nsHandle(t, ns), done: make(chan struct{})}
	err := inNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		c.fd = fd
		return err
	})
	if err != nil {
		t.Fatalf("AF_PACKET capture: %v", err)
	}
	_ = unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) // bursts of hundreds of frames, none lost
	go c.read()
	return c
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *capture) read() {
	defer close(c.done)
	buf := make([]byte, 65536)
	for {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			return
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok {
			continue
		}
		c.mu.Lock()
		name, ok := c.names[ll.Ifindex]
		if !ok {
			if k, err := c.h.LinkByIndex(ll.Ifindex); err == nil {
				name = k.Attrs().Name
				c.names[ll.Ifindex] = name
			}
		}
		c.frames = append(c.frames, frame{link: name, outgoing: ll.Pkttype == unix.PACKET_OUTGOING, data: append([]byte(nil), buf[:n]...)})
		c.mu.Unlock()
	}
}

func (c *capture) stop() []frame {
	_ = unix.Shutdown(c.fd, unix.SHUT_RDWR)
	_ = unix.Close(c.fd)
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frames
}

// flow is what one frame carries, for the assertions.
type flow struct {
	l3    string // "ip", "arp", "nd" (IPv6 neighbour discovery), or the EtherType
	src   netip.Addr
	dst   netip.Addr
	proto string // tcp, udp, icmp, icmpv6
	sport int
	dport int
}

func (f flow) String() string {
	return f.l3 + " " + f.proto + " " + netip.AddrPortFrom(f.src, uint16(f.sport)).String() + " → " + netip.AddrPortFrom(f.dst, uint16(f.dport)).String()
}

func decode(data []byte) flow {
	p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
	var f flow
	switch {
	case p.Layer(layers.LayerTypeARP) != nil:
		return flow{l3: "arp"}
	case p.Layer(layers.LayerTypeIPv4) != nil:
		ip := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		f.l3, f.src, f.dst = "ip", addrOf(ip.SrcIP), addrOf(ip.DstIP)
	case p.Layer(layers.LayerTypeIPv6) != nil:
		ip := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		f.l3, f.src, f.dst = "ip", addrOf(ip.SrcIP), addrOf(ip.DstIP)
	default:
		if e, ok := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet); ok {
			return flow{l3: e.EthernetType.String()}
		}
		return flow{l3: "undecodable"}
	}
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		f.proto, f.sport, f.dport = "tcp", int(l.SrcPort), int(l.DstPort)
	case *layers.UDP:
		f.proto, f.sport, f.dport = "udp", int(l.SrcPort), int(l.DstPort)
	}
	if ic, ok := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ok {
		f.proto = "icmpv6"
		if t := ic.TypeCode.Type(); t >= 133 && t <= 136 || t == 143 {
			f.l3 = "nd"
		}
	}
	if p.Layer(layers.LayerTypeICMPv4) != nil {
		f.proto = "icmp"
	}
	return f
}

func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// containsSecret reports whether any frame holds secret's bytes.
func containsSecret(frames []frame, secret string) bool {
	for _, f := range frames {
		if strings.Contains(string(f.data), secret) {
			return true
		}
	}
	return false
}
