package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The approval gate's end-to-end tests. Each test runs its own daemon with
// the gmail connector, whose messages.send operation is approval "required",
// and a short approval.hold.

const (
	gmailSendHost = "gmail.googleapis.com"
	gmailSendPath = "/gmail/v1/users/me/messages/send"
	gmailSendURL  = "https://" + gmailSendHost + gmailSendPath
)

// approvalJSON is the part of `aileron approvals show --json` the tests read.
type approvalJSON struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	Digest  string `json:"digest"`
	State   string `json:"state"`
	Reason  string `json:"reason"`
}

// approvalEnv is a daemon with gmail installed and one session.
type approvalEnv struct {
	d    *daemon
	sess *session
	c    *http.Client
}

// startApprovalEnv starts a test daemon whose approval section is approval
// (hold, ttl, max_body), after edit (may be nil) changes the rest, installs
// gmail and creates a session.
func startApprovalEnv(t *testing.T, approval map[string]any, edit func(cfg map[string]any)) *approvalEnv {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["approval"] = approval
	if edit != nil {
		edit(cfg)
	}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.install(t, mustSpec(t, "gmail"))
	sess := d.newSession(t)
	return &approvalEnv{d: d, sess: sess, c: goClient(t, sess)}
}

// sendBody is a gmail messages.send body unique to the test.
func sendBody(tag string) string {
	return `{"raw":"UkFXLQ` + tag + `","threadId":"t-approvals-` + tag + `"}`
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// sends returns how many messages.send requests the fake upstream received.
func sends() int { return theSuite.up.Hits(gmailSendHost, gmailSendPath) }

// pendingReply checks a 403 approval_pending answer and returns its approval
// id (envelope and X-Aileron-Approval-Id agree; Retry-After is set).
func pendingReply(t *testing.T, what string, status int, h http.Header, body []byte) string {
	t.Helper()
	assertDenial(t, what, status, body, http.StatusForbidden, "capability_denied", "approval_pending")
	var env struct {
		Error struct {
			ApprovalID string `json:"approval_id"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	id := env.Error.ApprovalID
	if id == "" {
		t.Fatalf("%s: approval_pending envelope lacks approval_id: %s", what, trunc(body))
	}
	if got := h.Get("X-Aileron-Approval-Id"); got != id {
		t.Errorf("%s: X-Aileron-Approval-Id %q, envelope approval_id %q", what, got, id)
	}
	if h.Get("Retry-After") == "" {
		t.Errorf("%s: approval_pending lacks Retry-After; headers %v", what, h)
	}
	return id
}

// sentReply checks the upstream's 200 answer to messages.send and that it
// received exactly body.
func sentReply(t *testing.T, what string, status int, got []byte, body string) {
	t.Helper()
	var r struct {
		ID         string `json:"id"`
		BodySHA256 string `json:"body_sha256"`
	}
	if status != http.StatusOK || json.Unmarshal(got, &r) != nil || r.ID != "sent-1" {
		t.Fatalf("%s: %d %s; want 200 from the upstream", what, status, trunc(got))
	}
	if r.BodySHA256 != sha256Hex(body) {
		t.Errorf("%s: upstream received a body with SHA-256 %s, want %s (the approved bytes)", what, r.BodySHA256, sha256Hex(body))
	}
}

// reasonOf returns the envelope reason of a 403 body ("" otherwise).
func reasonOf(status int, body []byte) string {
	var env envelope
	if status != http.StatusForbidden || json.Unmarshal(body, &env) != nil {
		return ""
	}
	return env.Error.Reason
}

// listApprovals runs `approvals list --state state --json`.
func listApprovals(t *testing.T, d *daemon, state string) []approvalJSON {
	t.Helper()
	out := d.cli(t, "approvals", "list", "--state", state, "--json")
	var l struct {
		Approvals []approvalJSON `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("approvals list --json printed invalid JSON (%v): %q", err, out)
	}
	return l.Approvals
}

// showApproval runs `approvals show ID --json`.
func showApproval(t *testing.T, d *daemon, id string) approvalJSON {
	t.Helper()
	out := d.cli(t, "approvals", "show", id, "--json")
	var ap approvalJSON
	if err := json.Unmarshal([]byte(out), &ap); err != nil || ap.ID != id {
		t.Fatalf("approvals show %s --json printed %q (%v)", id, out, err)
	}
	return ap
}

// waitFor polls check (a CLI read of the daemon's state) until it is true.
func waitFor(t *testing.T, what string, limit time.Duration, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPendingFor waits until session has a pending approval and returns it.
func waitPendingFor(t *testing.T, d *daemon, sessID string) approvalJSON {
	t.Helper()
	var found approvalJSON
	waitFor(t, "a pending approval for session "+sessID, 60*time.Second, func() bool {
		for _, ap := range listApprovals(t, d, "pending") {
			if ap.Session == sessID {
				found = ap
				return true
			}
		}
		return false
	})
	return found
}

// TestApprovalsOneApprovalOneSend: 50 identical held requests and one
// approval forward exactly one request upstream.
func TestApprovalsOneApprovalOneSend(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "15s"}, nil)
	body := sendBody("race-" + randHex(6))
	const n = 50
	before := sends()
	results := make([]heldResult, n)
	var wg sync.WaitGroup
	for i := range n {
		c := goClient(t, e.sess) // one client (one CONNECT) each
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = <-startHeld(c, gmailSendURL, body)
		}()
	}
	ap := waitPendingFor(t, e.d, e.sess.ID)
	if !logHas(e.d, `"event":"approval.requested","approval_id":"`+ap.ID+`"`) {
		t.Errorf("while its requests are held, the daemon's log does not say that %s waits for a human:\n%s", ap.ID, e.d.logTail(3000))
	}
	e.d.cli(t, "approvals", "approve", ap.ID)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("held clients did not all finish within 3 minutes of the approval")
	}
	ok, outcomes := 0, map[string]int{}
	for i, r := range results {
		outcomes[fmt.Sprintf("%d %s", r.status, reasonOf(r.status, r.body))]++
		theSuite.seen.add("approvals race client", nil, r.body)
		switch reason := reasonOf(r.status, r.body); {
		case r.err != nil:
			t.Errorf("client %d: %v", i, r.err)
		case r.status == http.StatusOK:
			ok++
			sentReply(t, fmt.Sprintf("client %d", i), r.status, r.body, body)
		case reason == "approval_consumed" || reason == "approval_pending":
		default:
			t.Errorf("client %d: %d %s; want 200 once, else 403 approval_consumed or approval_pending", i, r.status, trunc(r.body))
		}
	}
	t.Logf("outcomes of %d identical held requests after one approval: %v", n, outcomes)
	if ok != 1 {
		t.Errorf("%d of %d identical requests were released by one approval, want exactly 1", ok, n)
	}
	if got := sends() - before; got != 1 {
		t.Errorf("the upstream received %d sends, want exactly 1", got)
	}
	if st := showApproval(t, e.d, ap.ID).State; st != "consumed" {
		t.Errorf("approval %s is %q after releasing its request, want consumed", ap.ID, st)
	}
}

