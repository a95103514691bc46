// Package nstest creates the network namespaces the containment tests
// build their closed topologies in, and sends the raw packets those tests
// forge. Only tests import it (archtest enforces that); it imports
// vishvananda/netns and netlink, x/sys/unix and the standard library.
package nstest

import (
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// New creates a network namespace with lo up, closed in t's cleanup. It
// fails t, saying what is missing, when the kernel or the user cannot.
func New(t *testing.T) netns.NsHandle {
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
		t.Fatalf("creating a network namespace: %v (the test needs root and a kernel with network namespaces, veth and nf_tables)", err)
	}
	if err := netns.Set(orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("lo up: %v", err)
	}
	return ns
}
