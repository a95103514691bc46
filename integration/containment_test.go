//go:build linux

package integration

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/nstest"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The closed topology: Aileron's namespace and the fake internet's,
// joined by one veth on TEST-NET addresses; the sandbox namespace is made
// by `aileron sandbox run` itself. No namespace has a default route, so
// nothing can reach the machine's real network.
const (
	fenceHost    = "api.fence.test"
	fenceFQN     = "local://test/fence"
	fenceFar4    = "203.0.113.10" // the fake internet's server (TEST-NET-3)
	fenceFar6    = "2001:db8:f::10"
	fenceUp4     = "192.0.2.1" // Aileron's end of the uplink (TEST-NET-1)
	fenceUp6     = "2001:db8:1::1"
	fenceInet4   = "192.0.2.2"
	fenceInet6   = "2001:db8:1::2"
	fenceLinkNet = "10.237.0.0/16"
)

const fenceSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/fence", "version": "1.0.0"},
  "tools": [{"name": "fence", "operations": [
    {"name": "echo.get", "method": "GET", "path": "/echo/{rest...}", "hosts": ["api.fence.test"], "credential": "bearer"},
    {"name": "git.get", "method": "GET", "path": "/repo.git/{rest...}", "hosts": ["api.fence.test"]}
  ]}]
}`

type fenceWorld struct {
	aileron, inet netns.NsHandle
	d             *daemon
	secret        string
	session       string
}

// fakeInternet serves api.fence.test on the far addresses inside inet: it
// says whether the bearer credential arrived (never echoing it) and
// answers git's ref advertisement for an empty repository.
func fakeInternet(t *testing.T, inet netns.NsHandle, dir, secret string) {
	cert, rootPath, _, err := newRuntimePKI(dir, []string{fenceHost})
	if err != nil {
		t.Fatal(err)
	}
	_ = rootPath
	mux := http.NewServeMux()
	mux.HandleFunc("/echo/", func(w http.ResponseWriter, r *http.Request) {
		auth := "absent"
		if r.Header.Get("Authorization") == "Bearer "+secret {
			auth = "ok"
		} else if r.Header.Get("Authorization") != "" {
			auth = "wrong"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"host":%q,"path":%q,"auth":%q}`, r.Host, r.URL.Path, auth)
	})
	mux.HandleFunc("/repo.git/info/refs", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
		svc := "# service=git-upload-pack\n"
		fmt.Fprintf(w, "%04x%s0000", len(svc)+4, svc)
		fmt.Fprint(w, "0000")
	})
	for _, addr := range []string{fenceFar4, fenceFar6} {
		var l net.Listener
		err := inNetns(inet, func() (err error) {
			l, err = net.Listen("tcp", net.JoinHostPort(addr, "443"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.ServeTLS(l, "", "") }()
		t.Cleanup(func() { _ = srv.Close() })
	}
}

// newFenceWorld builds the topology, starts the captures, the fake
// internet and a daemon in Aileron's namespace with the fence connector
// and a bound bearer credential.
func newFenceWorld(t *testing.T) (*fenceWorld, *capture, *capture) {
	w := &fenceWorld{aileron: nstest.New(t), inet: nstest.New(t), secret: newSecret("fence bearer token", "fence-", "")}
	capA, capI := startCapture(t, w.aileron), startCapture(t, w.inet)
	hA, hI := nsHandle(t, w.aileron), nsHandle(t, w.inet)
	if err := hA.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "up0"}, PeerName: "inet0", PeerNamespace: netlink.NsFd(int(w.inet))}); err != nil {
		t.Fatalf("creating a veth pair: %v (the containment test needs veth in the kernel)", err)
	}
	addAddrs(t, hA, "up0", fenceUp4+"/24", fenceUp6+"/64")
	addAddrs(t, hI, "inet0", fenceInet4+"/24", fenceInet6+"/64", fenceFar4+"/32", fenceFar6+"/128")
	up0, _ := hA.LinkByName("up0")
	for _, r := range []struct{ dst, gw string }{{"203.0.113.0/24", fenceInet4}, {"2001:db8:f::/48", fenceInet6}} {
		_, dst, _ := net.ParseCIDR(r.dst)
		if err := hA.RouteAdd(&netlink.Route{LinkIndex: up0.Attrs().Index, Dst: dst, Gw: net.ParseIP(r.gw)}); err != nil {
			t.Fatalf("route %s: %v", r.dst, err)
		}
	}
	dir := t.TempDir()
	fakeInternet(t, w.inet, dir, w.secret)
	cfg := map[string]any{
		"proxy":    map[string]any{"listen": "127.0.0.1:0"},
		"upstream": map[string]any{"resolve": map[string]string{fenceHost + ":443": net.JoinHostPort(fenceFar4, "443")}, "ca_files": []string{filepath.Join(dir, "root.pem")}},
		"egress":   map[string]any{"allow_cidrs": []string{"203.0.113.10/32"}},
		"admin":    map[string]any{"web_listen": ""},
		"sandbox":  map[string]any{"link_cidr": fenceLinkNet},
		"log":      map[string]any{"level": "debug"},
	}
	w.d = startDaemonIn(t, w.aileron, cfg)
	// Another program holds the first sandbox link's name: the daemon must
	// set that index aside and use the next.
	tag := sha256.Sum256([]byte(w.d.home))
	if err := hA.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "aln" + hex.EncodeToString(tag[:2]) + "0"}, PeerName: "holder0"}); err != nil {
		t.Fatalf("a link holding the name: %v", err)
	}
	spec := filepath.Join(dir, "fence.json")
	if err := os.WriteFile(spec, []byte(fenceSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	w.d.cli(t, "connector", "install", spec)
	if _, stderr, err := w.d.runInput(t.Context(), w.secret, "credential", "set", "fence-bearer", "--kind", "bearer"); err != nil {
		t.Fatalf("credential set: %v\n%s", err, stderr)
	}
	w.d.cli(t, "credential", "bind", fenceFQN, "--credential", "fence-bearer")
	out := w.d.cli(t, "session", "create", "--name", "fenced", "--json")
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" {
		t.Fatalf("session create: %q %v", out, err)
	}
	w.session = info.ID
	return w, capA, capI
}

