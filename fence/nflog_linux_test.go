package fence

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
)

// FuzzParsePacket: NFLOG hands back what a sandbox sent; any bytes parse
// without a panic, and a packet taken names two addresses of its own
// family, read from where that family's header keeps them, and a port only
// for TCP or UDP.
func FuzzParsePacket(f *testing.F) {
	v4 := []byte{0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 203, 0, 113, 78, 198, 51, 100, 1, 0x30, 0x39, 0x01, 0xbb}
	v6 := make([]byte, 44)
	v6[0], v6[6] = 0x60, 17
	copy(v6[8:], netip.MustParseAddr("2001:db8::78").AsSlice())
	copy(v6[24:], netip.MustParseAddr("2001:db8::1").AsSlice())
	binary.BigEndian.PutUint16(v6[42:], 53)
	for _, seed := range [][]byte{v4, v6, v4[:19], {0x4f}, {0x60}, nil} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		b, ok := parsePacket(p)
		if !ok {
			return
		}
		switch p[0] >> 4 {
		case 4:
			if b.src != netip.AddrFrom4([4]byte(p[12:16])) || b.dst != netip.AddrFrom4([4]byte(p[16:20])) {
				t.Fatalf("IPv4 %x: %+v", p, b)
			}
		case 6:
			if b.src != netip.AddrFrom16([16]byte(p[8:24])) || b.dst != netip.AddrFrom16([16]byte(p[24:40])) {
				t.Fatalf("IPv6 %x: %+v", p, b)
			}
		default:
			t.Fatalf("version %d taken: %+v", p[0]>>4, b)
		}
		if b.port != 0 && b.proto != "tcp" && b.proto != "udp" || b.proto == "" || strings.ContainsAny(b.proto, " \n") {
			t.Fatalf("%x: protocol %q port %d", p, b.proto, b.port)
		}
	})
}
