// Package demo holds the test of `make demo` (run.sh, the stand-in API in
// upstream/, the agent in agent/): the walk-through must keep showing what
// it says, so it runs here whole.
package demo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoWalkThrough runs examples/demo/run.sh as `make demo` does, on a
// freshly built binary in a directory of its own (the proxy and the page
// on ports the kernel picks; the stand-in API on 127.0.0.2:8443, which the
// demo's config names), and checks each step shows what it claims: the key
// added on the wire that the agent never held, the denial, the approval
// held, approved from the CLI and sent once, and the audit trail read and
// verified; and that it leaves nothing running.
func TestDemoWalkThrough(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	gotool, err := exec.LookPath("go") // the demo needs Go: it builds the stand-in API and the agent
	if err != nil {
		t.Fatalf("the demo needs the go command on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "aileron")
	build := exec.Command(gotool, "build", "-o", bin, "./cmd/aileron")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	demo := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("examples", "demo", "run.sh"))
	cmd.Dir = root
	for _, kv := range os.Environ() { // none of the caller's Aileron settings
		if !strings.HasPrefix(kv, "AILERON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BIN="+bin, "DEMO_DIR="+demo,
		"AILERON_PROXY__LISTEN=127.0.0.1:0", "AILERON_ADMIN__WEB_LISTEN=127.0.0.1:0")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("run.sh: %v\n%s", err, out)
	}
	checkSteps(t, out, demo)
	// The daemon's command line names the binary, the rest name the demo's
	// directory: neither may be left running.
	if left := append(running(t, demo), running(t, filepath.Dir(bin))...); len(left) > 0 {
		t.Errorf("the demo left processes running: %v", left)
	}
}

// checkSteps checks that each step of the walk-through's output shows what
// it claims, and that the stand-in API's key (in demo) never appears.
func checkSteps(t *testing.T, out, demo string) {
	t.Helper()
	steps := regexp.MustCompile(`(?m)^== (\d)\.`).FindAllStringSubmatch(out, -1)
	if len(steps) != 8 || steps[0][1] != "1" || steps[7][1] != "8" {
		t.Errorf("want steps 1 to 8 in order, got %v", steps)
	}
	step := func(n string) string { // the output of step n
		_, rest, _ := strings.Cut(out, "\n== "+n+".")
		body, _, _ := strings.Cut(rest, "\n== ")
		return body
	}
	key, err := os.ReadFile(filepath.Join(demo, "api.key"))
	if err != nil || len(key) < 20 {
		t.Fatalf("the stand-in API's key: %q %v", key, err)
	}
	if strings.Contains(out, string(key)) {
		t.Errorf("the API's key appears in the walk-through: only Aileron may hold it")
	}
	for _, c := range []struct{ step, what string }{
		{"3", "DEMO_API_KEY=aileron-placeholder-"},
		{"4", "(Authorization: Bearer aileron-placeholder-"},
		{"4", `200 OK {"authorized":true,"id":"1","text":"hello"}`},
		{"5", `403 Forbidden {"error":{"class":"capability_denied"`},
		{"5", "matches no operation"},
		{"6", "pending"},
		{"6", "Operation:   greetings.create"},
		{"6", "Authorization: Bearer aileron-placeholder-"},
		{"6", "approved ap_"},
		{"6", `201 Created {"authorized":true,"creates_received":1,`},
		{"7", "received GET /v1/greetings/1 with the API key"},
		{"7", "received POST /v1/greetings with the API key"},
		{"8", "connector.proxy.rejected    deny"},
		{"8", "approval.approved"},
		{"8", "allow_after_approval"},
		{"8", "DELETE api.demo.test:443/v1/greetings/1"},
		{"8", "ok: "},
		{"8", "checkpoint(s) verified"},
		{"8", "is on record, unchanged"},
	} {
		if !strings.Contains(step(c.step), c.what) {
			t.Errorf("step %s does not show %q:\n%s", c.step, c.what, step(c.step))
		}
	}
	got := regexp.MustCompile(`(?m)^api\.demo\.test: received .*$`).FindAllString(step("7"), -1)
	if len(got) != 2 || strings.Contains(strings.Join(got, "\n"), "DELETE") || strings.Contains(strings.Join(got, "\n"), "without") {
		t.Errorf("the API should have received the GET and the POST once each, with its key, and nothing else:\n%s", step("7"))
	}
	if strings.Contains(step("8"), "not signed yet") {
		t.Errorf("after a clean stop every line is signed:\n%s", step("8"))
	}
}

// running lists the processes whose command line names dir.
func running(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), dir) {
			left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return left
}
