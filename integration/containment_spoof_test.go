//go:build linux

package integration

import (
	"encoding/json"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/gopacket/gopacket"
	"github.com/vishvananda/netns"

	"github.com/aileronhq/aileron/internal/nstest"
)

// TestFencedSandboxNeverAnswersForgedSources is the second half of
// invariant 11 for `sandbox run`: a process in the sandbox's namespace
// with a raw socket (stronger than any command there: none holds
// CAP_NET_RAW) that forges a source address gets no answer sent to it,
// over IPv4 and IPv6, TCP, UDP and ICMP: the inside fence logs the packet
// as foreign and drops it. With the inside fence removed, the daemon's
// end drops it too, even past its new-flow limit (which resets what it
// refuses). All this with forwarding on in the daemon's namespace and
// rp_filter off. The sandbox's own address is refused at once, and the audit lines
// name each packet's source.
func TestFencedSandboxNeverAnswersForgedSources(t *testing.T) {
	w, capA, capI := newFenceWorld(t)
	addAddrs(t, nsHandle(t, w.inet), "inet0", forged4.String()+"/32", forged6.String()+"/128")
	sysctl(t, w.aileron, "1", "ipv4/ip_forward", "ipv6/conf/all/forwarding")
	sysctl(t, w.aileron, "0", "ipv4/conf/all/rp_filter", "ipv4/conf/default/rp_filter")
	sb, ns := waitingSandbox(t, w)
	dns := netip.MustParseAddr(sb.DNS)
	pkts := forgedSet(t, forged4, dns)
	pkts = append(pkts, forgedSet(t, forged6, netip.Addr{})...)
	sendRawIn(t, ns, pkts)
	for _, far := range []netip.Addr{far4, far6} {
		probeRefusals(t, ns, far) // the sandbox's own addresses
	}
	auditNames(t, w.d, w.session, map[netip.Addr]bool{forged4: true, forged6: true,
		netip.MustParseAddr(sb.Address): false, netip.MustParseAddr(sb.Address6): false})

	// The daemon's end alone: the inside fence gone, forged SYNs to the
	// sandbox's DNS port, past the new-flow limit.
	removeInsideFence(t, ns)
	_ = linkLocal(t, ns, "eth0") // the kernel solicits a neighbour for a forged source from it
	flood := pkts
	for i := range 250 {
		flood = append(flood, forgedPacket(t, netip.AddrPortFrom(forged4, uint16(20000+i)), netip.AddrPortFrom(dns, 53), "tcp", uint32(i)))
	}
	sendRawIn(t, ns, flood)
	time.Sleep(300 * time.Millisecond) // an answer, were one sent, leaves at once
	checkNoAnswerTo(t, len(flood), capA.stop(), capI.stop())
}

// waitingSandbox starts `sandbox run --user root -- sleep` for w's session,
// killed in t's cleanup, and returns its listing and network namespace.
func waitingSandbox(t *testing.T, w *fenceWorld) (struct {
	PID                    int
	DNS, Address, Address6 string
}, netns.NsHandle) {
	t.Helper()
	var sb struct {
		PID                    int
		DNS, Address, Address6 string
	}
	cmd := exec.Command(w.d.s.bin, "sandbox", "run", "--session", w.session, "--user", "root", "--", "sleep", "120")
	cmd.Env, cmd.Dir = cleanEnv(w.d.home), "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for sb.PID == 0 && time.Now().Before(deadline) {
		var list []struct {
			PID                    int
			DNS, Address, Address6 string
		}
		if out, _, err := w.d.run(t.Context(), "sandbox", "list", "--json"); err == nil && json.Unmarshal([]byte(out), &list) == nil && len(list) == 1 {
			sb = list[0]
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sb.PID == 0 {
		t.Fatal("the sandbox did not come up")
	}
	ns, err := netns.GetFromPid(sb.PID)
	if err != nil {
		t.Fatalf("the sandbox's network namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	return sb, ns
}

// sendRawIn sends each IP packet from a raw socket in ns, through its
// output hook (its fence), whatever its source.
func sendRawIn(t *testing.T, ns netns.NsHandle, pkts [][]gopacket.SerializableLayer) {
	t.Helper()
	err := inNetns(ns, func() error {
		for _, p := range pkts {
			if err := nstest.SendRaw(serialize(t, p...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending from the sandbox's namespace: %v", err)
	}
}

// removeInsideFence deletes the sandbox's own nftables table, as a command
// able to would, leaving the daemon's end alone.
func removeInsideFence(t *testing.T, ns netns.NsHandle) {
	t.Helper()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		t.Fatal(err)
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "aileron_fence"})
	if err := c.Flush(); err != nil {
		t.Fatalf("removing the inside fence: %v", err)
	}
}
