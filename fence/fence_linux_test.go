package fence

import (
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// inNewNetns runs fn in a new network namespace (with lo up) on a locked
// thread and returns the namespace's handle; the caller closes it.
func newNetns(t *testing.T) netns.NsHandle {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("creating a network namespace (needs root and CONFIG_NET_NS): %v", err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, _ := h.LinkByName("lo")
	_ = h.LinkSetUp(lo)
	t.Cleanup(func() { ns.Close() })
	return ns
}

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

// TestInsideFenceRejectsAndLogs: in a namespace with the inside fence, a
// UDP datagram and a TCP connect to an outside address fail at once and
// are reported through NFLOG with their destination.
func TestInsideFenceRejectsAndLogs(t *testing.T) {
	ns := newNetns(t)
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
	nl, err := openNFLOG(int(ns))
	if err != nil {
		t.Fatalf("NFLOG: %v", err)
	}
	got := make(chan blocked, 16)
	go readNFLOG(nl, func(b blocked) { got <- b })
	defer nl.Close()
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
		if b.proto != "tcp" || b.dst.String() != "203.0.113.9" || b.port != 443 {
			t.Fatalf("logged %+v", b)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the blocked connect was not reported through NFLOG")
	}
}