// startDaemonIn starts a daemon inside ns, stopped in t's cleanup.
func startDaemonIn(t *testing.T, ns netns.NsHandle, cfg map[string]any) *daemon {
	t.Helper()
	home, err := os.MkdirTemp(theSuite.work, "home-")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(home, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := theSuite.launchWith(home, cfgPath, "daemon.stderr.log", nil, func(c *exec.Cmd) error {
		return inNetns(ns, c.Start)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("daemon stop: %v\n%s", err, d.logTail(8<<10))
		}
	})
	return d
}

// fenced runs script with sh inside a fenced sandbox of w's session, in /
// (the test's own directory may be closed to the sandbox's user, nobody),
// with extra flags for sandbox run.
func (w *fenceWorld) fenced(t *testing.T, script string, flags ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	args := append(append([]string{"sandbox", "run", "--session", w.session}, flags...), "--", "sh", "-c", script)
	return w.d.runIn(ctx, "/", "", args...)
}

// bypassScript tries every way around Aileron from inside the sandbox and
// prints one JSON object: for each attempt, whether it failed and how long
// that took.
const bypassScript = `
import json, socket, struct, time, random
dns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
def q(name, qtype):
    hdr = struct.pack(">HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    body = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return hdr + body + struct.pack(">HH", qtype, 1)
def ask(name, qtype):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
    s.sendto(q(name, qtype), (dns, 53)); r = s.recv(4096); s.close()
    rcode, an = r[3] & 15, struct.unpack(">H", r[6:8])[0]
    return rcode != 0 or an == 0, "rcode=%d answers=%d" % (rcode, an)
def tcp(fam, addr):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(2); s.connect(addr)
def udp(fam, addr):
    s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(2); s.connect(addr)
    s.send(b"x" * 32); s.recv(100)
def icmp():  # connected, as ping is, so an ICMP error reaches the socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); s.settimeout(2)
    s.connect(("203.0.113.10", 0)); s.send(struct.pack(">BBHHH", 8, 0, 0, 0, 1) + b"ping"); s.recv(100)
synth = socket.getaddrinfo("api.fence.test", 443, socket.AF_INET)[0][4][0]
attempts = {
  "tcp_far": lambda: tcp(socket.AF_INET, ("203.0.113.10", 443)),
  "udp_far_53": lambda: udp(socket.AF_INET, ("203.0.113.10", 53)),
  "quic": lambda: udp(socket.AF_INET, (synth, 443)),
  "icmp": icmp,
  "ipv6_far": lambda: tcp(socket.AF_INET6, ("2001:db8:f::10", 443)),
  "dns_txt": lambda: ask("api.fence.test", 16),
  "dns_long_label": lambda: ask("a" * 60 + ".fence.test", 1),
  "dns_unlisted": lambda: ask("exfil.example.net", 1),
}
out = {}
for name, fn in attempts.items():
    t = time.monotonic()
    try:
        r = fn()
        failed, how = (r if isinstance(r, tuple) else (False, "succeeded"))
    except socket.timeout:
        failed, how = False, "timed out"
    except OSError as e:
        failed, how = True, type(e).__name__ + ": " + str(e)
    out[name] = {"failed": failed, "ms": (time.monotonic() - t) * 1000, "how": how}
print(json.dumps(out))
`

