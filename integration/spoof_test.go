//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Forged sources: addresses of the fake internet (routed there from the
// daemon's namespace) that a client or a sandbox puts on its packets, so
// that a refusal, were one sent, would carry its bytes there.
var (
	forged4 = netip.MustParseAddr("203.0.113.78")
	forged6 = netip.MustParseAddr("2001:db8:f::78")
	far4    = netip.MustParseAddr(fenceFar4)
	far6    = netip.MustParseAddr(fenceFar6)
)

// forgedPacket is an IP packet from src to dst: a TCP SYN (sequence
// number mark), a UDP datagram, an ICMP echo request (carrying mark) or,
// proto "rs", an IPv6 router solicitation.
func forgedPacket(t *testing.T, src, dst netip.AddrPort, proto string, mark uint32) []gopacket.SerializableLayer {
	t.Helper()
	var ip gopacket.NetworkLayer
	var ipl gopacket.SerializableLayer
	l4 := map[string]layers.IPProtocol{"tcp": layers.IPProtocolTCP, "udp": layers.IPProtocolUDP, "icmp": layers.IPProtocolICMPv4}[proto]
	if src.Addr().Is6() && (proto == "icmp" || proto == "rs") {
		l4 = layers.IPProtocolICMPv6
	}
	if src.Addr().Is4() {
		v4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: l4, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip, ipl = v4, v4
	} else {
		v6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: l4, SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		ip, ipl = v6, v6
	}
	payload := gopacket.Payload(fmt.Appendf(nil, "forged-%08x", mark))
	switch {
	case proto == "tcp":
		tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()), Seq: mark, SYN: true, Window: 64240}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{ipl, tcp}
	case proto == "udp":
		udp := &layers.UDP{SrcPort: layers.UDPPort(src.Port()), DstPort: layers.UDPPort(dst.Port())}
		_ = udp.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{ipl, udp, payload}
	case proto == "rs":
		ip.(*layers.IPv6).HopLimit = 255
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(133, 0)}
		_ = ic.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{ipl, ic, &layers.ICMPv6RouterSolicitation{}, payload}
	case src.Addr().Is4():
		return []gopacket.SerializableLayer{ipl, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 1}, payload}
	default:
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
		_ = ic.SetNetworkLayerForChecksum(ip)
		return []gopacket.SerializableLayer{ipl, ic, &layers.ICMPv6Echo{Identifier: 7, SeqNumber: 1}, payload}
	}
}

func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sendFrames puts each IP packet on link name of ns as an Ethernet frame
// to the MAC address to (AF_PACKET: no routing, no source check, as a
// client machine that owns its link can).
func sendFrames(t *testing.T, ns netns.NsHandle, name string, to net.HardwareAddr, pkts [][]gopacket.SerializableLayer) {
	t.Helper()
	k, err := nsHandle(t, ns).LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	err = inNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for _, p := range pkts {
			eth := &layers.Ethernet{SrcMAC: k.Attrs().HardwareAddr, DstMAC: to, EthernetType: layers.EthernetTypeIPv4}
			if _, ok := p[0].(*layers.IPv6); ok {
				eth.EthernetType = layers.EthernetTypeIPv6
			}
			frame := serialize(t, append([]gopacket.SerializableLayer{eth}, p...)...)
			sa := &unix.SockaddrLinklayer{Ifindex: k.Attrs().Index, Halen: 6}
			copy(sa.Addr[:], to)
			if err := unix.Sendto(fd, frame, 0, sa); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending frames on %s: %v", name, err)
	}
}

