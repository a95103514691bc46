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
