package dataplane

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		ip, want string
	}{
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"2606:4700:4700::1111", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"100.100.100.200", "metadata"},
		{"169.254.1.1", "link_local"},
		{"fe80::1", "link_local"},
		{"fe80::1%eth0", "link_local"},
		{"100.64.0.1", "cgnat"},
		{"100.127.255.255", "cgnat"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"240.0.0.1", "reserved"},
		{"192.0.2.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"::ffff:127.0.0.1", "ipv4_mapped(loopback)"},
		{"::ffff:169.254.169.254", "ipv4_mapped(metadata)"},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::7f00:1", "nat64(loopback)"},
		{"64:ff9b::a9fe:a9fe", "nat64(metadata)"},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::1", "nat64_local"},
		{"2002:7f00:1::1", "6to4(loopback)"},
		{"2002:c0a8:101::1", "6to4(private)"},
		{"2002:808:808::1", ""},
		// Teredo: client 127.0.0.1 stored inverted as 80ff:fffe.
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "teredo(loopback)"},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},
		{"::7f00:1", "ipv4_compatible(loopback)"},
	} {
		got := Classify(netip.MustParseAddr(c.ip))
		if got != c.want {
			t.Errorf("Classify(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
}

// recordingDial stands in for the network: it records what the guard
// decided to dial instead of dialling.
type recordingDial struct{ dialled []string }

func (r *recordingDial) dial(_ context.Context, _, addr string) (net.Conn, error) {
	r.dialled = append(r.dialled, addr)
	return nil, errors.New("recorded, not dialled")
}

type fixedResolver map[string][]netip.Addr

func (f fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func TestGuardVetsEveryAddress(t *testing.T) {
	res := fixedResolver{
		"public.example":   addrs("93.184.216.34"),
		"private.example":  addrs("10.0.0.5"),
		"mixed.example":    addrs("127.0.0.1", "93.184.216.34"),
		"rebind.example":   addrs("169.254.169.254"),
		"mapped.example":   addrs("::ffff:127.0.0.1"),
		"allowed.example":  addrs("127.0.0.2"),
		"selfname.example": addrs("127.0.0.2"),
	}
	for _, c := range []struct {
		name, addr string
		resolve    map[string]netip.AddrPort
		wantDial   []string
		wantClass  string
	}{
		{name: "public name", addr: "public.example:443", wantDial: []string{"93.184.216.34:443"}},
		{name: "name resolving to private", addr: "private.example:443", wantClass: "private"},
		{name: "mixed answer dials only the vetted address", addr: "mixed.example:443", wantDial: []string{"93.184.216.34:443"}},
		{name: "metadata", addr: "rebind.example:443", wantClass: "metadata"},
		{name: "ipv4-mapped loopback", addr: "mapped.example:443", wantClass: "ipv4_mapped(loopback)"},
		{name: "literal metadata", addr: "169.254.169.254:443", wantClass: "metadata"},
		{name: "literal mapped", addr: "[::ffff:127.0.0.1]:443", wantClass: "ipv4_mapped(loopback)"},
		{name: "literal v6 loopback", addr: "[::1]:443", wantClass: "loopback"},
		{name: "resolve override is classified too", addr: "api.example.com:443",
			resolve: map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort("127.0.0.1:8443")}, wantClass: "loopback"},
		{name: "allow list", addr: "allowed.example:8443", wantDial: []string{"127.0.0.2:8443"}},
		{name: "the proxy's own address even when allowed", addr: "selfname.example:9080", wantClass: "the daemon's own address"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rd := &recordingDial{}
			g := &Guard{Resolver: res, Resolve: c.resolve, Dial: rd.dial,
				Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}
			g.AddSelf(netip.MustParseAddrPort("127.0.0.2:9080"))
			_, err := g.DialContext(context.Background(), "tcp", c.addr)
			var ae *AddrError
			if c.wantClass != "" {
				if !errors.As(err, &ae) || !errors.Is(err, ErrPrivateAddress) {
					t.Fatalf("err = %v, want *AddrError wrapping ErrPrivateAddress", err)
				}
				if ae.Class != c.wantClass {
					t.Errorf("class = %q, want %q", ae.Class, c.wantClass)
				}
				if len(rd.dialled) != 0 {
					t.Errorf("dialled %v despite refusing", rd.dialled)
				}
				return
			}
			if errors.As(err, &ae) {
				t.Fatalf("refused: %v", err)
			}
			if len(rd.dialled) != len(c.wantDial) || rd.dialled[0] != c.wantDial[0] {
				t.Errorf("dialled %v, want %v", rd.dialled, c.wantDial)
			}
		})
	}
}

// TestGuardWildcardSelf: a listener on 0.0.0.0 or :: answers on every
// loopback address, so each is the daemon's own at that port, however
// wide egress.allow_cidrs is; other ports stay allowed.
func TestGuardWildcardSelf(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:9091", "[::]:9091"} {
		rd := &recordingDial{}
		g := &Guard{Dial: rd.dial, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
		g.AddSelf(netip.MustParseAddrPort(listen))
		for _, addr := range []string{"127.0.0.2:9091", "127.9.9.9:9091", "[::1]:9091", "0.0.0.0:9091"} {
			var ae *AddrError
			if _, err := g.DialContext(context.Background(), "tcp", addr); !errors.As(err, &ae) || ae.Class != "the daemon's own address" {
				t.Errorf("listening on %s, dial %s: %v, want the daemon's own address", listen, addr, err)
			}
		}
		if _, err := g.DialContext(context.Background(), "tcp", "127.0.0.2:9092"); len(rd.dialled) != 1 {
			t.Errorf("listening on %s, another port: %v, want it dialled", listen, err)
		}
	}
	// ... and on every address of the machine, read at the dial (a test
	// dial: recorded, never sent).
	if ifas, _ := net.InterfaceAddrs(); len(ifas) > 0 {
		g := &Guard{Dial: (&recordingDial{}).dial, Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
		g.AddSelf(netip.MustParseAddrPort("0.0.0.0:9091"))
		for _, a := range ifas {
			p, err := netip.ParsePrefix(a.String())
			if err != nil {
				continue
			}
			var ae *AddrError
			if _, err := g.DialContext(context.Background(), "tcp", netip.AddrPortFrom(p.Addr(), 9091).String()); !errors.As(err, &ae) {
				t.Errorf("wildcard listener, dial the machine's %s: %v, want the daemon's own address", p.Addr(), err)
			}
		}
	}
	// A listener on one address is reached by dialling 0.0.0.0 or :: too.
	rd := &recordingDial{}
	g := &Guard{Dial: rd.dial, Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}
	g.AddSelf(netip.MustParseAddrPort("127.0.0.1:9080"))
	for _, addr := range []string{"0.0.0.0:9080", "[::]:9080", "127.0.0.1:9080"} {
		var ae *AddrError
		if _, err := g.DialContext(context.Background(), "tcp", addr); !errors.As(err, &ae) || ae.Class != "the daemon's own address" {
			t.Errorf("listening on 127.0.0.1:9080, dial %s: %v, want the daemon's own address", addr, err)
		}
	}
	if _, err := g.DialContext(context.Background(), "tcp", "127.0.0.2:9080"); len(rd.dialled) != 1 {
		t.Errorf("another loopback address (no listener there): %v, want it dialled", err)
	}
}

// TestGuardForgetsClosedSelf: an address added twice stays self until
// removed twice; then the guard judges it like any other.
func TestGuardForgetsClosedSelf(t *testing.T) {
	g := &Guard{}
	ap := netip.MustParseAddrPort("10.237.0.1:443")
	g.AddSelf(ap)
	g.AddSelf(ap)
	g.removeSelf(ap)
	if !g.isSelf(ap.Addr(), ap.Port()) {
		t.Fatal("one of two listeners on the address closed, and the address stopped being self")
	}
	g.removeSelf(ap)
	if g.isSelf(ap.Addr(), ap.Port()) || len(g.self) != 0 {
		t.Fatalf("both closed, and %v is still self (%v)", ap, g.self)
	}
}
