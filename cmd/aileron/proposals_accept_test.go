package main

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
	"github.com/aileronhq/aileron/store"
)

// acceptAPI is the real admin API with a connector store, sessions,
// proposals and approvals on one database, served on home's admin socket.
type acceptAPI struct {
	api     *admin.API
	session sessions.Info
}

func startAcceptAPI(t *testing.T, home string) *acceptAPI {
	t.Helper()
	data := t.TempDir()
	db := testkit.OpenDB(t, filepath.Join(data, state.FileName))
	sm := &sessions.Manager{DB: db, Dir: filepath.Join(data, "sessions"), KeyFile: filepath.Join(data, "keys", "session.key"),
		ProxyURLHost: "127.0.0.1:9080", SystemRoots: []string{}}
	if err := sm.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := &acceptAPI{api: &admin.API{Store: &store.Store{Dir: filepath.Join(data, "store"), DB: db}, Sessions: sm,
		Proposals: &proposals.Store{DB: db}, Approvals: &approvals.Store{DB: db}}}
	var err error
	if a.session, err = sm.Create(t.Context(), sessions.CreateRequest{Name: "ci agent"}); err != nil {
		t.Fatal(err)
	}
	ln, err := admin.ListenUnix(filepath.Join(home, "admin.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.api.Handler(), ConnContext: admin.ConnContext}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return a
}

func (a *acceptAPI) learn(t *testing.T, method, path string, cred bool) string {
	t.Helper()
	id, err := a.api.Proposals.Learn(t.Context(), dataplane.UnknownRequest{Session: a.session.ID, Method: method,
		Host: "api.example.com", Port: 443, Path: path, Credential: cred, Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// hold records a pending approval of a request of proposal (none when "").
func (a *acceptAPI) hold(t *testing.T, digest, path, proposal string) string {
	t.Helper()
	res, err := a.api.Approvals.Await(t.Context(), &dataplane.ApprovalRequest{Session: a.session.ID, Method: "GET",
		Host: "api.example.com", Port: 443, Path: path, Digest: digest,
		Preview: dataplane.Preview{Method: "GET", Path: path, Connector: "local://acme/x", Operation: "op", ProposalID: proposal}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return res.ID
}

func runAccept(t *testing.T, home string, args ...string) (string, string, int) {
	t.Helper()
	t.Setenv("AILERON_HOME", home)
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestProposalsAcceptCommand: accept with edits says what it installed,
// where, and what to do about the credential the requests carried; the
// flags that cannot go together are usage errors; a bad edit is the
// daemon's clear refusal.
func TestProposalsAcceptCommand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("USER", "alice")
	a := startAcceptAPI(t, home)
	id := a.learn(t, "POST", "/v1/repos/42/issues", true)
	out, errs, code := runAccept(t, home, "proposals", "accept", id, "--template", "/v1/repos/{repo}/issues", "--approval", "none")
	for _, want := range []string{"accepted " + id + ": POST /v1/repos/{repo}/issues (no approval) on api.example.com:443 as operation post-v1-repos-repo-issues",
		"installed local://learned/ci-agent@1.0.0", "the rule binds none", "its \"dir\" in `aileron connector list --json`", "aileron credential bind"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("accept: code %d, want %q in\n%s%s", code, want, out, errs)
		}
	}
	out, _, _ = runAccept(t, home, "proposals", "show", id)
	if !strings.Contains(out, "accepted   by cli:alice as POST /v1/repos/{repo}/issues (no approval) into local://learned/ci-agent@1.0.0") {
		t.Errorf("show of an accepted proposal:\n%s", out)
	}
	other := a.learn(t, "GET", "/v1/x", false)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"accept"}, "want one proposal ID"},
		{[]string{"accept", other, "--session", a.session.ID}, "give no proposal ID"},
		{[]string{"accept", "--session", a.session.ID, "--template", "/x"}, "--template edits one proposal"},
		{[]string{"accept", other, "--approval", "maybe"}, "not required or none"},
		{[]string{"accept", other, "--method", "get"}, "write GET"},
		{[]string{"accept", id}, "already decided"},
	} {
		_, errs, code := runAccept(t, home, append([]string{"proposals"}, tc.args...)...)
		if code == 0 || !strings.Contains(errs, tc.says) {
			t.Errorf("proposals %v: code %d, want an error saying %q: %s", tc.args, code, tc.says, errs)
		}
	}
	if p, _ := a.api.Proposals.Get(t.Context(), other); p.State != proposals.StateOpen {
		t.Errorf("after refused accepts the proposal is %s", p.State)
	}
	// A path a sandbox sent with a terminal escape cannot become a rule,
	// and the refusal shows it escaped.
	hostile := a.learn(t, "GET", "/x/\x1b]0;pwned\x07/1", false)
	_, errs, code = runAccept(t, home, "proposals", "accept", hostile)
	if code == 0 || strings.ContainsAny(errs, "\x1b\x07") || !strings.Contains(errs, "not a valid path template") {
		t.Errorf("accepting a hostile template: code %d %q", code, errs)
	}
}

// TestApprovalsApproveAsRule: --as-rule accepts the approval's proposal
// with the edits and approves the held requests the rule allows, saying
// that the one named stays pending when the rule leaves it out; an approval without a
// proposal is a clear error; edit flags need --as-rule.
func TestApprovalsApproveAsRule(t *testing.T) {
	home := t.TempDir()
	t.Setenv("USER", "alice")
	a := startAcceptAPI(t, home)
	prop := a.learn(t, "GET", "/v1/items/7", false)
	held := a.hold(t, "d-unknown", "/v1/items/7", prop)
	plain := a.hold(t, "d-plain", "/x", "")
	narrow := a.hold(t, "d-narrow", "/v1/items/8", prop) // the rule as edited below leaves it out
	if _, errs, code := runAccept(t, home, "approvals", "approve", held, "--template", "/v1/items/{item}"); code == 0 || !strings.Contains(errs, "add --as-rule") {
		t.Errorf("an edit without --as-rule: code %d %s", code, errs)
	}
	_, errs, code := runAccept(t, home, "approvals", "approve", plain, "--as-rule")
	if code == 0 || !strings.Contains(errs, "approve it without --as-rule") {
		t.Errorf("--as-rule on an approval without a proposal: code %d %s", code, errs)
	}
	out, errs, code := runAccept(t, home, "approvals", "approve", narrow, "--as-rule", "--template", "/v1/items/7", "--connector", "items")
	if code != 0 || !strings.Contains(out, "installed local://learned/items@1.0.0") || !strings.Contains(out, "approved the held request "+held) ||
		!strings.Contains(out, "approval "+narrow+" stays pending") {
		t.Fatalf("approve --as-rule: code %d\n%s%s", code, out, errs)
	}
	p, _ := a.api.Proposals.Get(t.Context(), prop)
	ap, _ := a.api.Approvals.Get(t.Context(), held)
	if p.State != proposals.StateAccepted || p.Rule.Template != "/v1/items/7" || ap.State != dataplane.ApprovalStateApproved {
		t.Errorf("after approve --as-rule: proposal %+v, approval %s", p, ap.State)
	}
	for _, id := range []string{plain, narrow} {
		if ap, _ := a.api.Approvals.Get(t.Context(), id); ap.State != dataplane.ApprovalStatePending {
			t.Errorf("approval %s is %s, want pending", id, ap.State)
		}
	}
}