// TestFencedSandboxHasNoRouteButAileron is security invariant 11: real
// clients in a fenced sandbox, with no proxy variable set, reach allowed
// operations with the credential injected and get the JSON refusal for
// denied ones; every way around Aileron fails at once and is audited; and
// packet captures on both links, for the whole test, show nothing but
// Aileron's DNS and listeners from the sandbox and Aileron's own dials
// into the fake internet, and never the secret.
func TestFencedSandboxHasNoRouteButAileron(t *testing.T) {
	for _, c := range []string{"curl", "/usr/bin/python3", "/usr/bin/node", "git"} {
		requireTool(t, c)
	}
	w, capA, capI := newFenceWorld(t)
	clients := []struct{ name, script, want string }{
		{"curl", "curl -sS -m 10 https://api.fence.test/echo/curl", `"auth":"ok"`},
		{"curl denied", "curl -sS -m 10 https://api.fence.test/admin/delete", `"reason":"no_matching_operation"`},
		{"python", `/usr/bin/python3 -c 'import urllib.request; print(urllib.request.urlopen("https://api.fence.test/echo/py").read().decode())'`, `"auth":"ok"`},
		{"node", `/usr/bin/node -e 'require("https").get("https://api.fence.test/echo/node", r => r.on("data", d => process.stdout.write(d)))'`, `"auth":"ok"`},
		{"git", "git ls-remote https://api.fence.test/repo.git && echo git-ok", "git-ok"},
		{"env has no proxy", "env | grep -ci proxy; true", "0"},
	}
	for _, c := range clients {
		out, stderr, err := w.fenced(t, c.script)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s: %v\nstdout: %s\nstderr: %s\ndaemon: %s", c.name, err, out, stderr, w.d.logTail(4<<10))
		}
	}
	if !logHas(w.d, "sandbox.index_taken") {
		t.Errorf("the daemon did not say it set aside the index whose link name was taken:\n%s", w.d.logTail(4<<10))
	}
	out, stderr, err := w.fenced(t, bypassCommand)
	if err != nil {
		t.Fatalf("bypass script: %v\n%s\n%s", err, out, stderr)
	}
	checkBypassesFailed(t, out)
	checkFenceAudit(t, w)
	checkLocalEscapes(t, w)
	checkLauncherKilled(t, w)
	checkRevocationInSandbox(t, w)
	checkNewFlowLimit(t, w)
	checkDNSRefusalsCounted(t, w)
	checkLearnInFence(t, w)
	w.d.stop()
	checkCaptures(t, w, capA.stop(), capI.stop())
}

// bypassCommand runs bypassScript with the sandbox's python3.
var bypassCommand = "/usr/bin/python3 -c '" + strings.ReplaceAll(bypassScript, "'", `'"'"'`) + "'"