// TestApprovalsBoundToBody: an approval for body A does not release body B,
// and what reaches the upstream is A's bytes exactly.
func TestApprovalsBoundToBody(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "2s"}, nil)
	tag := randHex(6)
	bodyA, bodyB := sendBody("A-"+tag), sendBody("B-"+tag) // same length, one byte apart
	before := sends()

	st, h, b := goDo(t, e.c, http.MethodPost, gmailSendURL, bodyA)
	idA := pendingReply(t, "body A", st, h, b)
	e.d.cli(t, "approvals", "approve", idA)

	st, h, b = goDo(t, e.c, http.MethodPost, gmailSendURL, bodyB)
	idB := pendingReply(t, "body B after A was approved", st, h, b)
	if idB == idA {
		t.Fatalf("body B was attached to body A's approval %s", idA)
	}
	if got := sends() - before; got != 0 {
		t.Fatalf("the upstream received %d sends after body B, want 0: A's approval released B", got)
	}
	if ap := showApproval(t, e.d, idB); ap.State != "pending" {
		t.Errorf("body B's approval %s is %q, want pending", idB, ap.State)
	}
	if ap := showApproval(t, e.d, idA); ap.State != "approved" {
		t.Errorf("body A's approval %s is %q after body B, want approved (unused)", idA, ap.State)
	}

	st, _, b = goDo(t, e.c, http.MethodPost, gmailSendURL, bodyA)
	sentReply(t, "body A retried after approval", st, b, bodyA)
	if got := sends() - before; got != 1 {
		t.Errorf("the upstream received %d sends, want 1", got)
	}
}

