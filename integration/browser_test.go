package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/printable"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium, installed by scripts/test-deps.sh.
const chromiumPath = "/usr/bin/chromium"

// heldResult is what a client held at the approval gate finally received.
type heldResult struct {
	status int
	body   []byte
	err    error
}

// TestBrowserApprovals drives the approvals page in a real headless
// Chromium: log in with the admin token, watch a held request appear with
// its preview, approve it (the held client request then completes upstream),
// and deny another (its client gets 403 approval_denied).
//
// Contract with the daemon: admin.web_listen 127.0.0.1:0 serves the page and
// daemon.json carries the bound address as "web_addr"; the login token is
// $AILERON_HOME/keys/admin.token; approval.hold holds the client.
func TestBrowserApprovals(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): run `make test`, which installs chromium via scripts/test-deps.sh", chromiumPath, err)
	}
	s := theSuite
	cfg, err := s.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["approval"] = map[string]any{"hold": "150s"}
	d := s.startTestDaemon(t, cfg, nil)
	d.install(t, mustSpec(t, "gmail"))
	sess := d.newSession(t)
	web := webAddr(t, d)
	token := adminToken(t, d)

	b := newBrowser(t)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("browser: %s: %v\ndaemon stderr tail:\n%s", what, err, d.logTail(4<<10))
		}
	}
	text := func(sel string) string { // the element's innerText, in the page as it stands
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).innerText`))
		if err != nil {
			t.Fatalf("browser: reading %s: %v", sel, err)
		}
		return v
	}
	step("log in",
		chromedp.Navigate("http://"+web+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.SendKeys(chromedp.ID("name"), "Ada"),
		chromedp.Submit(chromedp.ID("token")),
		chromedp.WaitVisible(chromedp.ID("empty")),
	)
	if page := text("#list"); !strings.Contains(page, "No requests are waiting") {
		t.Errorf("empty list shows %q", page)
	}

	client := goClient(t, sess)
	send := "https://gmail.googleapis.com/gmail/v1/users/me/messages/send"

	// Approve: the held request completes upstream. Its thread id carries
	// characters that draw nothing or turn text around: the page shows
	// them as escapes (invariant 15).
	raw := "RAW-approve-" + randHex(8)
	held := startHeld(client, send, `{"raw":"`+raw+`","threadId":"t-browser-approve`+"\u3164\u115f\ufe0f\u17b4\u202e\u009b"+`"}`)
	step("see the held request", chromedp.WaitVisible(chromedp.CSS("article.approval")))
	page := text("article.approval")
	for _, want := range []string{"POST", "gmail.googleapis.com", "/gmail/v1/users/me/messages/send", "gmail.messages.send",
		"github://acme/aileron-connector-google", "t-browser-approve", sess.ID} {
		if !strings.Contains(page, want) {
			t.Errorf("preview lacks %q:\n%s", want, page)
		}
	}
	if !strings.Contains(page, raw) {
		t.Errorf("preview hides the body's raw field (the spec drops it from the audit trail, not from the approver):\n%s", page)
	}
	if !strings.Contains(page, `t-browser-approve\u3164\u115f\ufe0f\u17b4\u202e\u009b`) {
		t.Errorf("preview does not show the thread id's invisible characters as escapes:\n%s", page)
	}
	for _, r := range page {
		if r != '\n' && r != '\t' && printable.Hidden(r) {
			t.Errorf("the page shows %U as itself:\n%s", r, page)
		}
	}
	shot(t, b, "pending")
	step("approve", chromedp.Click(chromedp.CSS("article.approval form.approve button")),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if page := text("main"); !strings.Contains(page, "Approved.") || !strings.Contains(page, "web:Ada") {
		t.Errorf("the page after approving does not confirm it, or who decided:\n%s", page)
	}
	shot(t, b, "approved")
	step("back to the list", chromedp.Navigate("http://"+web+"/"), chromedp.WaitVisible(chromedp.ID("empty")))
	res := waitHeld(t, held)
	if res.err != nil || res.status != http.StatusOK || !strings.Contains(string(res.body), `"sent-1"`) {
		t.Fatalf("approved request: %d %v %s; want 200 from the upstream", res.status, res.err, trunc(res.body))
	}
	if n := s.up.Hits("gmail.googleapis.com", "/gmail/v1/users/me/messages/send"); n < 1 {
		t.Errorf("upstream saw %d sends after the approval, want at least 1", n)
	}

	// Deny: the held client gets 403 approval_denied with the reason.
	held = startHeld(client, send, `{"raw":"RAW-deny-`+randHex(8)+`","threadId":"t-browser-deny"}`)
	step("deny",
		chromedp.WaitVisible(chromedp.CSS("article.approval")),
		chromedp.SendKeys(chromedp.CSS("article.approval form.deny input[name=reason]"), "wrong thread"),
		chromedp.Click(chromedp.CSS("article.approval form.deny button")),
		chromedp.WaitVisible(chromedp.ID("confirm")),
	)
	res = waitHeld(t, held)
	var env struct {
		Error struct{ Class, Reason, Message string }
	}
	if res.err != nil || res.status != http.StatusForbidden || json.Unmarshal(res.body, &env) != nil ||
		env.Error.Reason != "approval_denied" || !strings.Contains(env.Error.Message, "wrong thread") {
		t.Fatalf("denied request: %d %v %s; want 403 approval_denied naming the reason", res.status, res.err, trunc(res.body))
	}

	// History: both decisions, newest first (the approval its request then
	// used is "consumed"), with who decided and why, in the viewer's time
	// zone.
	step("history", chromedp.Navigate("http://"+web+"/history"), chromedp.WaitVisible(chromedp.ID("history")))
	hist := text("#history tbody")
	if strings.Index(hist, "denied") > strings.Index(hist, "consumed") || !strings.Contains(hist, "wrong thread") ||
		strings.Count(hist, "web:Ada") != 2 || strings.Contains(hist, "T0") && strings.Contains(hist, "Z") {
		t.Errorf("history (want denied, then approved, by web:Ada, local times):\n%s", hist)
	}
	shot(t, b, "history")
	// A phone: a long path breaks at its slashes, not in a word.
	step("phone", chromedp.EmulateViewport(375, 740), chromedp.Navigate("http://"+web+"/history"), chromedp.WaitVisible(chromedp.ID("history")))
	shot(t, b, "history-phone")
}

// shot saves a screenshot of the page to $AILERON_IT_SHOTS/NAME.png when
// that is set, to look at.
func shot(t *testing.T, b context.Context, name string) {
	t.Helper()
	dir := os.Getenv("AILERON_IT_SHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

// newBrowser starts a headless Chromium with a fresh profile and extra
// options, closed when t ends, and returns its tab's context.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	}
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// The first action starts the browser, which lives as long as bctx: it
	// runs without a timeout; later steps bound themselves.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	return bctx
}

// startHeld sends one request through the proxy in the background; the
// approval gate holds it until a human decides.
func startHeld(c *http.Client, target, body string) <-chan heldResult {
	ch := make(chan heldResult, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPost, target, strings.NewReader(body))
		if err != nil {
			ch <- heldResult{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			ch <- heldResult{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- heldResult{status: resp.StatusCode, body: b, err: err}
	}()
	return ch
}

func waitHeld(t *testing.T, ch <-chan heldResult) heldResult {
	t.Helper()
	select {
	case r := <-ch:
		theSuite.seen.add("held client", nil, r.body)
		return r
	case <-time.After(2 * time.Minute):
		t.Fatal("the held request did not complete within 2 minutes of the decision")
		return heldResult{}
	}
}

// webAddr reads the approvals page's bound address from daemon.json.
func webAddr(t *testing.T, d *daemon) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.home, "daemon.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		WebAddr string `json:"web_addr"`
	}
	if err := json.Unmarshal(raw, &st); err != nil || st.WebAddr == "" {
		t.Fatalf("daemon.json has no web_addr (the approvals page's bound address): %s (%v)", raw, err)
	}
	return st.WebAddr
}

// adminToken reads the token the approvals page's login asks for.
func adminToken(t *testing.T, d *daemon) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(d.home, "keys", "admin.token"))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	return strings.TrimSpace(string(raw))
}
