package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/proposals"
)

// startProposalsAPI serves the real admin API, backed by a proposal store
// on a fresh database, on home's admin socket.
func startProposalsAPI(t *testing.T, home string, onEvent func(audit.Event)) *proposals.Store {
	t.Helper()
	store := &proposals.Store{DB: testkit.OpenDB(t, filepath.Join(t.TempDir(), "state.db")), OnEvent: onEvent}
	ln, err := admin.ListenUnix(filepath.Join(home, "admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: (&admin.API{Proposals: store}).Handler()}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return store
}

func runProposals(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("AILERON_HOME", home)
	var out, errb bytes.Buffer
	code := run(append([]string{"proposals"}, args...), strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

func TestProposalsCommands(t *testing.T) {
	home := t.TempDir()
	t.Setenv("USER", "alice")
	var mu sync.Mutex
	var rejected []audit.Event
	store := startProposalsAPI(t, home, func(ev audit.Event) {
		if ev.Name == audit.EventProposalRejected {
			mu.Lock()
			rejected = append(rejected, ev)
			mu.Unlock()
		}
	})
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// What a sandbox sent, hostile: a terminal escape and a newline in the
	// path, a bidi override in the method.
	hostile := dataplane.UnknownRequest{Session: "s_one", Method: "GET\u202e", Host: "api.example.com", Port: 443,
		Path: "/x/\x1b]0;pwned\x07/\n/42", AuditID: "au_1", Credential: true, Time: at}
	id, err := store.Learn(t.Context(), hostile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Learn(t.Context(), dataplane.UnknownRequest{Session: "s_two", Method: "POST",
		Host: "other.example.com", Port: 443, Path: "/v1/things", Time: at}); err != nil {
		t.Fatal(err)
	}

	out, errs, code := runProposals(t, home, "list", "--session", "s_one")
	if code != 0 || !strings.Contains(out, id) || strings.Contains(out, "other.example.com") {
		t.Fatalf("list --session s_one: code %d\n%s%s", code, out, errs)
	}
	out, _, _ = runProposals(t, home, "list")
	if !strings.Contains(out, "other.example.com") {
		t.Errorf("list without --session misses s_two's proposal:\n%s", out)
	}
	out, errs, code = runProposals(t, home, "show", id)
	if code != 0 {
		t.Fatalf("show: code %d: %s", code, errs)
	}
	for _, want := range []string{`/x/\x1b]0;pwned\x07/\n/{id}`, `GET\u202e`, "carried one", "au_1"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"list", "show"} {
		o, _, _ := runProposals(t, home, name, id)
		if name == "list" {
			o, _, _ = runProposals(t, home, "list")
		}
		if strings.ContainsAny(o, "\x1b\x07\u202e") {
			t.Errorf("%s prints a control character from the sandbox:\n%q", name, o)
		}
	}

	if _, errs, code := runProposals(t, home, "reject", id); code != 2 || !strings.Contains(errs, "--reason is required") {
		t.Errorf("reject without --reason: code %d: %s", code, errs)
	}
	out, errs, code = runProposals(t, home, "reject", id, "--reason", "not for this agent")
	if code != 0 || !strings.Contains(out, "rejected "+id) {
		t.Fatalf("reject: code %d\n%s%s", code, out, errs)
	}
	out, _, _ = runProposals(t, home, "show", id)
	if !strings.Contains(out, "rejected   by cli:alice: not for this agent") {
		t.Errorf("show after reject:\n%s", out)
	}
	if _, errs, code := runProposals(t, home, "reject", id, "--reason", "again"); code == 0 || !strings.Contains(errs, "already decided") {
		t.Errorf("second reject: code %d: %s", code, errs)
	}
	if _, errs, code := runProposals(t, home, "show", "pr_aaaaaaaaaaaaaaaaaaaa"); code == 0 || !strings.Contains(errs, "no such proposal") {
		t.Errorf("show of an unknown id: code %d: %s", code, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rejected) != 1 || rejected[0].Details["by"] != "cli:alice" {
		t.Errorf("proposal.rejected events = %+v, want one by cli:alice", rejected)
	}
}