// checkBypassesFailed: the bypass script's every attempt (its JSON
// output) failed, each within 100 ms.
func checkBypassesFailed(t *testing.T, out string) {
	t.Helper()
	var res map[string]struct {
		Failed bool
		MS     float64
		How    string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 8 {
		t.Fatalf("bypass script output %q: %v", out, err)
	}
	for name, r := range res {
		t.Logf("%s: %.1f ms, %s", name, r.MS, r.How)
		if !r.Failed || r.MS > 100 {
			t.Errorf("%s: failed=%v after %.1f ms (%s); want a failure within 100 ms", name, r.Failed, r.MS, r.How)
		}
	}
}

// checkFenceAudit: each bypass attempt left its line.
func checkFenceAudit(t *testing.T, w *fenceWorld) {
	want := map[string]func(auditLine) bool{
		"tcp to the far address": func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "tcp" },
		"udp to far port 53":     func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "udp" },
		"icmp":                   func(l auditLine) bool { return l.str("host") == fenceFar4 && l.detail("protocol") == "icmp" },
		"quic to a synthetic 443": func(l auditLine) bool {
			return strings.HasPrefix(l.str("host"), "198.1") && l.detail("protocol") == "udp"
		},
		"ipv6 to the far address": func(l auditLine) bool { return l.str("host") == fenceFar6 },
		"dns TXT":                 func(l auditLine) bool { return l.detail("type") == "TXT" && l.str("reason") == "dns_type_not_allowed" },
		"dns 60-char label":       func(l auditLine) bool { return strings.HasPrefix(l.detail("name"), "aaaaaaaaaa") },
		"dns unlisted":            func(l auditLine) bool { return l.detail("name") == "exfil.example.net" },
	}
	lines := waitBlocked(t, w.d, w.session, "every bypass attempt", want)
	for _, l := range lines {
		if l.str("event") == "sandbox.egress_blocked" && strings.HasPrefix(l.str("host"), "ff02:") {
			t.Errorf("the kernel's own link-local multicast was audited as a blocked attempt: %v", l)
		}
	}
}

// waitBlocked waits until, for each of want, session has a
// sandbox.egress_blocked or dns.denied line it matches, and returns the
// audit lines.
func waitBlocked(t *testing.T, d *daemon, session, what string, want map[string]func(auditLine) bool) []auditLine {
	t.Helper()
	return waitAudit(t, d, what, func(lines []auditLine) bool {
		for name, ok := range want {
			if !slices.ContainsFunc(lines, func(l auditLine) bool {
				ev := l.str("event")
				return (ev == "sandbox.egress_blocked" || ev == "dns.denied") && l.str("session") == session && ok(l)
			}) {
				t.Logf("not yet audited: %s", name)
				return false
			}
		}
		return true
	})
}

// checkCaptures: from the sandbox only Aileron's DNS and transparent
// listeners; into the fake internet only Aileron's dials to the allowed
// host; the secret nowhere.
func checkCaptures(t *testing.T, w *fenceWorld, a, i []frame) {
	sandboxFrames, inetFrames := 0, 0
	for _, f := range a {
		if !strings.HasPrefix(f.link, "aln") || f.outgoing {
			continue
		}
		sandboxFrames++
		fl := decode(f.data)
		switch {
		case fl.l3 == "arp" || fl.l3 == "nd":
		case fl.proto == "udp" && fl.dport == 53 && strings.HasPrefix(fl.dst.String(), "10.237."):
		case fl.proto == "tcp" && fl.dport == 53 && strings.HasPrefix(fl.dst.String(), "10.237."):
		case fl.proto == "tcp" && (fl.dport == 443 || fl.dport == 80) && (strings.HasPrefix(fl.dst.String(), "198.18.") || strings.HasPrefix(fl.dst.String(), "fd00:a11e:5eed:")):
		default:
			t.Errorf("the sandbox sent %s on %s: not to Aileron's DNS or listeners", fl, f.link)
		}
	}
	for _, f := range i {
		if f.link != "inet0" || f.outgoing {
			continue
		}
		inetFrames++
		fl := decode(f.data)
		switch {
		case fl.l3 == "arp" || fl.l3 == "nd":
		case fl.proto == "tcp" && fl.src.String() == fenceUp4 && fl.dst.String() == fenceFar4 && fl.dport == 443:
		default:
			t.Errorf("the fake internet received %s: not Aileron's dial to the allowed host", fl)
		}
	}
	t.Logf("captured %d frames from the sandbox, %d into the fake internet", sandboxFrames, inetFrames)
	if sandboxFrames < 20 || inetFrames < 10 {
		t.Errorf("captured %d frames from the sandbox and %d into the fake internet: the captures saw too little to prove anything", sandboxFrames, inetFrames)
	}
	if containsSecret(a, w.secret) || containsSecret(i, w.secret) {
		t.Error("the injected secret crossed a link in plaintext")
	}
}
