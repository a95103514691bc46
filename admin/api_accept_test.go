package admin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/proposals"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/store"
)

// acceptDaemon is startDaemon with a proposal and an approval store.
func acceptDaemon(t *testing.T) *daemon {
	return startDaemonWith(t, func(d *daemon) {
		d.admin.Proposals = &proposals.Store{DB: d.admin.Sessions.DB, OnEvent: func(ev audit.Event) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.events = append(d.events, event{ev.Name, ev.Details})
		}}
		d.admin.Approvals = &approvals.Store{DB: d.admin.Sessions.DB}
	})
}

// learn records an unknown request of session into a proposal.
func (d *daemon) learn(t *testing.T, session, method, host string, port int, path string) string {
	t.Helper()
	id, err := d.admin.Proposals.Learn(t.Context(), dataplane.UnknownRequest{Session: session, Method: method, Host: host,
		Port: port, Path: path, AuditID: "au_x", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// named returns the events called n.
func (d *daemon) named(n audit.EventName) []map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]string
	for _, e := range d.events {
		if e.name == n {
			out = append(out, e.details)
		}
	}
	return out
}

// learnedSpec reads the spec of the installed version inst.
func learnedSpec(t *testing.T, inst store.Installed) *policy.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(inst.Dir, store.SpecFileName))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := policy.ParseSpec(inst.Ref(), data)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestAcceptProposal: accepting installs local://learned/NAME through the
// store's consent, gives it to the proposal's session, marks the proposal
// accepted, audits it, and approves the request held for it; accepting
// more installs the next version with the old rules and the new and
// removes the old version.
func TestAcceptProposal(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	s, err := d.client.CreateSession(ctx, sessions.CreateRequest{Name: "My Agent", Connectors: []string{testkit.GoogleFQN}})
	if err != nil {
		t.Fatal(err)
	}
	first := d.learn(t, s.ID, "GET", "api.example.com", 443, "/repos/42/issues")
	held, err := d.admin.Approvals.Await(ctx, &dataplane.ApprovalRequest{Session: s.ID, Method: "GET", Host: "api.example.com", Port: 443,
		Path: "/repos/7/issues", Digest: "d1", Preview: dataplane.Preview{Method: "GET", Path: "/repos/7/issues", ProposalID: first}}, 0)
	if err != nil || held.ID == "" {
		t.Fatalf("holding a request: %+v, %v", held, err)
	}
	out, err := d.client.AcceptProposal(ctx, first, AcceptRequest{By: "cli:alice"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Connector.Ref() != "local://learned/my-agent@1.0.0" || !out.Connector.Active || !slices.Equal(out.Sessions, []string{s.ID}) ||
		!slices.Equal(out.Approved, []string{held.ID}) || len(out.Proposals) != 1 || out.Proposals[0].State != proposals.StateAccepted {
		t.Fatalf("accept = %+v", out)
	}
	if got, _ := d.client.GetSession(ctx, s.ID); !slices.Contains(got.Connectors, "local://learned/my-agent") {
		t.Errorf("the session's connectors are %v", got.Connectors)
	}
	if ap, _ := d.admin.Approvals.Get(ctx, held.ID); ap.State != dataplane.ApprovalStateApproved || ap.DecidedBy != "cli:alice" {
		t.Errorf("the held request's approval is %s by %q, want approved by cli:alice", ap.State, ap.DecidedBy)
	}
	ev := d.named(audit.EventProposalAccepted)
	if len(ev) != 1 || ev[0]["proposal_id"] != first || ev[0]["connector"] != out.Connector.Ref() || ev[0]["approval"] != "none" || ev[0]["by"] != "cli:alice" {
		t.Errorf("proposal.accepted events %v", ev)
	}
	if c := d.named(audit.EventStoreConsented); len(c) != 2 || c[1]["via"] != store.ViaProposal {
		t.Errorf("store.consented events %v, want the learned connector's via %q", c, store.ViaProposal)
	}

	// The next accept, edited, goes into 1.0.1 with both rules; 1.0.0 goes.
	second := d.learn(t, s.ID, "POST", "api.example.com", 8443, "/repos/7/issues")
	out, err = d.client.AcceptProposal(ctx, second, AcceptRequest{By: "cli:alice", Connector: "my-agent",
		Edits: proposals.Edits{Template: "/repos/{repo}/issues"}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Connector.Ref() != "local://learned/my-agent@1.0.1" || !slices.Equal(out.Removed, []string{"local://learned/my-agent@1.0.0"}) ||
		len(out.Sessions) != 0 {
		t.Fatalf("second accept = %+v", out)
	}
	ops := learnedSpec(t, out.Connector).Tools[0].Operations
	if len(ops) != 2 || ops[0].Path != "/repos/{id}/issues" || ops[1].Path != "/repos/{repo}/issues" || ops[1].Hosts[0] != "api.example.com:8443" ||
		ops[1].Approval != "required" || ops[0].Approval != "none" {
		t.Errorf("1.0.1 operations %+v", ops)
	}
	if list, _ := d.client.ListConnectors(ctx); len(list) != 2 {
		t.Errorf("installed %+v, want gmail and the learned connector's one version", list)
	}
	if _, err := d.client.AcceptProposal(ctx, second, AcceptRequest{By: "cli:alice"}); err == nil {
		t.Error("a proposal was accepted twice")
	} else {
		apiError(t, "accept twice", err, 409, "conflict")
	}
}

// TestAcceptRefusals: bad edits, a decided proposal, a bad connector name
// and a rule clashing with another connector are each refused with a
// clear error, and nothing is accepted or installed.
func TestAcceptRefusals(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	id := d.learn(t, "s_aaaaaaaaaaaaaaaaaaaa", "GET", "gmail.googleapis.com", 443, "/gmail/v1/users/me/labels")
	rejected := d.learn(t, "s_aaaaaaaaaaaaaaaaaaaa", "GET", "api.example.com", 443, "/x")
	if _, err := d.client.RejectProposal(ctx, rejected, "cli:alice", "no"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, id string
		req      AcceptRequest
		status   int
		reason   policy.Reason
		says     string
	}{
		{"bad method", id, AcceptRequest{By: "cli:a", Edits: proposals.Edits{Method: "get"}}, 400, "invalid_argument", "write GET"},
		{"bad template", id, AcceptRequest{By: "cli:a", Edits: proposals.Edits{Template: "/a/../b"}}, 400, "invalid_argument", "not a valid path template"},
		{"bad approval", id, AcceptRequest{By: "cli:a", Edits: proposals.Edits{Approval: "maybe"}}, 400, "invalid_argument", "required or none"},
		{"bad connector name", id, AcceptRequest{By: "cli:a", Connector: "My/Name"}, 400, "invalid_argument", "lower-case letters"},
		{"no decider", id, AcceptRequest{}, 400, "invalid_argument", `"by" is required`},
		{"rejected", rejected, AcceptRequest{By: "cli:a"}, 409, "conflict", "rejected"},
		{"unknown", "pr_aaaaaaaaaaaaaaaaaaaa", AcceptRequest{By: "cli:a"}, 404, "not_found", "no such proposal"},
		{"clash", id, AcceptRequest{By: "cli:a", Edits: proposals.Edits{Template: "/gmail/v1/users/me/messages"}}, 409, "conflict", "nothing was accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.client.AcceptProposal(ctx, tc.id, tc.req)
			if ae := apiError(t, tc.name, err, tc.status, tc.reason); !strings.Contains(ae.Message, tc.says) {
				t.Errorf("message %q does not say %q", ae.Message, tc.says)
			}
		})
	}
	if p, _ := d.admin.Proposals.Get(ctx, id); p.State != proposals.StateOpen {
		t.Errorf("after the refusals the proposal is %s", p.State)
	}
	if list, _ := d.client.ListConnectors(ctx); len(list) != 1 {
		t.Errorf("installed %+v, want gmail alone", list)
	}
	if ev := d.named(audit.EventProposalAccepted); len(ev) != 0 {
		t.Errorf("proposal.accepted written for a refused accept: %v", ev)
	}
	// Unknown keys in the body are refused.
	err := d.client.do(ctx, "POST", "/v1/proposals/"+id+"/accept", map[string]any{"by": "cli:a", "templte": "/x"}, nil)
	apiError(t, "a misspelt edit", err, 400, "invalid_argument")
}

// TestAcceptSession: a session's open proposals go into one connector
// together; the rejected one stays out; the connector goes to every live
// session with AllSessions.
func TestAcceptSession(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	s, err := d.client.CreateSession(ctx, sessions.CreateRequest{Connectors: []string{testkit.GoogleFQN}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := d.client.CreateSession(ctx, sessions.CreateRequest{Connectors: []string{testkit.GoogleFQN}})
	if err != nil {
		t.Fatal(err)
	}
	d.learn(t, s.ID, "GET", "api.example.com", 443, "/a/1")
	d.learn(t, s.ID, "DELETE", "api.example.com", 443, "/a/2")
	no := d.learn(t, s.ID, "GET", "api.example.com", 443, "/secret")
	d.learn(t, other.ID, "GET", "api.example.com", 443, "/other")
	if _, err := d.client.RejectProposal(ctx, no, "cli:a", "no"); err != nil {
		t.Fatal(err)
	}
	out, err := d.client.AcceptSessionProposals(ctx, AcceptSessionRequest{By: "cli:a", Session: s.ID, Connector: "whole", AllSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Proposals) != 2 || out.Connector.Ref() != "local://learned/whole@1.0.0" || len(out.Sessions) != 2 {
		t.Fatalf("accept-all = %+v", out)
	}
	ops := learnedSpec(t, out.Connector).Tools[0].Operations
	if len(ops) != 2 || ops[0].Name == ops[1].Name {
		t.Fatalf("operations %+v", ops)
	}
	for _, o := range ops {
		if want := map[string]string{"GET": "none", "DELETE": "required"}[o.Method]; o.Approval != want || o.Path != "/a/{id}" {
			t.Errorf("operation %+v; want /a/{id} with approval %s", o, want)
		}
	}
	if got, _ := d.client.GetSession(ctx, other.ID); !slices.Contains(got.Connectors, "local://learned/whole") {
		t.Errorf("--all-sessions left %s with %v", other.ID, got.Connectors)
	}
	_, err = d.client.AcceptSessionProposals(ctx, AcceptSessionRequest{By: "cli:a", Session: s.ID})
	apiError(t, "nothing open", err, 404, "not_found")
}

// TestAcceptRace: of concurrent accepts of one proposal exactly one
// installs and accepts; the others are conflicts that install nothing.
func TestAcceptRace(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	id := d.learn(t, "s_aaaaaaaaaaaaaaaaaaaa", "GET", "api.example.com", 443, "/a/1")
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := d.client.AcceptProposal(ctx, id, AcceptRequest{By: "cli:a", Connector: "race"})
			errs <- err
		}()
	}
	ok := 0
	for range n {
		if err := <-errs; err == nil {
			ok++
		} else {
			apiError(t, "a concurrent accept", err, 409, "conflict")
		}
	}
	list, _ := d.client.ListConnectors(ctx)
	if ok != 1 || len(list) != 1 || list[0].Version != "1.0.0" {
		t.Errorf("%d accepts succeeded, installed %+v; want one, and 1.0.0 alone", ok, list)
	}
}

// TestAcceptKeepsUnservedRules: a learned connector installed but not
// served (its package tampered with) is not replaced by a version without
// its rules: the accept is refused, saying why.
func TestAcceptKeepsUnservedRules(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	first := d.learn(t, "s_aaaaaaaaaaaaaaaaaaaa", "GET", "api.example.com", 443, "/a/1")
	out, err := d.client.AcceptProposal(ctx, first, AcceptRequest{By: "cli:a", Connector: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, out.Connector.Dir, "evil", []byte("x")) // Load refuses the package now
	second := d.learn(t, "s_aaaaaaaaaaaaaaaaaaaa", "GET", "api.example.com", 443, "/b/1")
	_, err = d.client.AcceptProposal(ctx, second, AcceptRequest{By: "cli:a", Connector: "kept"})
	if ae := apiError(t, "accept into an unserved connector", err, 409, "conflict"); !strings.Contains(ae.Message, "no version of it is served") {
		t.Errorf("message %q", ae.Message)
	}
	if p, _ := d.admin.Proposals.Get(ctx, second); p.State != proposals.StateOpen {
		t.Errorf("the proposal is %s, want open", p.State)
	}
}

// TestAcceptReleasesOnlyWhatTheRuleAllows: accepting a proposal with its
// rule edited (another method, a narrower template) approves only the held
// requests that rule allows; the others stay pending for the human, who
// never judged them: approved, they would be sent once as unknown requests.
func TestAcceptReleasesOnlyWhatTheRuleAllows(t *testing.T) {
	d := acceptDaemon(t)
	ctx := context.Background()
	s, err := d.client.CreateSession(ctx, sessions.CreateRequest{Name: "edits"})
	if err != nil {
		t.Fatal(err)
	}
	hold := func(method, path, prop, digest string) string {
		t.Helper()
		held, err := d.admin.Approvals.Await(ctx, &dataplane.ApprovalRequest{Session: s.ID, Method: method, Host: "api.example.com", Port: 443,
			Path: path, Digest: digest, Preview: dataplane.Preview{Method: method, Host: "api.example.com", Path: path, ProposalID: prop}}, 0)
		if err != nil || held.ID == "" {
			t.Fatalf("holding %s %s: %+v, %v", method, path, held, err)
		}
		return held.ID
	}
	post := d.learn(t, s.ID, "POST", "api.example.com", 443, "/repos/42/issues")
	post42, post7 := hold("POST", "/repos/42/issues", post, "d1"), hold("POST", "/repos/7/issues", post, "d2")
	get := d.learn(t, s.ID, "GET", "api.example.com", 443, "/items/1")
	get1 := hold("GET", "/items/1", get, "d3")

	out, err := d.client.AcceptProposal(ctx, post, AcceptRequest{By: "cli:alice", Edits: proposals.Edits{Template: "/repos/42/issues"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Approved, []string{post42}) {
		t.Errorf("accepting POST /repos/42/issues approved %v, want only %s", out.Approved, post42)
	}
	out, err = d.client.AcceptProposal(ctx, get, AcceptRequest{By: "cli:alice", Edits: proposals.Edits{Method: "HEAD"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Approved) != 0 {
		t.Errorf("accepting the GET proposal as HEAD approved %v, want none", out.Approved)
	}
	for _, id := range []string{post7, get1} {
		if ap, _ := d.admin.Approvals.Get(ctx, id); ap.State != dataplane.ApprovalStatePending {
			t.Errorf("held request %s the rule does not allow is %s, want pending", id, ap.State)
		}
	}
}
