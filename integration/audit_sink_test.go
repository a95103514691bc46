package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// auditSpecFile loads testdata/specs/<name>.json.
func auditSpecFile(t *testing.T, name string) *specFile {
	t.Helper()
	sp, err := loadSpec(filepath.Join(theSuite.root, "integration", "testdata", "specs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// sinkBlocker makes the daemon's audit appends fail and undoes it.
type sinkBlocker struct {
	how     string // "prlimit" or "chattr"
	restore func() error
}

// blockAuditSink lowers the daemon's RLIMIT_FSIZE to the size of its
// current audit file (appends then fail with EFBIG; so do appends to its
// stderr log, which is larger); if prlimit on another process is refused,
// it makes the file immutable with chattr +i instead.
func blockAuditSink(t *testing.T, d *daemon, file string) *sinkBlocker {
	t.Helper()
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	var old unix.Rlimit
	err = unix.Prlimit(d.PID, unix.RLIMIT_FSIZE, nil, &old)
	if err == nil {
		lim := unix.Rlimit{Cur: uint64(st.Size()), Max: old.Max}
		if err = unix.Prlimit(d.PID, unix.RLIMIT_FSIZE, &lim, nil); err == nil {
			return &sinkBlocker{how: "prlimit", restore: func() error {
				inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: old.Max}
				return unix.Prlimit(d.PID, unix.RLIMIT_FSIZE, &inf, nil)
			}}
		}
	}
	t.Logf("prlimit on the daemon (pid %d) failed (%v); falling back to chattr +i", d.PID, err)
	if out, cerr := exec.Command("chattr", "+i", file).CombinedOutput(); cerr != nil {
		t.Fatalf("neither prlimit (%v) nor chattr +i %s (%v: %s) can block the audit sink here", err, file, cerr, out)
	}
	b := &sinkBlocker{how: "chattr", restore: func() error { return exec.Command("chattr", "-i", file).Run() }}
	t.Cleanup(func() { _ = b.restore() })
	return b
}

// TestAuditFailClosed: while the audit sink cannot be written, requests are
// refused 503 audit_unavailable and nothing reaches the upstream; once it
// can, requests flow again and the chain still verifies.
func TestAuditFailClosed(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, auditSpecFile(t, "audit"))
	s := d.newSession(t, "--name", "audit-fail-closed")
	c := goClient(t, s)
	const host, path = "stream.example.com", "/audit/search"
	target := "https://" + host + path + "?limit=1"
	status, id := auditDo(t, c, http.MethodGet, target, "", nil)
	if status != http.StatusOK {
		t.Fatalf("before blocking the sink: status %d, want 200", status)
	}
	waitAudit(t, d, "the first request's completed line", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "connector.proxy.completed" && l.str("audit_id") == id
		}) != nil
	})
	files := auditFiles(t, d)
	file := files[len(files)-1]
	before, _ := os.Stat(file)
	hits := theSuite.up.Hits(host, path)

	b := blockAuditSink(t, d, file)
	t.Logf("audit sink blocked with %s", b.how)
	for i := range 3 {
		st, _, body := goDo(t, c, http.MethodGet, target, "")
		var env envelope
		if st != http.StatusServiceUnavailable || json.Unmarshal(body, &env) != nil ||
			env.Error.Class != "unavailable" || env.Error.Reason != "audit_unavailable" {
			t.Errorf("request %d with the sink blocked: status %d body %s, want 503 class unavailable reason audit_unavailable", i, st, trunc(body))
		}
	}
	if n := theSuite.up.Hits(host, path) - hits; n != 0 {
		t.Errorf("%d request(s) reached the upstream while the audit sink was down: forwarded unaudited", n)
	}
	if after, _ := os.Stat(file); after.Size() != before.Size() {
		t.Errorf("the audit file grew from %d to %d bytes while blocked", before.Size(), after.Size())
	}

	if err := b.restore(); err != nil {
		t.Fatalf("restore the audit sink (%s): %v", b.how, err)
	}
	status, id = auditDo(t, c, http.MethodGet, target, "", nil)
	if status != http.StatusOK {
		t.Fatalf("after restoring the sink: status %d, want 200 (recording must resume by itself)", status)
	}
	waitAudit(t, d, "the resumed request's completed line", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "connector.proxy.completed" && l.str("audit_id") == id
		}) != nil
	})
	if n := theSuite.up.Hits(host, path) - hits; n != 1 {
		t.Errorf("the upstream saw %d request(s) after recovery, want 1", n)
	}
	if out := d.cli(t, "audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify after the outage: %q", out)
	}
}

