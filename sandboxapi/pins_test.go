package sandboxapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// pinAction is a Linear action whose step looks an issue up; CAPS and
// EXTRA (more requirements) are filled in.
const pinAction = `+++
name = "lookup"
version = "1.0.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "self"
capabilities = [CAPS]
EXTRA
[[execute]]
id = "issue"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"

[execute.inputs]
id = "ENG-7"
+++
Looks ENG-7 up.
`

// lookupAction parses pinAction as installed with the Linear test package.
// Parse, unlike the store's install, does not hold the step to its
// capabilities: that is what lets these tests reach the data plane's check.
func lookupAction(t *testing.T, caps, extra string) action.Installed {
	t.Helper()
	m, err := action.Parse("lookup/action.md", []byte(strings.NewReplacer("CAPS", caps, "EXTRA", extra).Replace(pinAction)))
	if err != nil {
		t.Fatal(err)
	}
	return action.Installed{Manifest: m, Connector: tdLinearFQN, ConnectorVersion: "1.0.0", Hash: tdHash("linear")}
}

// runOnly runs inst, the only installed action, for session s1 through the
// env's proxy.
func (e *sapiEnv) runOnly(t *testing.T, inst action.Installed) actions.Result {
	t.Helper()
	cat, err := action.NewCatalog([]action.Installed{inst})
	if err != nil {
		t.Fatal(err)
	}
	r := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: func() *action.Catalog { return cat }}
	t.Cleanup(func() { r.Close() })
	res, err := r.Run(context.Background(), e.sessions["s1"], inst.Name, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestActionStepHeldToItsCapabilities: the data plane refuses a step whose
// request leaves its action's capabilities (capability_not_granted), though
// the session's policy allows the operation, and nothing is sent.
func TestActionStepHeldToItsCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name, caps, msg string
	}{
		{"within", `"network:api.linear.test:443", "credential:api_key"`, ""},
		{"credential kind not listed", `"network:api.linear.test:443"`,
			`action lookup (step issue) may use only the credential kinds (none); linear/get-issue needs api_key`},
		{"host not listed", `"network:api.linear.test:8443", "credential:api_key"`,
			`action lookup (step issue) may reach only api.linear.test:8443; api.linear.test:443 is outside its capabilities`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSapiEnv(t, sapiOpts{})
			res := e.runOnly(t, lookupAction(t, tc.caps, ""))
			if tc.msg == "" {
				if res.Status != actions.StatusCompleted || e.countHits("GET", "api.linear.test") != 1 {
					t.Fatalf("run %+v, hits %v", res, e.upstreamHits())
				}
				return
			}
			if res.Status != actions.StatusFailed || res.Error == nil || res.Error.Reason != policy.ReasonCapabilityNotGranted ||
				res.Error.Step != "issue" || !strings.Contains(res.Error.Message, tc.msg) || len(res.AuditIDs) != 1 {
				t.Fatalf("run %+v (error %+v), want failed at step issue with capability_not_granted containing %q", res, res.Error, tc.msg)
			}
			if hits := e.upstreamHits(); len(hits) != 0 {
				t.Fatalf("the upstream was reached: %+v", hits)
			}
		})
	}
}

