package fence

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nfnetlink_log, spoken directly: the subsystem, its messages and
// attributes (linux/netfilter/nfnetlink_log.h).
const (
	nfnlSubsysULOG   = 4
	nfulnlMsgPacket  = 0
	nfulnlMsgConfig  = 1
	nfulaCfgCmd      = 1
	nfulaCfgMode     = 2
	nfulaCfgTimeout  = 3
	nfulaCfgQThresh  = 4
	nfulaPayload     = 9
	nfulaPrefix      = 10
	nfulnlCmdBind    = 1
	nfulnlCopyPacket = 2
	copyRange        = 128 // enough for the IP and transport headers
)

// blocked is one packet the fence rejected (or, foreign, dropped for its
// source), as NFLOG reported it.
type blocked struct {
	proto   string
	src     netip.Addr
	dst     netip.Addr
	port    int
	foreign bool
}

// openNFLOG binds NFLOG group in the namespace nsFD (0: this one).
func openNFLOG(nsFD int, group uint16) (*netlink.Conn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: nsFD})
	if err != nil {
		return nil, err
	}
	cfg := func(attr uint16, val []byte) error {
		ae := netlink.NewAttributeEncoder()
		ae.Bytes(attr, val)
		b, err := ae.Encode()
		if err != nil {
			return err
		}
		hdr := []byte{unix.AF_UNSPEC, 0, 0, 0}
		binary.BigEndian.PutUint16(hdr[2:], group)
		_, err = c.Execute(netlink.Message{
			Header: netlink.Header{Type: netlink.HeaderType(nfnlSubsysULOG<<8 | nfulnlMsgConfig),
				Flags: netlink.Request | netlink.Acknowledge},
			Data: append(hdr, b...),
		})
		return err
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = nfulnlCopyPacket
	if err := cfg(nfulaCfgCmd, []byte{nfulnlCmdBind}); err != nil {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetOption(netlink.NoENOBUFS, true) // best effort: readNFLOG copes either way
	one, zero := binary.BigEndian.AppendUint32(nil, 1), binary.BigEndian.AppendUint32(nil, 0)
	for _, a := range []struct {
		attr uint16
		val  []byte
	}{{nfulaCfgMode, mode}, {nfulaCfgQThresh, one}, {nfulaCfgTimeout, zero}} { // each packet at once
		if err := cfg(a.attr, a.val); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// readNFLOG calls fn for each logged packet until c is closed. An
// overrun (ENOBUFS: the kernel dropped messages) loses those messages
// only, never the reader.
func readNFLOG(c *netlink.Conn, fn func(blocked)) {
	for {
		msgs, err := c.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			continue
		}
		if err != nil {
			return
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(nfnlSubsysULOG<<8|nfulnlMsgPacket) || len(m.Data) < 4 {
				continue
			}
			ad, err := netlink.NewAttributeDecoder(m.Data[4:])
			if err != nil {
				continue
			}
			var b blocked
			ok, foreign := false, false
			for ad.Next() {
				switch ad.Type() {
				case nfulaPayload:
					b, ok = parsePacket(ad.Bytes())
				case nfulaPrefix:
					foreign = strings.TrimRight(ad.String(), "\x00") == foreignPrefix
				}
			}
			if ok {
				b.foreign = foreign
				fn(b)
			}
		}
	}
}

// parsePacket reads the protocol, source, destination and destination
// port of an IPv4 or IPv6 packet (extension headers are not followed).
func parsePacket(p []byte) (blocked, bool) {
	if len(p) < 1 {
		return blocked{}, false
	}
	var proto byte
	var l4 []byte
	var b blocked
	switch p[0] >> 4 {
	case 4:
		ihl := int(p[0]&0x0f) * 4
		if len(p) < 20 || ihl < 20 || len(p) < ihl {
			return blocked{}, false
		}
		proto, b.src, b.dst, l4 = p[9], netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20])), p[ihl:]
	case 6:
		if len(p) < 40 {
			return blocked{}, false
		}
		proto, b.src, b.dst, l4 = p[6], netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])), p[40:]
	default:
		return blocked{}, false
	}
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		b.proto = "udp"
		if proto == unix.IPPROTO_TCP {
			b.proto = "tcp"
		}
		if len(l4) >= 4 {
			b.port = int(binary.BigEndian.Uint16(l4[2:4]))
		}
	case unix.IPPROTO_ICMP:
		b.proto = "icmp"
	case unix.IPPROTO_ICMPV6:
		b.proto = "icmpv6"
	default:
		b.proto = "ip-proto-" + strconv.Itoa(int(proto))
	}
	return b, true
}
