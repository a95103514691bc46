//go:build linux

package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// localEscapeScript reports, one key=value per line, what a fenced command
// can do to the machine outside its network namespace. The core_pattern
// write puts back the value already there, so it changes nothing even if
// the fence were broken.
const localEscapeScript = `
echo "uid=$(id -u)"
echo "nnp=$(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status)"
echo "capeff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)"
echo "capbnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)"
echo "pid1=$(tr '\0' ' ' < /proc/1/cmdline)"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
if [ -e "$ADMIN_SOCK" ]; then echo admin=visible; else echo admin=hidden; fi
if (cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern) 2>/dev/null; then echo core=written; else echo core=refused; fi
echo "run=$(ls -A /run | tr '\n' ' ')"
echo "resolv=$(grep -c '^nameserver 10\.237\.' /etc/resolv.conf)"
if (exec 3</proc/1/mem) 2>/dev/null || cat /proc/1/environ >/dev/null 2>&1; then echo helper=open; else echo helper=closed; fi
echo "sysmount=$(awk '$2=="/sys"{v=$4} END{split(v,o,",");print o[1]}' /proc/self/mounts)"
echo "cgroups=$(ls -A /sys/fs/cgroup 2>/dev/null | wc -l)"
if [ -e /dev/kmsg ]; then echo kmsg=present; else echo kmsg=absent; fi
echo "keys=$(wc -c < /proc/keys 2>/dev/null || echo 0)"
echo "session=$(cut -d' ' -f6 /proc/self/stat)"
echo "shell=$$"
echo "fds=$(ls /proc/self/fd | wc -l)"
echo "ipc=$(readlink /proc/self/ns/ipc)"
kill -ABRT 1 2>/dev/null; sleep 0.2; echo helper_alive=yes
(sleep 317 </dev/null >/dev/null 2>&1 &)
echo left=sleep
`

// Capabilities (bit numbers) a fenced command must never have: each could
// undo the fence or reach past its namespaces.
var forbiddenCaps = map[string]uint{"NET_ADMIN": 12, "NET_RAW": 13, "SYS_MODULE": 16, "SYS_RAWIO": 17,
	"SYS_PTRACE": 19, "SYS_ADMIN": 21, "DAC_READ_SEARCH": 2, "BPF": 39, "PERFMON": 38}

// checkLocalEscapes is the other half of "no route but Aileron": a fenced
// command cannot leave through the machine instead of the network. As the
// default user (nobody, here) and as root by request, it sees only its own
// processes, cannot reach the daemon's admin socket or the host's /run
// sockets, cannot write kernel tunables, holds no capability that could
// undo the fence, and leaves nothing running behind it.
func checkLocalEscapes(t *testing.T, w *fenceWorld) {
	t.Helper()
	script := "ADMIN_SOCK=" + filepath.Join(w.d.home, "admin.sock") + "\n" + localEscapeScript
	hostIPC, _ := os.Readlink("/proc/self/ns/ipc")
	for _, c := range []struct {
		name  string
		flags []string
		uid   string
	}{
		{"default user", nil, "65534"},
		{"root by request", []string{"--user", "root"}, "0"},
	} {
		out, stderr, err := w.fenced(t, script, c.flags...)
		if err != nil {
			t.Errorf("%s: %v\n%s\n%s", c.name, err, out, stderr)
			continue
		}
		got := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				got[k] = strings.TrimSpace(v)
			}
		}
		t.Logf("%s: %q", c.name, got)
		procs, _ := strconv.Atoi(got["procs"])
		want := map[string]bool{
			"runs as " + c.uid:                  got["uid"] == c.uid,
			"no_new_privs":                      got["nnp"] == "1",
			"first process is the helper":       strings.HasPrefix(got["pid1"], "aileron-sandbox-init"),
			"sees only its own processes":       procs > 0 && procs < 20,
			"admin socket hidden":               got["admin"] == "hidden",
			"kernel tunables read-only":         got["core"] == "refused",
			"host /run hidden":                  got["run"] == "aileron",
			"resolver is Aileron":               got["resolv"] == "1",
			"no capability that undoes a fence": !hasCap(got["capeff"]) && !hasCap(got["capbnd"]),
			"helper not open to ptrace":         got["helper"] == "closed",
			"/sys read-only, no cgroups":        got["sysmount"] == "ro" && got["cgroups"] == "0",
			"no /dev/kmsg":                      got["kmsg"] == "absent",
			"/proc/keys masked":                 got["keys"] == "0",
			"own session, no terminal":          got["session"] != "" && got["session"] == got["shell"],
			"nothing inherited":                 got["fds"] == "4", // ls's 0, 1, 2 and the directory it reads
			"own IPC namespace":                 got["ipc"] != "" && got["ipc"] != hostIPC,
			"helper survives SIGABRT":           got["helper_alive"] == "yes",
		}
		if c.uid != "0" {
			want["no capability at all"] = got["capeff"] == "0000000000000000" && got["capbnd"] == "0000000000000000"
		}
		for what, ok := range want {
			if !ok {
				t.Errorf("%s: %s: no (%q)", c.name, what, got)
			}
		}
	}
	waitNoProcess(t, []byte("sleep\x00317\x00"))
	_, stderr, err := w.d.runIn(t.Context(), t.TempDir(), "", "sandbox", "run", "--session", w.session, "--", "true")
	if err == nil || !strings.Contains(stderr, "cd to one it can read, or pass --user") {
		t.Errorf("run from a directory nobody cannot enter: %v %q; want a failure saying what to do", err, stderr)
	}
}