// TestApprovalsDeny: a denial reaches the held client with its reason and
// nothing is forwarded.
func TestApprovalsDeny(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "60s"}, nil)
	before := sends()
	held := startHeld(e.c, gmailSendURL, sendBody("deny-"+randHex(6)))
	ap := waitPendingFor(t, e.d, e.sess.ID)
	const reason = "wrong recipient, do not send"
	e.d.cli(t, "approvals", "deny", ap.ID, "--reason", reason)
	r := waitHeld(t, held)
	if r.err != nil {
		t.Fatalf("denied request: %v", r.err)
	}
	assertDenial(t, "denied request", r.status, r.body, http.StatusForbidden, "capability_denied", "approval_denied")
	var env envelope
	if json.Unmarshal(r.body, &env) == nil && !strings.Contains(env.Error.Message, reason) {
		t.Errorf("approval_denied message %q does not carry the reason %q", env.Error.Message, reason)
	}
	if got := sends() - before; got != 0 {
		t.Errorf("the upstream received %d sends for a denied request, want 0", got)
	}
	if got := showApproval(t, e.d, ap.ID); got.State != "denied" || got.Reason != reason {
		t.Errorf("approval after deny: state %q reason %q, want denied/%q", got.State, got.Reason, reason)
	}
}

// TestApprovalsRetry: the hold elapses (approval_pending), a human approves,
// the identical retry is sent once, and a further retry needs a new approval.
func TestApprovalsRetry(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "2s"}, nil)
	body := sendBody("retry-" + randHex(6))
	before := sends()
	st, h, b := goDo(t, e.c, http.MethodPost, gmailSendURL, body)
	id := pendingReply(t, "first attempt", st, h, b)
	if got := sends() - before; got != 0 {
		t.Fatalf("the upstream received %d sends before any approval", got)
	}
	e.d.cli(t, "approvals", "approve", id)

	st, _, b = goDo(t, e.c, http.MethodPost, gmailSendURL, body)
	sentReply(t, "retry after approval", st, b, body)
	if got := sends() - before; got != 1 {
		t.Fatalf("the upstream received %d sends after the approved retry, want 1", got)
	}
	if got := showApproval(t, e.d, id).State; got != "consumed" {
		t.Errorf("approval %s is %q after its retry, want consumed", id, got)
	}

	st, h, b = goDo(t, e.c, http.MethodPost, gmailSendURL, body)
	id2 := pendingReply(t, "second retry", st, h, b)
	if id2 == id {
		t.Errorf("the second retry reused the consumed approval %s", id)
	}
	if got := sends() - before; got != 1 {
		t.Errorf("the upstream received %d sends after the second retry, want still 1", got)
	}
}

