//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/nstest"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The agent's network (TEST-NET-2): the daemon is its gateway and DNS
// server, as the Aileron container is in examples/compose.
const (
	gwListen = "198.51.100.1"
	gwAgent  = "198.51.100.2"
	gwSource = "198.51.100.0/24"
)

// gatewayWorld is a fenceWorld plus an agent namespace whose only link
// and default route lead to the daemon's namespace.
type gatewayWorld struct {
	*fenceWorld
	agent   netns.NsHandle
	session string
	ca      string
	resolv  string
}

func newGatewayWorld(t *testing.T) (*gatewayWorld, *capture, *capture) {
	w, capA, capI := newFenceWorld(t)
	g := &gatewayWorld{fenceWorld: w, agent: nstest.New(t)}
	hA, hG := nsHandle(t, w.aileron), nsHandle(t, g.agent)
	if err := hA.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "gw0"}, PeerName: "agent0", PeerNamespace: netlink.NsFd(int(g.agent))}); err != nil {
		t.Fatalf("creating the agent's veth: %v", err)
	}
	addAddrs(t, hA, "gw0", gwListen+"/24")
	addAddrs(t, hG, "agent0", gwAgent+"/24")
	agent0, _ := hG.LinkByName("agent0")
	if err := hG.RouteAdd(&netlink.Route{LinkIndex: agent0.Attrs().Index, Gw: net.ParseIP(gwListen)}); err != nil {
		t.Fatalf("the agent's default route: %v", err)
	}
	if err := inNetns(g.agent, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("0 2147483647"), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	out := w.d.cli(t, "session", "create", "--name", "gateway", "--json")
	var info struct {
		ID           string
		CABundlePath string `json:"ca_bundle_path"`
	}
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" || info.CABundlePath == "" {
		t.Fatalf("session create: %q %v", out, err)
	}
	g.session, g.ca = info.ID, info.CABundlePath
	g.resolv = filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(g.resolv, []byte("nameserver "+gwListen+"\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return g, capA, capI
}

// run runs script with sh in the agent's namespace, with its own mount
// namespace whose resolv.conf names only the daemon, the session's CA and
// no proxy variable.
func (g *gatewayWorld) run(t *testing.T, script string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$RESOLV" /etc/resolv.conf && eval "$SCRIPT"`)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/", "RESOLV=" + g.resolv, "SCRIPT=" + script,
		"SSL_CERT_FILE=" + g.ca, "CURL_CA_BUNDLE=" + g.ca}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := inNetns(g.agent, cmd.Start)
	if err == nil {
		err = cmd.Wait()
	}
	return out.String(), err
}

// TestGatewayHasNoRouteButAileron: an agent in another namespace whose
// gateway and DNS server is the daemon (sandbox attach) reaches allowed
// operations with the credential injected, gets the JSON refusal for
// denied ones, and every way around Aileron fails at once, is audited, and
// never reaches the fake internet; closing the gateway leaves the agent
// with nothing.
func TestGatewayHasNoRouteButAileron(t *testing.T) {
	requireTool(t, "curl")
	requireTool(t, "/usr/bin/python3")
	requireTool(t, "unshare")
	g, capA, capI := newGatewayWorld(t)
	attach := []string{"sandbox", "attach", "--session", g.session, "--source", gwSource, "--listen", gwListen, "--json"}
	for _, c := range []struct{ source, listen, want string }{
		{"2001:db8::/64", gwListen, "of one family"},
		{gwSource, "198.51.100.77", "is not an address of the daemon"},
		{"198.18.0.0/24", gwListen, "synthetic range"},
		{gwSource, "not-an-ip", "is not an IP address"},
		{"fe80::/64", "fe80::1", "holds link-local addresses"},
	} {
		bad := []string{"sandbox", "attach", "--session", g.session, "--source", c.source, "--listen", c.listen}
		if _, stderr, err := g.d.run(t.Context(), bad...); err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("attach --source %s --listen %s: %v %q; want a refusal saying %q", c.source, c.listen, err, stderr, c.want)
		}
	}
	var squatter net.PacketConn // another program holds port 53: attach must fail, and say so
	if err := inNetns(g.aileron, func() (err error) {
		squatter, err = net.ListenPacket("udp", net.JoinHostPort(gwListen, "53"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := g.d.run(t.Context(), attach...); err == nil || !strings.Contains(stderr, "another program holds that port") {
		t.Errorf("attach with port 53 taken: %v %q; want a refusal saying so", err, stderr)
	}
	_ = squatter.Close()
	if out := g.d.cli(t, "sandbox", "list", "--json"); strings.Contains(out, "sbx-") {
		t.Errorf("a refused attach left a gateway behind: %s", out)
	}
	var info struct{ ID, Source, DNS string }
	if err := json.Unmarshal([]byte(g.d.cli(t, attach...)), &info); err != nil || info.Source != gwSource || info.DNS != gwListen {
		t.Fatalf("attach: %+v %v", info, err)
	}
	for _, c := range []struct{ name, script, want string }{
		{"curl", "curl -sS -m 10 https://api.fence.test/echo/gw", `"auth":"ok"`},
		{"curl denied", "curl -sS -m 10 https://api.fence.test/admin/delete", `"reason":"no_matching_operation"`},
		{"plain http", "curl -sS -m 10 http://api.fence.test/echo/gw", `"reason":"insecure_scheme"`},
	} {
		if out, err := g.run(t, c.script); err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\n%s\ndaemon: %s", c.name, err, out, g.d.logTail(4<<10))
		}
	}
	out, err := g.run(t, bypassCommand)
	if err != nil {
		t.Fatalf("bypass script: %v\n%s", err, out)
	}
	checkBypassesFailed(t, out)
	checkGatewayOtherFamily(t, g)
	checkGatewayAudit(t, g)
	g.d.cli(t, "sandbox", "close", info.ID)
	if out, err := g.run(t, "curl -sS -m 3 https://api.fence.test/echo/closed"); err == nil || strings.Contains(out, `"auth"`) {
		t.Errorf("after sandbox close the agent still got through: %v %s", err, out)
	}
	g.d.stop()
	checkGatewayCaptures(t, g, capA.stop(), capI.stop())
}

// checkGatewayAudit: the blocked packets and refused names were audited
// for the gateway's session.
func checkGatewayAudit(t *testing.T, g *gatewayWorld) {
	want := map[string]func(auditLine) bool{
		"tcp to the far address": func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "tcp" },
		"udp to far port 53":     func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "udp" },
		"icmp":                   func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "icmp" },
		"dns unlisted":           func(l auditLine) bool { return l.detail("name") == "exfil.example.net" },
	}
	waitBlocked(t, g.d, g.session, "the gateway's blocked attempts", want)
}