// TestActionRunRefusedWhenPinChanges: an action never runs against other
// bytes than it pins: once a connector it pins by hash is replaced (another
// hash active) or removed, or its own package is no longer the one it was
// loaded from, a run fails with connector_changed naming the pinned and
// the active hash, and nothing is sent.
func TestActionRunRefusedWhenPinChanges(t *testing.T) {
	const caps = `"network:api.linear.test:443", "credential:api_key"`
	googleReq := `
[[requires.connectors]]
name = "github://acme/aileron-connector-google"
version = "1.0.0"
hash = "HASH"
`
	pinned := strings.Replace(googleReq, "HASH", "sha256:"+tdHash("google"), 1)
	unpinned := strings.Replace(googleReq, "HASH", "sha256:bound-at-release", 1)
	for _, tc := range []struct {
		name   string
		extra  string
		hashes map[string]string // the active package hashes; a missing name is not installed
		msg    string            // "" when the run completes
	}{
		{"every pin holds", pinned, map[string]string{"linear": tdHash("linear"), "google": tdHash("google")}, ""},
		{"pinned connector replaced", pinned, map[string]string{"linear": tdHash("linear"), "google": tdHash("google-rebuilt")},
			"action lookup pins " + tdGoogleFQN + "@1.0.0 (sha256:" + tdHash("google") + ") but " + tdGoogleFQN + "@1.0.0 (sha256:" + tdHash("google-rebuilt") + ") is active; nothing was sent"},
		{"pinned connector removed", pinned, map[string]string{"linear": tdHash("linear")},
			"action lookup pins " + tdGoogleFQN + "@1.0.0 (sha256:" + tdHash("google") + "), which is no longer active"},
		{"own package replaced", pinned, map[string]string{"linear": tdHash("linear-rebuilt"), "google": tdHash("google")},
			"action lookup pins " + tdLinearFQN + "@1.0.0 (sha256:" + tdHash("linear") + ") but " + tdLinearFQN + "@1.0.0 (sha256:" + tdHash("linear-rebuilt") + ") is active"},
		{"unpinned requirement is not checked", unpinned, map[string]string{"linear": tdHash("linear"), "google": tdHash("google-rebuilt")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSapiEnv(t, sapiOpts{})
			linSpec, _ := loadTestdataPackage(t, "linear")
			gooSpec, _ := loadTestdataPackage(t, "google")
			var srcs []policy.Source
			if h, ok := tc.hashes["linear"]; ok {
				srcs = append(srcs, policy.Source{Spec: linSpec, Hash: h, Origin: "linear"})
			}
			if h, ok := tc.hashes["google"]; ok {
				srcs = append(srcs, policy.Source{Spec: gooSpec, Hash: h, Origin: "google"})
			}
			pol, errs := policy.Compile(srcs, nil)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			e.runner.Policy.Store(pol) // a reload: the proxy and the runner share the holder
			res := e.runOnly(t, lookupAction(t, caps, tc.extra))
			if tc.msg == "" {
				if res.Status != actions.StatusCompleted || e.countHits("GET", "api.linear.test") != 1 {
					t.Fatalf("run %+v (error %+v), hits %v", res, res.Error, e.upstreamHits())
				}
				return
			}
			if res.Status != actions.StatusFailed || res.Error == nil || res.Error.Reason != policy.ReasonConnectorChanged ||
				!strings.Contains(res.Error.Message, tc.msg) {
				t.Fatalf("run %+v (error %+v), want failed with connector_changed containing %q", res, res.Error, tc.msg)
			}
			if hits := e.upstreamHits(); len(hits) != 0 {
				t.Fatalf("the upstream was reached: %+v", hits)
			}
		})
	}
}