// TestApprovalsExpire: an undecided approval expires after approval.ttl and
// can no longer be approved.
func TestApprovalsExpire(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "1s", "ttl": "3s"}, nil)
	before := sends()
	st, h, b := goDo(t, e.c, http.MethodPost, gmailSendURL, sendBody("expire-"+randHex(6)))
	id := pendingReply(t, "held request", st, h, b)
	waitFor(t, "approval "+id+" to expire", 60*time.Second, func() bool {
		return showApproval(t, e.d, id).State == "expired"
	})
	found := false
	for _, ap := range listApprovals(t, e.d, "expired") {
		found = found || ap.ID == id
	}
	if !found {
		t.Errorf("approvals list --state expired does not show %s", id)
	}
	out, errOut, err := e.d.run(t.Context(), "approvals", "approve", id)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("approving an expired approval: err %v (want a nonzero exit); stdout %q", err, out)
	}
	if msg := strings.ToLower(errOut); !strings.Contains(msg, "expired") || !strings.Contains(msg, "not pending") {
		t.Errorf("approving an expired approval: stderr %q should say it is expired, not pending", errOut)
	}
	if got := showApproval(t, e.d, id).State; got != "expired" {
		t.Errorf("approval %s is %q after the refused approve, want expired", id, got)
	}
	if got := sends() - before; got != 0 {
		t.Errorf("the upstream received %d sends, want 0", got)
	}
}

// TestApprovalsBodyTooLarge: a request needing approval whose body exceeds
// approval.max_body is refused outright: no approval, nothing sent.
func TestApprovalsBodyTooLarge(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "2s", "max_body": 256}, nil)
	before := sends()
	body := `{"raw":"` + strings.Repeat("QUJD", 200) + `","threadId":"t-too-large"}`
	st, _, b := goDo(t, e.c, http.MethodPost, gmailSendURL, body)
	assertDenial(t, "body over approval.max_body", st, b, http.StatusForbidden, "capability_denied", "body_too_large_for_approval")
	if l := listApprovals(t, e.d, ""); len(l) != 0 {
		t.Errorf("a refused oversized body recorded approvals: %+v", l)
	}
	if got := sends() - before; got != 0 {
		t.Errorf("the upstream received %d sends, want 0", got)
	}
}

// restartDaemon stops d (SIGTERM) and starts a new daemon process on the
// same home, with the stored config.yaml changed by edit (may be nil). The
// new daemon is stopped in t's cleanup.
func restartDaemon(t *testing.T, d *daemon, edit func(cfg map[string]any)) *daemon {
	t.Helper()
	if err := d.stop(); err != nil {
		t.Fatalf("daemon did not exit cleanly on SIGTERM: %v\n%s", err, d.logTail(4<<10))
	}
	cfgPath := filepath.Join(d.home, "config.yaml")
	if edit != nil {
		raw, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", cfgPath, err)
		}
		edit(cfg)
		if raw, err = json.MarshalIndent(cfg, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Remove(filepath.Join(d.home, "daemon.json"))
	nd, err := d.s.launch(d.home, cfgPath, "daemon-restarted.stderr.log", nil)
	if err != nil {
		t.Fatalf("restarted daemon: %v", err)
	}
	t.Cleanup(func() {
		if err := nd.stop(); err != nil {
			t.Errorf("restarted daemon did not exit cleanly on SIGTERM: %v\n%s", err, nd.logTail(4<<10))
		}
	})
	nd.logOnFailure(t)
	return nd
}

// TestApprovalsSurviveRestart: a pending approval outlives the daemon
// process; after a restart it can be approved and its identical retry is sent
// once. A client held while the daemon stops gets an answer or a closed
// connection, not a hang.
func TestApprovalsSurviveRestart(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "120s"}, func(cfg map[string]any) {
		cfg["proxy"].(map[string]any)["shutdown_timeout"] = "3s" // the held client is cut off soon
	})
	body := sendBody("restart-" + randHex(6))
	before := sends()
	held := startHeld(e.c, gmailSendURL, body)
	ap := waitPendingFor(t, e.d, e.sess.ID)

	d2 := restartDaemon(t, e.d, func(cfg map[string]any) {
		cfg["approval"] = map[string]any{"hold": "2s"}
	})
	select {
	case r := <-held:
		theSuite.seen.add("client held across a restart", nil, r.body)
		if r.err != nil || r.status != http.StatusForbidden || !strings.Contains(string(r.body), `"approval_pending"`) ||
			!strings.Contains(string(r.body), ap.ID) || !strings.Contains(string(r.body), "shutting down") {
			t.Errorf("the client held across the restart got status %d err %v body %s; want 403 approval_pending naming %s and the shutdown",
				r.status, r.err, trunc(r.body), ap.ID)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("the client held across the restart neither got an answer nor saw its connection close within 90s")
	}
	if got := sends() - before; got != 0 {
		t.Fatalf("the upstream received %d sends before any approval", got)
	}

	found := false
	for _, a := range listApprovals(t, d2, "pending") {
		found = found || a.ID == ap.ID
	}
	if !found {
		t.Fatalf("after the restart, approvals list does not show pending approval %s", ap.ID)
	}
	d2.cli(t, "approvals", "approve", ap.ID)

	pu := e.sess.proxyURL(t)
	pu.Host = d2.ProxyAddr // the new process bound a new port; the session is the same
	sess2 := *e.sess
	sess2.ProxyURL = pu.String()
	c := goClient(t, &sess2)
	st, _, b := goDo(t, c, http.MethodPost, gmailSendURL, body)
	sentReply(t, "identical retry after the restart", st, b, body)
	st, h, b := goDo(t, c, http.MethodPost, gmailSendURL, body)
	if id := pendingReply(t, "second identical retry", st, h, b); id == ap.ID {
		t.Errorf("the second retry reused the consumed approval %s", id)
	}
	if got := sends() - before; got != 1 {
		t.Errorf("the upstream received %d sends, want exactly 1", got)
	}
}

