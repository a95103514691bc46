package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/sessions"
)

// TestLaunchUnknownMode: `launch --unknown learn` runs the command in a
// new session in learn mode (seen while the command runs; the session is
// gone after it, and launch names it for its proposals); a bad mode, or a
// mode with --session, is a usage error before the daemon is asked, for
// launch and sandbox run alike.
func TestLaunchUnknownMode(t *testing.T) {
	m := sessionHome(t)
	stdin, feed := io.Pipe()
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"launch", "--name", "learner", "--unknown", "learn", "--", "cat"}, stdin, &out, &errb)
	}()
	var seen sessions.Info
	for deadline := time.Now().Add(20 * time.Second); seen.ID == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		list, err := m.List()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.Name == "learner" {
				seen = s
			}
		}
	}
	feed.Close() // cat ends, and launch with it
	if code := <-done; code != 0 || seen.Unknown != "learn" {
		t.Fatalf("launch --unknown learn: exit %d, session %+v\n%s%s", code, seen, out.String(), errb.String())
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Errorf("sessions left after launch: %+v", list)
	}
	// The session is gone, so launch names it: its id is what reads and
	// accepts its proposals.
	if want := "session " + seen.ID + " (learn) ended; what it asked for is kept as proposals:\n" +
		"  aileron proposals list --session " + seen.ID + "\n" +
		"  aileron proposals accept --session " + seen.ID + " --connector NAME"; !strings.Contains(errb.String(), want) {
		t.Errorf("launch --unknown learn, on its end: stderr %q; want %q", errb.String(), want)
	}
	errb.Reset()
	if code := run([]string{"launch", "--", "true"}, strings.NewReader(""), &out, &errb); code != 0 || strings.Contains(errb.String(), "proposals") {
		t.Errorf("launch in deny mode: exit %d, stderr %q; want no word of proposals", code, errb.String())
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--unknown", "maybe", "--", "true"}, `--unknown: unknown-request mode "maybe" is not one of`},
		{[]string{"launch", "--session", "s_abc", "--unknown", "learn", "--", "true"}, "use it with --new, not --session (session s_abc keeps its own; change it with `aileron session update s_abc --unknown learn`)"},
		{[]string{"sandbox", "run", "--unknown", "maybe", "--", "true"}, `--unknown: unknown-request mode "maybe" is not one of`},
		{[]string{"sandbox", "run", "--session", "s_abc", "--unknown", "learn", "--", "true"}, "use it with --new, not --session"},
	} {
		code, out, errOut := providerCLI("", c.args...)
		if code != 2 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("aileron %v: exit %d, output %q; want a usage error saying %q", c.args, code, out+errOut, c.want)
		}
	}
	if list, _ := m.List(); len(list) != 0 {
		t.Errorf("a refused launch created sessions: %+v", list)
	}
	for _, cmd := range [][]string{{"launch", "--help"}, {"sandbox", "run", "--help"}} {
		code, out, errOut := providerCLI("", cmd...)
		if code != 0 || !strings.Contains(errOut+out, "--unknown MODE") || !strings.Contains(errOut+out, "for the session --new creates (default deny)") {
			t.Errorf("aileron %v: exit %d\n%s%s", cmd, code, out, errOut)
		}
	}
}