// sysctl writes value to each /proc/sys/net key in ns.
func sysctl(t *testing.T, ns netns.NsHandle, value string, keys ...string) {
	t.Helper()
	if err := inNetns(ns, func() error {
		for _, k := range keys {
			if err := os.WriteFile(filepath.Join("/proc/sys/net", k), []byte(value), 0o644); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// checkNoAnswerTo: no captured frame, in any namespace, is addressed to a
// forged source; and at least min frames from forged sources were seen
// arriving (so the check is not empty).
func checkNoAnswerTo(t *testing.T, min int, captures ...[]frame) {
	t.Helper()
	seen := 0
	for _, frames := range captures {
		for _, f := range frames {
			fl := decode(f.data)
			if fl.dst == forged4 || fl.dst == forged6 {
				t.Errorf("%s carried %s: an answer to a forged source", f.link, fl)
			}
			if (fl.src == forged4 || fl.src == forged6) && !f.outgoing {
				seen++
			}
		}
	}
	if seen < min {
		t.Errorf("the captures saw %d frames from forged sources arrive, want at least %d: the test proved nothing", seen, min)
	}
}

// refusedAtOnce reports whether err is a refusal (reset, ICMP error), not
// a timeout or success.
func refusedAtOnce(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// probeRefusals, from ns, opens a TCP connection to, and sends a UDP
// datagram to, dst (port 443 and 53), expecting each refused at once,
// not timed out.
func probeRefusals(t *testing.T, ns netns.NsHandle, dst netip.Addr) {
	t.Helper()
	_ = inNetns(ns, func() error {
		c, err := net.DialTimeout("tcp", netip.AddrPortFrom(dst, 443).String(), 3*time.Second)
		if err == nil {
			_ = c.Close()
		}
		if !refusedAtOnce(err) {
			t.Errorf("TCP to %s from a client's own address: %v; want a reset", dst, err)
		}
		u, err := net.Dial("udp", netip.AddrPortFrom(dst, 53).String())
		if err != nil {
			t.Errorf("UDP socket: %v", err)
			return nil
		}
		defer u.Close()
		_ = u.SetDeadline(time.Now().Add(3 * time.Second))
		_, _ = u.Write([]byte("probe"))
		_, err = u.Read(make([]byte, 64))
		if !refusedAtOnce(err) {
			t.Errorf("UDP to %s from a client's own address: %v; want an ICMP error", dst, err)
		}
		return nil
	})
}

// forgedSet is what a client sends with a forged source src (and a real
// destination of each family): TCP to the far address and to one of the
// gateway's own ports, UDP, ICMP echo and, for IPv6, a router
// solicitation to all routers (link multicast, yet sent to the gateway's
// own MAC address).
func forgedSet(t *testing.T, src netip.Addr, gatewayAddr netip.Addr) [][]gopacket.SerializableLayer {
	far := far4
	if src.Is6() {
		far = far6
	}
	var out [][]gopacket.SerializableLayer
	for i := range 3 {
		port := uint16(41000 + i)
		out = append(out,
			forgedPacket(t, netip.AddrPortFrom(src, port), netip.AddrPortFrom(far, 443), "tcp", 0x5ec0de00+uint32(i)),
			forgedPacket(t, netip.AddrPortFrom(src, port), netip.AddrPortFrom(far, 53), "udp", 0x5ec0de10+uint32(i)),
			forgedPacket(t, netip.AddrPortFrom(src, port), netip.AddrPortFrom(far, 0), "icmp", 0x5ec0de20+uint32(i)))
		if gatewayAddr.IsValid() && gatewayAddr.Is4() == src.Is4() {
			out = append(out, forgedPacket(t, netip.AddrPortFrom(src, port), netip.AddrPortFrom(gatewayAddr, 443), "tcp", 0x5ec0de30+uint32(i)))
		}
		if src.Is6() {
			out = append(out, forgedPacket(t, netip.AddrPortFrom(src, 0), netip.AddrPortFrom(netip.MustParseAddr("ff02::2"), 0), "rs", 0))
		}
	}
	return out
}

// auditNames waits until session's audit holds a sandbox.egress_blocked
// line naming each client of want as its source, then checks that the
// lines of each are marked foreign (dropped unanswered) exactly when want
// says.
func auditNames(t *testing.T, d *daemon, session string, want map[netip.Addr]bool) {
	t.Helper()
	blocked := func(l auditLine, client netip.Addr) bool {
		return l.str("event") == "sandbox.egress_blocked" && l.str("session") == session && l.str("client") == client.String()
	}
	lines := waitAudit(t, d, "refusals naming their sources", func(lines []auditLine) bool {
		for client := range want {
			if !slices.ContainsFunc(lines, func(l auditLine) bool { return blocked(l, client) }) {
				t.Logf("not yet audited: a refusal from %s", client)
				return false
			}
		}
		return true
	})
	for client, foreign := range want {
		for _, l := range lines {
			if blocked(l, client) && (l.detail("foreign_source") == "true") != foreign {
				t.Errorf("audit line %s: foreign_source %q, want it only for a source the client does not own", l.Raw, l.detail("foreign_source"))
			}
		}
	}
}

// hasWords reports whether s contains each of words.
func hasWords(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