// TestApprovalsSandboxCannotDecide: with only the session's proxy URL, the
// approvals page and other loopback addresses are unreachable, so nothing a
// sandbox sends can approve its own request.
func TestApprovalsSandboxCannotDecide(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "1s"}, nil)
	before := sends()
	st, h, b := goDo(t, e.c, http.MethodPost, gmailSendURL, sendBody("self-"+randHex(6)))
	id := pendingReply(t, "held request", st, h, b)

	web := webAddr(t, e.d)
	_, webPort, err := net.SplitHostPort(web)
	if err != nil {
		t.Fatalf("web_addr %q: %v", web, err)
	}
	_, proxyPort, _ := net.SplitHostPort(e.d.ProxyAddr)
	auth := e.sess.auth(t)
	for _, target := range []string{web, "127.0.0.1:" + webPort, "localhost:" + webPort, "[::1]:" + webPort,
		"127.0.0.1:" + proxyPort, e.d.ProxyAddr} {
		tunnel, o := rawConnect(t, e.d.ProxyAddr, target, auth)
		if tunnel != nil {
			_ = tunnel.Close()
			t.Errorf("CONNECT %s through the session's proxy was accepted (200); it must be refused", target)
			continue
		}
		theSuite.seen.add("CONNECT "+target, o.Header, o.Body)
		if o.Err != nil {
			t.Errorf("CONNECT %s: %v; want a 403 envelope", target, o.Err)
			continue
		}
		if r := reasonOf(o.Status, o.Body); r != "host_not_allowed" && r != "private_address" {
			t.Errorf("CONNECT %s: %d %s; want 403 host_not_allowed or private_address", target, o.Status, trunc(o.Body))
		}
	}
	// Plain HTTP through the proxy toward the page's approve endpoint.
	for _, u := range []string{"http://" + web + "/approvals/" + url.PathEscape(id) + "/approve",
		"http://" + web + "/api/approvals"} {
		o := rawPlain(t, e.d.ProxyAddr, "POST "+u+" HTTP/1.1\r\nHost: "+web+"\r\nProxy-Authorization: "+auth+
			"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if o.Err != nil || o.Status != http.StatusForbidden {
			t.Errorf("plain POST %s through the proxy: %s; want 403", u, o)
		}
	}
	if got := showApproval(t, e.d, id).State; got != "pending" {
		t.Errorf("approval %s is %q after the sandbox's attempts, want pending", id, got)
	}
	if got := sends() - before; got != 0 {
		t.Errorf("the upstream received %d sends, want 0", got)
	}
}
