package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonRefusesACutTrailUntilANewOneIsStarted: lines cut off the end
// of the trail while the daemon is stopped keep it from starting, with a
// message naming what happened; `aileron audit new-trail` starts over on
// purpose, recording the break, and the daemon serves again.
func TestDaemonRefusesACutTrailUntilANewOneIsStarted(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, auditSpecFile(t, "audit"))
	c := goClient(t, d.newSession(t, "--name", "audit-cut"))
	target := "https://stream.example.com/audit/search?limit=1"
	if status, _ := auditDo(t, c, http.MethodGet, target, "", nil); status != http.StatusOK {
		t.Fatalf("before: status %d", status)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	out, _, _ := d.run(t.Context(), "audit", "export")
	if !strings.Contains(out, `"event":"daemon.started"`) || !strings.Contains(out, `"event":"daemon.stopped"`) || !strings.Contains(out, "signal terminated") {
		t.Fatalf("the trail does not bracket the run with daemon.started and daemon.stopped:\n%s", out)
	}
	files := auditFiles(t, d)
	last := files[len(files)-1]
	b, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	keep := len(lines) - 3
	for keep > 1 && strings.Contains(lines[keep-1], `"event":"audit.checkpoint"`) {
		keep-- // ending on an older checkpoint reads as a rollback, not a cut
	}
	if err := os.WriteFile(last, []byte(strings.Join(lines[:keep], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(d.home, "config.yaml")
	_ = os.Remove(filepath.Join(d.home, "daemon.json"))
	if nd, err := theSuite.launch(d.home, cfgPath, "daemon-cut.stderr.log", nil); err == nil {
		_ = nd.stop()
		t.Fatal("the daemon started over a trail cut short")
	} else if msg := err.Error(); !strings.Contains(msg, "truncated") || !strings.Contains(msg, "aileron audit new-trail") {
		t.Fatalf("the daemon's refusal does not say what happened and what to do:\n%s", msg)
	}
	if _, errOut, err := d.run(t.Context(), "audit", "verify"); err == nil || !strings.Contains(errOut, "truncated") {
		t.Fatalf("audit verify of the cut trail: %v %s", err, errOut)
	}
	out = d.cli(t, "audit", "new-trail", "--reason", "integration: the tail was cut")
	if !strings.Contains(out, "previous files are in") {
		t.Fatalf("new-trail: %s", out)
	}
	nd, err := theSuite.launch(d.home, cfgPath, "daemon-new-trail.stderr.log", nil)
	if err != nil {
		t.Fatalf("the daemon does not start on the new trail: %v", err)
	}
	defer func() {
		if err := nd.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	c = goClient(t, nd.newSession(t, "--name", "audit-new"))
	if status, _ := auditDo(t, c, http.MethodGet, target, "", nil); status != http.StatusOK {
		t.Fatalf("on the new trail: status %d", status)
	}
	if out := nd.cli(t, "audit", "verify"); !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "checkpoint(s) verified") {
		t.Errorf("audit verify of the new trail: %q", out)
	}
}

// TestReloadThatWidensEgressIsOnTheTrail: a SIGHUP that changes what the
// proxy enforces (here a new passthrough rule: traffic that skips
// inspection) leaves a config.reloaded line naming the rules in force.
func TestReloadThatWidensEgressIsOnTheTrail(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	cfg["proxy"].(map[string]any)["passthrough"] = []any{
		map[string]any{"host": "passthrough.example.org", "port": 443},
		map[string]any{"host": "newly-open.example", "port": 8443},
	}
	// store.sources is read by the CLI at each install: the daemon neither
	// applies it nor needs a restart for it.
	cfg["store"] = map[string]any{"sources": []any{map[string]any{"mirror": d.home}}}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(d.home, "config.yaml")
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, _, _ := d.run(t.Context(), "audit", "export", "--from", "1")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, `"event":"config.reloaded"`) {
				if !strings.Contains(line, "newly-open.example:8443") || !strings.Contains(line, "proxy.passthrough") {
					t.Fatalf("config.reloaded does not name the change and the rules in force: %s", line)
				}
				if strings.Contains(line, "store.sources") {
					t.Fatalf("config.reloaded names store.sources, which only the CLI reads: %s", line)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no config.reloaded line 20 s after a SIGHUP that added a passthrough rule:\n%s", out)
		}
	}
}