// TestUnpinnedActionIsShown: an action requiring a connector by a
// placeholder hash is listed (GET /v1/actions, MCP tools) and audited as
// unpinned; a pinned one is not.
func TestUnpinnedActionIsShown(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	caps := `"network:api.linear.test:443", "credential:api_key"`
	inst := lookupAction(t, caps, "\n[[requires.connectors]]\nname = \""+tdGoogleFQN+"\"\nversion = \"1.0.0\"\nhash = \"sha256:bound-at-release\"\n")
	cat, err := action.NewCatalog([]action.Installed{inst})
	if err != nil {
		t.Fatal(err)
	}
	var events []map[string]string
	r := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: func() *action.Catalog { return cat },
		OnEvent: func(ev audit.Event) { events = append(events, ev.Details) }}
	t.Cleanup(func() { r.Close() })
	want := tdGoogleFQN + "@1.0.0"
	list := r.Actions(e.sessions["s1"])
	if len(list.Actions) != 1 || len(list.Actions[0].Unpinned) != 1 || list.Actions[0].Unpinned[0] != want {
		t.Fatalf("listed %+v, want lookup unpinned on %s", list.Actions, want)
	}
	tool, err := toolFor(list.Actions[0])
	if err != nil || !strings.Contains(tool.Description, "Unpinned: requires "+want+" by a placeholder hash") {
		t.Fatalf("MCP tool %+v (%v) does not say it is unpinned", tool, err)
	}
	res, err := r.Run(context.Background(), e.sessions["s1"], inst.Name, map[string]any{})
	if err != nil || res.Status != actions.StatusCompleted {
		t.Fatalf("run %+v %v", res, err)
	}
	r.Close() // the completed event is written before Run answers; Close orders it before the read below
	if len(events) != 2 || events[0]["unpinned"] != want || events[1]["unpinned"] != want {
		t.Fatalf("events %v, want started and completed naming %s unpinned", events, want)
	}
	pinned := lookupAction(t, caps, "")
	if l := actions.ListFor(mustCatalog(t, pinned), nil); len(l.Actions) != 1 || l.Actions[0].Unpinned != nil {
		t.Fatalf("a pinned action is listed as unpinned: %+v", l.Actions)
	}
}

func mustCatalog(t *testing.T, acts ...action.Installed) *action.Catalog {
	t.Helper()
	cat, err := action.NewCatalog(acts)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// TestActionApprovalBoundToPackageBytes: a human's approval of an action
// run covers the action as its package was when the approval was asked
// for. If the package is replaced before the approved run starts (other
// bytes, even under the same action and connector versions), the run
// fails with action_changed and nothing is sent; the action as installed
// now is asked about anew.
func TestActionApprovalBoundToPackageBytes(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{noDecided: true})
	ctx := context.Background()
	s1 := e.sessions["s1"]
	pending, err := e.runner.Run(ctx, s1, "send-email", sendArgs)
	if err != nil || pending.Status != actions.StatusPendingApproval {
		t.Fatalf("run %+v %v", pending, err)
	}
	if err := e.runner.Close(); err != nil {
		t.Fatal(err)
	}

	// The Google package is replaced by other bytes under the same versions.
	linSpec, linActs := loadTestdataPackage(t, "linear")
	gooSpec, gooActs := loadTestdataPackage(t, "google")
	for i := range gooActs {
		gooActs[i].Hash = tdHash("google-rebuilt")
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: linSpec, Hash: tdHash("linear"), Origin: "linear"},
		{Spec: gooSpec, Hash: tdHash("google-rebuilt"), Origin: "google"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	e.runner.Policy.Store(pol)
	cat := mustCatalog(t, append(linActs, gooActs...)...)
	if err := e.store.Approve(ctx, pending.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}

	events := make(chan string, 16)
	r2 := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: func() *action.Catalog { return cat },
		OnEvent: func(ev audit.Event) { events <- string(ev.Name) + " " + ev.Details["id"] }}
	t.Cleanup(func() { r2.Close() })
	if _, err := r2.Result(ctx, s1, pending.ApprovalID); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		select {
		case ev := <-events:
			done = strings.HasSuffix(ev, " "+pending.ApprovalID) && (strings.HasPrefix(ev, string(audit.EventActionFailed)) ||
				strings.HasPrefix(ev, string(audit.EventActionCompleted)))
		case <-time.After(20 * time.Second):
			t.Fatal("the approved run did not end")
		}
	}
	got, err := r2.Result(ctx, s1, pending.ApprovalID)
	if err != nil || got.Status != actions.StatusFailed || got.Error == nil || got.Error.Reason != policy.ReasonActionChanged ||
		!strings.Contains(got.Error.Message, "sha256:"+tdHash("google-rebuilt")) {
		t.Fatalf("approved run %+v (error %+v) %v, want failed with action_changed naming the active hash", got, got.Error, err)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 0 {
		t.Fatalf("sent %d times under an approval given for other bytes", n)
	}
}
