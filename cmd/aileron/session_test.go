package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
)

// sessionHome serves the admin API of a home of its own (the session
// manager, real, on the home's database) on the home's admin socket, sets
// AILERON_HOME to it and returns the manager.
func sessionHome(t *testing.T) *sessions.Manager {
	t.Helper()
	home := t.TempDir()
	t.Setenv("AILERON_HOME", home)
	m := &sessions.Manager{DB: testkit.OpenDB(t, filepath.Join(home, state.FileName)), Dir: filepath.Join(home, "sessions"),
		KeyFile: filepath.Join(home, "keys", "session.key"), ProxyURLHost: "127.0.0.1:9080"}
	if err := m.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ln, err := admin.ListenUnix(filepath.Join(home, "admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: (&admin.API{Sessions: m}).Handler(), ConnContext: admin.ConnContext}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return m
}

// `session create --unknown`, `session update ID --unknown` and the
// UNKNOWN column of `session list`; a bad or missing mode is a usage error
// naming the two modes, and the daemon is not asked.
func TestSessionUnknownCLI(t *testing.T) {
	m := sessionHome(t)
	code, out, errOut := providerCLI("", "session", "create", "--name", "agent", "--unknown", "learn")
	id := regexp.MustCompile(`session (s_[a-z2-7]+) created`).FindStringSubmatch(out)
	if code != 0 || id == nil || !strings.Contains(out, "unknown:     learn") {
		t.Fatalf("session create --unknown learn: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = providerCLI("", "session", "list")
	if code != 0 || !regexp.MustCompile(`UNKNOWN[\s\S]*`+id[1]+`\s+agent\s+\S+\s+all\s+learn\s`).MatchString(out) {
		t.Errorf("session list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = providerCLI("", "session", "update", id[1], "--unknown", "deny")
	if code != 0 || !strings.Contains(out, "unknown requests: deny") {
		t.Errorf("session update: exit %d\n%s%s", code, out, errOut)
	}
	if dp, err := m.Session(id[1]); err != nil || dp.Unknown != "deny" {
		t.Errorf("after session update the data plane sees %+v, %v", dp, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "update", id[1], "--unknown", "asking"}, "want deny, ask or learn"},
		{[]string{"session", "update", id[1]}, "want --unknown deny, --unknown ask or --unknown learn"},
		{[]string{"session", "update", "--unknown", "learn"}, "want exactly one session ID"},
		{[]string{"session", "create", "--unknown", "allow"}, "want deny, ask or learn"},
		{[]string{"session", "create", "--unknown", ""}, "want deny, ask or learn"},
	} {
		code, out, errOut := providerCLI("", c.args...)
		if code != 2 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("aileron %v: exit %d, output %q; want a usage error saying %q", c.args, code, out+errOut, c.want)
		}
	}
	if dp, _ := m.Session(id[1]); dp.Unknown != "deny" {
		t.Errorf("a refused update changed the mode to %q", dp.Unknown)
	}
	code, out, errOut = providerCLI("", "session", "update", "s_aaaaaaaaaaaaaaaaaaaa", "--unknown", "learn")
	if code == 0 || !strings.Contains(out+errOut, "session list") {
		t.Errorf("update of an unknown session: exit %d %q", code, out+errOut)
	}
}
