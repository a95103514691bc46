//go:build linux

package integration

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// dnsBurstScript asks the sandbox's resolver for 256 names it refuses, one
// after the other, and exits at once.
const dnsBurstScript = `
import socket, struct
dns = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
answered = 0
for i in range(256):
    name = "burst%d.exfil.example.net" % i
    q = struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
    s.sendto(q, (dns, 53)); s.recv(512); answered += 1
print(answered)
`

// checkDNSRefusalsCounted: a burst of refused queries just before a
// sandbox exits is audited in full: the dns.denied lines, each counting
// itself and its suppressed field, account for every refusal, and all of
// them come before the sandbox.stopped line.
func checkDNSRefusalsCounted(t *testing.T, w *fenceWorld) {
	t.Helper()
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(w.d.cli(t, "session", "create", "--name", "dns-burst", "--json")), &info); err != nil || info.ID == "" {
		t.Fatalf("session create: %v", err)
	}
	out, stderr, err := w.d.runIn(t.Context(), "/", "", "sandbox", "run", "--session", info.ID, "--", "/usr/bin/python3", "-c", dnsBurstScript)
	if err != nil || strings.TrimSpace(out) != "256" {
		t.Fatalf("DNS burst: %v %q\n%s", err, out, stderr)
	}
	counted, stopped := 0, false
	waitAudit(t, w.d, "the sandbox's stop", func(lines []auditLine) bool {
		counted, stopped = 0, false
		for _, l := range lines {
			switch {
			case l.str("session") != info.ID:
			case l.str("event") == "sandbox.stopped":
				stopped = true
			case l.str("event") == "dns.denied":
				n, _ := strconv.Atoi(l.detail("suppressed"))
				counted += 1 + n
				if stopped {
					t.Errorf("a dns.denied line after sandbox.stopped: %s", l.Raw)
				}
			}
		}
		return stopped
	})
	if counted != 256 {
		t.Errorf("256 refused queries, and the dns.denied lines account for %d", counted)
	}
}

// checkLearnInFence: a fenced sandbox in learn mode (no proxy variable,
// the policy DNS its only resolver) reaches a name no connector names
// through Aileron's DNS and listener, is refused with the proposal's id,
// and its request becomes a proposal; nothing is dialled for it (the
// captures, checked at the end of the test, show no dial but Aileron's
// own to the allowed host).
func checkLearnInFence(t *testing.T, w *fenceWorld) {
	t.Helper()
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(w.d.cli(t, "session", "create", "--name", "fence-learn", "--unknown", "learn", "--json")), &info); err != nil || info.ID == "" {
		t.Fatalf("session create: %v", err)
	}
	out, stderr, err := w.d.runIn(t.Context(), "/", "", "sandbox", "run", "--session", info.ID, "--",
		"curl", "-sS", "-m", "10", "https://learn.fence.test/v1/things/42")
	if err != nil || !strings.Contains(out, `"reason":"host_not_allowed"`) || !strings.Contains(out, `"proposal_id":"pr_`) {
		t.Fatalf("learn in a fenced sandbox: %v\nstdout: %s\nstderr: %s", err, out, stderr)
	}
	var list struct {
		Proposals []struct{ Host, Template string }
	}
	if err := json.Unmarshal([]byte(w.d.cli(t, "proposals", "list", "--session", info.ID, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if props := list.Proposals; len(props) != 1 || props[0].Host != "learn.fence.test" || props[0].Template != "/v1/things/{id}" {
		t.Errorf("proposals of the fenced learn session: %+v; want one for learn.fence.test /v1/things/{id}", list.Proposals)
	}
}