// checkGatewayCaptures: nothing the agent sent reached the fake internet
// (only Aileron's own dials did), and the secret crossed no link.
func checkGatewayCaptures(t *testing.T, g *gatewayWorld, a, i []frame) {
	agentFrames := 0
	for _, f := range a {
		if f.link == "gw0" && !f.outgoing {
			agentFrames++
		}
	}
	for _, f := range i {
		if f.link != "inet0" || f.outgoing {
			continue
		}
		fl := decode(f.data)
		switch {
		case fl.l3 == "arp" || fl.l3 == "nd":
		case fl.proto == "tcp" && fl.src.String() == fenceUp4 && fl.dst.String() == fenceFar4 && fl.dport == 443:
		default:
			t.Errorf("the fake internet received %s: not Aileron's dial to the allowed host", fl)
		}
	}
	if agentFrames < 20 {
		t.Errorf("captured %d frames from the agent: too few to prove anything", agentFrames)
	}
	if containsSecret(a, g.secret) || containsSecret(i, g.secret) {
		t.Error("the injected secret crossed a link in plaintext")
	}
}

// checkGatewayOtherFamily: the gateway is IPv4, yet its interface gives
// nothing over IPv6 either: a connection to a service of the daemon's
// namespace at the interface's link-local address is refused (an ICMPv6
// error, which leaves by the interface the attempt came in on), not left
// to time out.
func checkGatewayOtherFamily(t *testing.T, g *gatewayWorld) {
	t.Helper()
	ll := linkLocal(t, g.aileron, "gw0")
	_ = linkLocal(t, g.agent, "agent0") // the agent's source
	var l net.Listener
	if err := inNetns(g.aileron, func() (err error) { l, err = net.Listen("tcp6", "[::]:7777"); return err }); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- struct{}{}
			_ = c.Close()
		}
	}()
	script := fmt.Sprintf(`/usr/bin/python3 -c '
import socket, time
t = time.monotonic()
try:
    socket.create_connection(("%s%%agent0", 7777), timeout=3); print("connected")
except socket.timeout:
    print("timed out")
except OSError as e:
    print("refused errno %%d %%.1f ms: %%s" %% (e.errno, (time.monotonic() - t) * 1000, e))
'`, ll)
	out, err := g.run(t, script)
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "refused errno 13 ") { // EACCES: ICMPv6 administratively prohibited
		t.Errorf("IPv6 link-local to the daemon's namespace: %v %s; want a refusal by ICMPv6 (EACCES)", err, out)
	}
	select {
	case <-accepted:
		t.Error("a service of the daemon's namespace accepted a connection from the gateway's interface over IPv6")
	default:
	}
	t.Logf("IPv6 link-local: %s", strings.TrimSpace(out))
}

// linkLocal waits out duplicate address detection on link name in ns and
// returns its IPv6 link-local address.
func linkLocal(t *testing.T, ns netns.NsHandle, name string) net.IP {
	t.Helper()
	h := nsHandle(t, ns)
	k, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		addrs, _ := h.AddrList(k, netlink.FAMILY_V6)
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
				return a.IP
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s has no usable IPv6 link-local address", name)
	return nil
}