// TestAuditSIGHUPReload: a connector version installed offline (the CLI
// cannot reach the daemon) takes effect on SIGHUP, on an open keep-alive
// connection that stays open.
func TestAuditSIGHUPReload(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, auditSpecFile(t, "audit"))
	s := d.newSession(t, "--name", "audit-sighup")
	c := goClient(t, s)
	tr := c.Transport.(*http.Transport)
	var dials atomic.Int64
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var dl net.Dialer
		return dl.DialContext(ctx, network, addr)
	}
	tr.MaxConnsPerHost = 1
	send := func(path string) (int, bool) {
		t.Helper()
		var reused bool
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, err := http.NewRequest(http.MethodGet, "https://stream.example.com"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, reused
	}
	if st, _ := send("/audit/search"); st != http.StatusOK {
		t.Fatalf("GET /audit/search on 1.0.0: %d", st)
	}

	offline := filepath.Join(t.TempDir(), "offline.yaml")
	if err := os.WriteFile(offline, []byte("admin: {socket: /nonexistent/x.sock}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v2 := auditSpecFile(t, "audit-v2")
	out := d.cli(t, "connector", "install", "--config", offline, v2.Path)
	if !strings.Contains(out, "daemon not running") || !strings.Contains(out, "installed "+auditFQN+"@1.1.0 sha256:") {
		t.Errorf("offline install printed %q, want the \"daemon not running\" note and the installed line", out)
	}
	// 1.1.0 adds news.get, an operation without approval: it is
	// quarantined until approved, with the daemon's store offline too.
	if !strings.Contains(out, "QUARANTINED") {
		t.Errorf("offline install of a widening upgrade printed %q, want it quarantined", out)
	}
	d.cli(t, "connector", "approve", "--yes", "--config", offline, auditFQN+"@1.1.0")
	if st, reused := send("/audit/news"); st != http.StatusForbidden || !reused {
		t.Fatalf("GET /audit/news before SIGHUP: status %d reused %v, want 403 on the same connection", st, reused)
	}

	loaded := func() int { return strings.Count(d.logTail(1<<30), `"event":"policy.loaded"`) }
	time.Sleep(300 * time.Millisecond) // info lines are written within 0.1 s: count every one logged before
	n0 := loaded()
	if err := syscall.Kill(d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for loaded() == n0 {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon logged no policy.loaded within 30s of SIGHUP")
		}
		time.Sleep(20 * time.Millisecond) // polling a log file: no channel to wait on
	}
	st, reused := send("/audit/news")
	if st != http.StatusOK || !reused {
		t.Errorf("GET /audit/news after SIGHUP: status %d reused %v, want 200 on the same connection", st, reused)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("the client dialled the proxy %d times, want 1: the reload closed the open connection", n)
	}
	waitAudit(t, d, "a proxied line of news.get by version 1.1.0", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "connector.proxy.proxied" && l.str("operation") == "news.get" && l.str("connector_version") == "1.1.0"
		}) != nil
	})
	// The reload wrote the audit line of the approval given offline.
	waitAudit(t, d, "store.consented of the offline approval", func(ls []auditLine) bool {
		return findLine(ls, func(l auditLine) bool {
			return l.str("event") == "store.consented" && l.detail("offline") == "true" && l.detail("via") == "approve" &&
				l.detail("version") == "1.1.0" && strings.HasSuffix(l.detail("by"), ", offline)")
		}) != nil
	})
}

// TestAuditFileMovedUnderTheDaemon: the live audit file moved away while
// the daemon runs stops every request from the next sync tick on, 503
// audit_unavailable saying so, with nothing forwarded; moved back, requests
// flow again and the chain verifies. (A deleted file is refused at the
// next write: TestTrailChangedUnderTheLog.)
func TestAuditFileMovedUnderTheDaemon(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, auditSpecFile(t, "audit"))
	c := goClient(t, d.newSession(t, "--name", "audit-moved"))
	const host, path = "stream.example.com", "/audit/search"
	target := "https://" + host + path + "?limit=1"
	if status, _ := auditDo(t, c, http.MethodGet, target, "", nil); status != http.StatusOK {
		t.Fatalf("before: status %d", status)
	}
	files := auditFiles(t, d)
	live := files[len(files)-1]
	if err := os.Rename(live, live+".away"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // a move is noticed at the next audit.sync_interval tick (100ms)
	hits := theSuite.up.Hits(host, path)
	st, _, body := goDo(t, c, http.MethodGet, target, "")
	var env envelope
	if st != http.StatusServiceUnavailable || json.Unmarshal(body, &env) != nil || env.Error.Reason != "audit_unavailable" {
		t.Fatalf("with the live file moved away: %d %s, want 503 audit_unavailable", st, trunc(body))
	}
	if !logHas(d, "while the daemon wrote it") {
		t.Errorf("the daemon's log does not say the trail changed under it:\n%s", d.logTail(3000))
	}
	if n := theSuite.up.Hits(host, path) - hits; n != 0 {
		t.Fatalf("%d request(s) forwarded while the trail was gone", n)
	}
	if err := os.Rename(live+".away", live); err != nil {
		t.Fatal(err)
	}
	if status, _ := auditDo(t, c, http.MethodGet, target, "", nil); status != http.StatusOK {
		t.Fatalf("moved back: status %d, want 200", status)
	}
	if out := d.cli(t, "audit", "verify"); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify: %q", out)
	}
}
