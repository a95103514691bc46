package fence

import (
	"errors"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/nstest"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policydns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// in runs fn on a thread inside ns.
func in(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // the thread dies with the goroutine: never returned to the pool in ns
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

// insideFence makes a namespace with a sandbox's inside fence (its
// daemon's end at 192.0.2.1) and returns it, the fence's link, and what the
// fence reports through NFLOG, read until t's cleanup.
func insideFence(t *testing.T) (netns.NsHandle, link, <-chan blocked) {
	t.Helper()
	ns := nstest.New(t)
	l := link{host4: netip.MustParseAddr("192.0.2.1"), synth4: netip.MustParsePrefix("198.18.0.0/15"),
		synth6: netip.MustParsePrefix("fd00:a11e:5eed::/64")}
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	insideRules(c, l)
	if err := c.Flush(); err != nil {
		t.Fatalf("installing the fence (needs nf_tables): %v", err)
	}
	nl, err := openNFLOG(int(ns), nflogGroup)
	if err != nil {
		t.Fatalf("NFLOG: %v", err)
	}
	got, done := make(chan blocked, 64), make(chan struct{})
	go readNFLOG(nl, func(b blocked) {
		select {
		case got <- b:
		case <-done:
		}
	})
	t.Cleanup(func() { close(done); _ = nl.Close() })
	return ns, l, got
}

// TestInsideFenceRejectsAndLogs: in a namespace with the inside fence, a
// TCP connect to an outside address fails at once and is reported through
// NFLOG with its source and destination.
func TestInsideFenceRejectsAndLogs(t *testing.T) {
	ns, _, got := insideFence(t)
	in(t, ns, func() {
		// a link and route so the packet reaches the output hook
		h, _ := netlink.NewHandle()
		defer h.Close()
		d := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}
		if err := h.LinkAdd(d); err != nil {
			t.Errorf("veth: %v", err)
			return
		}
		_ = h.LinkSetUp(d)
		// the sandbox's own address: the source of what it sends
		if err := h.AddrAdd(d, &netlink.Addr{IPNet: &net.IPNet{IP: net.IP{192, 0, 2, 2}, Mask: net.CIDRMask(24, 32)}}); err != nil {
			t.Errorf("address: %v", err)
			return
		}
		if err := h.RouteAdd(&netlink.Route{LinkIndex: d.Attrs().Index, Dst: &net.IPNet{IP: net.IP{203, 0, 113, 0}, Mask: net.CIDRMask(24, 32)}}); err != nil {
			t.Errorf("route: %v", err)
			return
		}
		start := time.Now()
		_, err := net.DialTimeout("tcp", "203.0.113.9:443", time.Second)
		if err == nil || time.Since(start) > 100*time.Millisecond {
			t.Errorf("TCP connect to an outside address: %v after %v, want refused at once", err, time.Since(start))
		}
	})
	select {
	case b := <-got:
		if b.proto != "tcp" || b.src.String() != "192.0.2.2" || b.dst.String() != "203.0.113.9" || b.port != 443 || b.foreign {
			t.Fatalf("logged %+v", b)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the blocked connect was not reported through NFLOG")
	}
}

// TestOriginsBindListenersToTheirSandbox: a sandbox's transparent
// listeners accept only that sandbox's addresses, only destinations its
// DNS handed out, and nothing once it is closed.
func TestOriginsBindListenersToTheirSandbox(t *testing.T) {
	names, err := policydns.NewMap(policydns.DefaultV4, policydns.DefaultV6)
	if err != nil {
		t.Fatal(err)
	}
	given, _, err := names.Addrs("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	sess := &dataplane.Session{ID: "s_1"}
	m := &Manager{Session: func(string) (*dataplane.Session, error) { return sess, nil }}
	sb := &sandbox{info: Info{ID: "sbx-1", Session: "s_1"}, names: names, done: make(chan struct{}),
		link: link{sand4: netip.MustParseAddr("10.237.0.2"), sand6: netip.MustParseAddr("fd00:a11e:f00d::2")}}
	o := origins{m, sb}
	ap := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	for _, c := range []struct {
		src, dst netip.AddrPort
		want     error
	}{
		{ap("10.237.0.2:40000"), netip.AddrPortFrom(given, 443), nil},
		{ap("[fd00:a11e:f00d::2]:40000"), netip.AddrPortFrom(given, 443), nil},
		{ap("10.237.0.6:40000"), netip.AddrPortFrom(given, 443), dataplane.ErrProxyAuth}, // another sandbox
		{ap("10.237.0.2:40000"), ap("198.18.9.9:443"), dataplane.ErrNotResolved},         // never handed out
	} {
		s, host, err := o.Origin(c.src, c.dst)
		if c.want == nil && (err != nil || s != sess || host != "api.example.test") {
			t.Errorf("Origin(%s, %s) = %v, %q, %v; want the session and the name", c.src, c.dst, s, host, err)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("Origin(%s, %s) = %v; want %v", c.src, c.dst, err, c.want)
		}
	}
	close(sb.done)
	if _, _, err := o.Origin(ap("10.237.0.2:40000"), netip.AddrPortFrom(given, 443)); !errors.Is(err, dataplane.ErrProxyAuth) {
		t.Errorf("after close: %v; want ErrProxyAuth", err)
	}
}

// TestOpenRefusedAfterShutdown: once the daemon stops, no sandbox opens.
func TestOpenRefusedAfterShutdown(t *testing.T) {
	m := &Manager{Session: func(string) (*dataplane.Session, error) { return &dataplane.Session{ID: "s_1"}, nil }}
	m.Shutdown()
	if _, err := m.reserve(Info{Session: "s_1", PID: 99}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("reserve after Shutdown: %v; want ErrUnsupported", err)
	}
}