// hasCap reports whether the hex capability mask has a forbidden bit.
func hasCap(mask string) bool {
	v, err := strconv.ParseUint(mask, 16, 64)
	if err != nil {
		return true
	}
	for _, bit := range forbiddenCaps {
		if v&(1<<bit) != 0 {
			return true
		}
	}
	return false
}

// waitNoProcess fails t if a process with this exact command line is still
// running two seconds after the sandboxes that started it ended.
func waitNoProcess(t *testing.T, cmdline []byte) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		found := ""
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && bytes.Equal(b, cmdline) {
				found = e.Name()
			}
		}
		if found == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pid %s (%q), started in a fenced sandbox, outlived it", found, cmdline)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLauncherKilled: when the launcher dies without a word (SIGKILL),
// the command dies with it, and the daemon, watching the sandbox's first
// process, removes the sandbox.
func checkLauncherKilled(t *testing.T, w *fenceWorld) {
	t.Helper()
	cmd := exec.Command(w.d.s.bin, "sandbox", "run", "--session", w.session, "--", "sleep", "319")
	cmd.Env, cmd.Dir = cleanEnv(w.d.home), "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		out, _, err := w.d.run(t.Context(), "sandbox", "list", "--json")
		var list []map[string]any
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			return -1
		}
		return len(list)
	}
	deadline := time.Now().Add(10 * time.Second)
	for listed() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := listed(); n != 1 {
		_ = cmd.Process.Kill()
		t.Fatalf("sandbox list shows %d sandboxes while one runs", n)
	}
	out, _, _ := w.d.run(t.Context(), "sandbox", "list", "--json")
	var list []struct{ DNS string }
	_ = json.Unmarshal([]byte(out), &list)
	if len(list) == 1 { // its listeners serve its link alone: not the daemon's own namespace (lo), nor another link
		err := inNetns(w.aileron, func() error {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(list[0].DNS, "443"), 300*time.Millisecond)
			if err == nil {
				_ = c.Close()
			}
			return err
		})
		if err == nil {
			t.Error("a process of the daemon's namespace reached a sandbox's transparent listener")
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitNoProcess(t, []byte("sleep\x00319\x00"))
	deadline = time.Now().Add(3 * time.Second)
	for listed() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := listed(); n != 0 {
		t.Errorf("%d sandboxes still listed after their launcher and command died", n)
	}
}

// revokeScript makes one request on a kept-alive connection, waits for a
// line on stdin (the test deletes the session meanwhile), then tries a
// second request on the same connection.
const revokeScript = `
import http.client, sys
c = http.client.HTTPSConnection("api.fence.test", 443, timeout=5)
c.request("GET", "/echo/before"); r = c.getresponse(); r.read()
print("first", r.status, flush=True)
sys.stdin.readline()
try:
    c.request("GET", "/echo/after"); r = c.getresponse()
    print("second", r.status, r.read()[:300].decode(errors="replace"), flush=True)
except Exception as e:
    print("second failed:", type(e).__name__, flush=True)
`

// checkRevocationInSandbox is invariant 10 on a transparent tunnel: once
// its session is deleted, a kept-alive connection from a fenced sandbox
// sends nothing more upstream.
func checkRevocationInSandbox(t *testing.T, w *fenceWorld) {
	t.Helper()
	out := w.d.cli(t, "session", "create", "--name", "revoked", "--json")
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(out), &info); err != nil || info.ID == "" {
		t.Fatalf("session create: %q %v", out, err)
	}
	cmd := exec.Command(w.d.s.bin, "sandbox", "run", "--session", info.ID, "--", "/usr/bin/python3", "-c", revokeScript)
	cmd.Env, cmd.Dir = cleanEnv(w.d.home), "/"
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "first 200" {
		t.Fatalf("first request: %q\n%s", lines.Text(), stderr.String())
	}
	w.d.cli(t, "session", "delete", info.ID)
	_, _ = io.WriteString(stdin, "go\n")
	if !lines.Scan() {
		t.Fatalf("no answer to the second request\n%s", stderr.String())
	}
	if got := lines.Text(); strings.Contains(got, "echo/after") || strings.HasPrefix(got, "second 200") {
		t.Errorf("after the session was deleted, the kept-alive transparent connection still reached upstream: %s", got)
	} else {
		t.Logf("after deletion: %s", got)
	}
}

// floodScript opens 600 connections to an allowed name's listener as fast
// as it can and counts those the fence reset.
const floodScript = `
import socket, time
addr = socket.getaddrinfo("api.fence.test", 443, socket.AF_INET)[0][4]
ok = reset = 0
t = time.monotonic()
for _ in range(600):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect(addr); ok += 1
    except OSError:
        reset += 1
    s.close()
print(ok, reset, int((time.monotonic() - t) * 1000))
`

// checkNewFlowLimit: a sandbox cannot open connections to its listeners
// faster than the fence's new-flow rate; the rest are reset at once.
func checkNewFlowLimit(t *testing.T, w *fenceWorld) {
	t.Helper()
	out, stderr, err := w.fenced(t, "/usr/bin/python3 -c '"+floodScript+"'")
	var ok, reset, ms int
	if _, perr := fmt.Sscan(out, &ok, &reset, &ms); err != nil || perr != nil {
		t.Fatalf("flood: %v %v\n%s\n%s", err, perr, out, stderr)
	}
	t.Logf("600 connections in %d ms: %d accepted, %d reset", ms, ok, reset)
	if limit := 200 + 100*(ms/1000+1); ok > limit || reset == 0 {
		t.Errorf("%d of 600 connections accepted in %d ms (want at most %d, the rest reset)", ok, ms, limit)
	}
}
