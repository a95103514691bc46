package integration

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// tmuxPane runs argv in a detached tmux session of its own (its own server
// socket) and returns functions to type a line, to read the screen, and to
// tell whether argv still runs.
func tmuxPane(t *testing.T, env []string, argv ...string) (typeLine func(string), screen func() string, alive func() bool) {
	t.Helper()
	requireTool(t, "tmux")
	sock := "aileron-it-" + randHex(6)
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-L", sock}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := tmux(append([]string{"new-session", "-d", "-x", "220", "-y", "60", "--"}, argv...)...); err != nil {
		t.Fatalf("tmux new-session: %v %s", err, out)
	}
	t.Cleanup(func() { _, _ = tmux("kill-server") })
	typeLine = func(line string) {
		if out, err := tmux("send-keys", "-t", "0", line, "Enter"); err != nil {
			t.Fatalf("tmux send-keys: %v %s", err, out)
		}
	}
	screen = func() string {
		out, _ := tmux("capture-pane", "-p", "-t", "0")
		return out
	}
	alive = func() bool {
		_, err := tmux("has-session", "-t", "0")
		return err == nil
	}
	return typeLine, screen, alive
}

// waitScreen waits up to 15 s for the screen to show want.
func waitScreen(t *testing.T, screen func() string, want string) string {
	t.Helper()
	var s string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s = screen(); strings.Contains(s, want) {
			return s
		}
	}
	t.Fatalf("the screen never showed %q:\n%s", want, s)
	return ""
}

// TestApprovalsWatch drives `aileron approvals watch` in a real terminal
// (tmux): a held request appears at once, `s 1` shows it, `a 1` approves it
// in place and the held request goes through, and `q` quits.
func TestApprovalsWatch(t *testing.T) {
	e := startApprovalEnv(t, map[string]any{"hold": "30s"}, nil)
	typeLine, screen, alive := tmuxPane(t, cleanEnv(e.d.home), e.d.s.bin, "approvals", "watch")
	waitScreen(t, screen, "Pending approvals: 0")
	body := sendBody("watch-" + randHex(6))
	held := startHeld(e.c, gmailSendURL, body)
	s := waitScreen(t, screen, "Pending approvals: 1")
	if !strings.Contains(s, "POST "+gmailSendHost) || !strings.Contains(s, "gmail.messages.send") {
		t.Fatalf("the pending approval is not described:\n%s", s)
	}
	typeLine("s 1")
	waitScreen(t, screen, "Request:")
	typeLine("a 1")
	waitScreen(t, screen, "approved ap_")
	select {
	case r := <-held:
		if r.status != http.StatusOK {
			t.Fatalf("the held request after `a 1`: %d %s", r.status, trunc(r.body))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the held request was not released")
	}
	waitScreen(t, screen, "Pending approvals: 0")
	typeLine("q")
	for deadline := time.Now().Add(10 * time.Second); alive(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("`q` did not end approvals watch:\n%s", screen())
		}
	}
}
