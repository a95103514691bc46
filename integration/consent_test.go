package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsentOnATerminal drives `connector install` in a real terminal
// (tmux): it shows what the package asks and asks; "n" installs nothing,
// "y" installs it under a consent recorded as given at the terminal.
func TestConsentOnATerminal(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	sp := auditSpecFile(t, "audit")
	for _, answer := range []string{"n", "y"} {
		script := `"$0" connector install "$1"; echo "EXIT=$?"; sleep 60`
		typeLine, screen, _ := tmuxPane(t, cleanEnv(d.home), "sh", "-c", script, d.s.bin, sp.Path)
		s := waitScreen(t, screen, "Install "+auditFQN+"@1.0.0? [y/N]")
		for _, want := range []string{auditFQN + "@1.0.0 asks for:", "hosts:              stream.example.com:443, stream.example.com:9441",
			"without approval:   audit/echo.get (GET /echo/{rest...}),\n                      audit/search.get (GET /audit/search)", "signature:          unsigned", "hash:               sha256:"} {
			if !strings.Contains(s, want) {
				t.Errorf("the prompt does not show %q:\n%s", want, s)
			}
		}
		typeLine(answer)
		if answer == "n" {
			s = waitScreen(t, screen, "EXIT=1")
			if !strings.Contains(s, "not consented: nothing done") {
				t.Errorf("answer n:\n%s", s)
			}
			if out := d.cli(t, "connector", "list"); strings.Contains(out, auditFQN) {
				t.Fatalf("answer n installed it:\n%s", out)
			}
			continue
		}
		s = waitScreen(t, screen, "EXIT=0")
		if !strings.Contains(s, "installed "+auditFQN+"@1.0.0 sha256:") {
			t.Errorf("answer y:\n%s", s)
		}
	}
	waitAudit(t, d, "store.consented via the terminal", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "store.consented" && l.detail("via") == "terminal" && l.detail("connector") == auditFQN &&
				strings.HasPrefix(l.detail("by"), "uid ")
		}) != nil
	})
}

// TestConsentQuarantineServesTheOldVersion: an upgrade that asks for no
// more is served at once; one that asks for more (an operation without
// approval that 1.0.1 did not have) is installed but quarantined, and the
// version before keeps serving real requests through the proxy until
// `connector approve`; every step is audited as store.consented.
func TestConsentQuarantineServesTheOldVersion(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, auditSpecFile(t, "audit"))
	c := goClient(t, d.newSession(t, "--name", "consent-quarantine"))
	get := func(path string) int {
		t.Helper()
		resp, err := c.Get("https://stream.example.com" + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	servedBy := func(op, version string) {
		t.Helper()
		waitAudit(t, d, op+" proxied by version "+version, func(ls []auditLine) bool {
			return findLine(ls, func(l auditLine) bool {
				return l.str("event") == "connector.proxy.proxied" && l.str("operation") == op && l.str("connector_version") == version
			}) != nil
		})
	}

	// 1.0.1 asks the same as 1.0.0: applied.
	same := strings.Replace(readFile(t, auditSpecFile(t, "audit").Path), `"version": "1.0.0"`, `"version": "1.0.1"`, 1)
	v101 := filepath.Join(t.TempDir(), "audit-1.0.1.json")
	if err := os.WriteFile(v101, []byte(same), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.cli(t, "connector", "install", v101); strings.Contains(out, "QUARANTINED") {
		t.Fatalf("an upgrade asking no more was quarantined:\n%s", out)
	}
	if st := get("/audit/search"); st != http.StatusOK {
		t.Fatalf("GET /audit/search on 1.0.1: %d", st)
	}
	servedBy("search.get", "1.0.1")

	// 1.1.0 adds news.get without approval: quarantined, 1.0.1 serves.
	out := d.cli(t, "connector", "install", auditSpecFile(t, "audit-v2").Path)
	if !strings.Contains(out, "QUARANTINED") || !strings.Contains(out, "operation audit/news.get (GET /audit/news) (new) does not wait for approval") {
		t.Fatalf("a widening upgrade was not quarantined:\n%s", out)
	}
	if list := d.cli(t, "connector", "list"); !strings.Contains(list, "1.1.0    quarantined") {
		t.Errorf("connector list does not show 1.1.0 quarantined:\n%s", list)
	}
	if st := get("/audit/news"); st != http.StatusForbidden {
		t.Errorf("GET /audit/news while 1.1.0 is quarantined: %d, want 403", st)
	}
	get("/audit/search?q=after-quarantine")
	waitAudit(t, d, "search.get still proxied by 1.0.1 after the quarantined install", func(ls []auditLine) bool {
		var last *auditLine
		for i := range ls {
			if ls[i].str("event") == "connector.proxy.proxied" && ls[i].str("operation") == "search.get" {
				last = &ls[i]
			}
		}
		return last != nil && last.str("connector_version") == "1.0.1" &&
			findLine(ls, func(l auditLine) bool { return l.detail("quarantined") == "true" && l.detail("version") == "1.1.0" }) != nil
	})

	if out := d.cli(t, "connector", "approve", "--yes", auditFQN+"@1.1.0"); !strings.Contains(out, "approved "+auditFQN+"@1.1.0") {
		t.Fatalf("approve:\n%s", out)
	}
	if st := get("/audit/news"); st != http.StatusOK {
		t.Fatalf("GET /audit/news after approval: %d", st)
	}
	servedBy("news.get", "1.1.0")
	waitAudit(t, d, "store.consented of the approval", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "store.consented" && l.detail("via") == "approve" && l.detail("version") == "1.1.0"
		}) != nil
	})
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
