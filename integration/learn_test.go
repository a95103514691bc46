package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
)

// TestLearnModeRecordsRealTraffic: a session in learn mode whose curl asks
// for what no operation allows (an unknown path of a known host, and a
// host no connector names) is refused, nothing reaches the upstream, and
// `aileron proposals list` shows each request generalised into a
// proposal: two item ids join one template, and no query value is kept.
func TestLearnModeRecordsRealTraffic(t *testing.T) {
	e := argsEnv(t)
	e.s = e.d.newSession(t, "--name", "learner", "--unknown", "learn")
	before := theSuite.up.Hits("api.us.example.com", "/v1/items/12345")
	ids := map[string]bool{}
	for _, target := range []string{
		"https://api.us.example.com/v1/items/12345?q=hunter2",
		"https://api.us.example.com/v1/items/67890",
		"https://unknown.example.com/v2/reports/0f1e2d3c4b5a69788796a5b4c3d2e1f0",
	} {
		out, errOut, code := e.launch(t, "curl", "-sS", "-w", "\n%{http_code}", target)
		if code != 0 || !strings.HasSuffix(out, "\n403") {
			t.Fatalf("curl %s: exit %d %s %s; want a 403 refusal", target, code, out, errOut)
		}
		var env struct {
			Error struct {
				Reason     string `json:"reason"`
				ProposalID string `json:"proposal_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out[:strings.LastIndexByte(out, '\n')]), &env); err != nil || env.Error.ProposalID == "" {
			t.Fatalf("curl %s: %s: the refusal names no proposal (%v)", target, out, err)
		}
		ids[env.Error.ProposalID] = true
	}
	if theSuite.up.Hits("api.us.example.com", "/v1/items/12345") != before {
		t.Fatal("a learned request reached the upstream")
	}
	if len(ids) != 2 {
		t.Errorf("the refusals named %d proposals, want 2 (the two items join one)", len(ids))
	}
	out := e.d.cli(t, "proposals", "list", "--session", e.s.ID, "--json")
	if strings.Contains(out, "hunter2") {
		t.Fatalf("proposals list shows a query value: %s", out)
	}
	var list struct {
		Proposals []struct {
			ID, Method, Host, Template string
			Count                      int64
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("proposals list --json: %v: %s", err, out)
	}
	want := map[string]int64{"GET api.us.example.com /v1/items/{id}": 2, "GET unknown.example.com /v2/reports/{hex}": 1}
	for _, p := range list.Proposals {
		k := p.Method + " " + p.Host + " " + p.Template
		if want[k] != p.Count || !ids[p.ID] {
			t.Errorf("proposal %s %s seen %d times; want one of %v, named by a refusal", p.ID, k, p.Count, want)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Errorf("no proposal for %v in %s", want, out)
	}
}

// learnAcceptEnv is a daemon with the mailer of argsSpec installed, a
// short approval hold, and a session in learn mode limited to the mailer,
// so that a learned connector must be added to it to be used.
func learnAcceptEnv(t *testing.T, name string) *toolsEnv {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["api.us.example.com:443"] = theSuite.up.Addr
	cfg["approval"] = map[string]any{"hold": "1s"}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.cli(t, "connector", "install", testkitSpecFile(t, argsSpec))
	return &toolsEnv{d: d, s: d.newSession(t, "--name", name, "--unknown", "learn", "--connector", argsFQN)}
}

// testkitSpecFile writes spec into a file of its own and returns its path.
func testkitSpecFile(t *testing.T, spec string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "aileron.connector.v1.json")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// learnAnswer is what a client got: the status, and the refusal's reason and
// proposal id when it was one.
type learnAnswer struct {
	status             string
	reason, proposalID string
}

// curlAnswer runs curl in the session: method, URL and extra arguments.
func curlAnswer(t *testing.T, e *toolsEnv, method, target string, extra ...string) learnAnswer {
	t.Helper()
	args := append([]string{"curl", "-sS", "-X", method, "-w", "\n%{http_code}"}, extra...)
	out, errOut, code := e.launch(t, append(args, target)...)
	i := strings.LastIndexByte(out, '\n')
	if code != 0 || i < 0 {
		t.Fatalf("curl %s %s: exit %d %s %s", method, target, code, out, errOut)
	}
	a := learnAnswer{status: out[i+1:]}
	var env struct {
		Error struct {
			Reason     string `json:"reason"`
			ProposalID string `json:"proposal_id"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(out[:i]), &env) == nil {
		a.reason, a.proposalID = env.Error.Reason, env.Error.ProposalID
	}
	return a
}

// pythonGet fetches target with Python's urllib in the session and returns
// the status (an HTTP error's too).
func pythonGet(t *testing.T, e *toolsEnv, target string) string {
	t.Helper()
	requireTool(t, "/usr/bin/python3")
	out, errOut, code := e.launch(t, "python3", "-c", `import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1]).status)
except urllib.error.HTTPError as e:
    print(e.code)`, target)
	if code != 0 {
		t.Fatalf("python3 GET %s: exit %d %s %s", target, code, out, errOut)
	}
	return strings.TrimSpace(out)
}

// TestAcceptProposalAllowsTheRule: a proposal learned from curl, accepted
// with `aileron proposals accept`, lets later identical and other
// templated requests through (curl and Python) in a session limited to
// other connectors, while other paths, methods and hosts stay refused; an
// edited template and method are what the rule allows; a rule needing
// approval holds its request; a rejected proposal cannot be accepted; and
// each acceptance is audited.
func TestAcceptProposalAllowsTheRule(t *testing.T) {
	e := learnAcceptEnv(t, "Item Reader")
	const base = "https://api.us.example.com"
	items := curlAnswer(t, e, "GET", base+"/v1/items/12345")
	post := curlAnswer(t, e, "POST", base+"/v1/items/1", "-d", "{}")
	del := curlAnswer(t, e, "DELETE", base+"/v1/items/9")
	orders := curlAnswer(t, e, "GET", base+"/v1/orders/5")
	for _, a := range []learnAnswer{items, post, del, orders} {
		if a.status != "403" || a.proposalID == "" {
			t.Fatalf("learn mode answered %+v; want 403 naming a proposal", a)
		}
	}
	out := e.d.cli(t, "proposals", "accept", items.proposalID)
	for _, want := range []string{"accepted " + items.proposalID + ": GET /v1/items/{id} (no approval)", "installed local://learned/item-reader@1.0.0",
		"added to session " + e.s.ID} {
		if !strings.Contains(out, want) {
			t.Errorf("proposals accept printed %q; want it to say %q", out, want)
		}
	}
	hits := func() int { return theSuite.up.HostHits("api.us.example.com") }
	before := hits()
	if a := curlAnswer(t, e, "GET", base+"/v1/items/12345"); a.status != "200" {
		t.Errorf("the accepted request again: %+v, want 200", a)
	}
	if a := curlAnswer(t, e, "GET", base+"/v1/items/31337"); a.status != "200" {
		t.Errorf("another item: %+v, want 200", a)
	}
	if got := pythonGet(t, e, base+"/v1/items/42"); got != "200" {
		t.Errorf("python GET another item: %s, want 200", got)
	}
	if hits() != before+3 {
		t.Errorf("the upstream got %d requests, want 3", hits()-before)
	}
	for _, tc := range []struct{ method, target string }{
		{"GET", base + "/v1/orders/5"}, {"GET", base + "/v1/items/1/parts"}, {"POST", base + "/v1/items/1"},
		{"GET", "https://unknown.example.com/v1/items/1"},
	} {
		if a := curlAnswer(t, e, tc.method, tc.target); a.status != "403" {
			t.Errorf("%s %s after the accept: %+v; want it still refused", tc.method, tc.target, a)
		}
	}
	if hits() != before+3 {
		t.Fatal("a request the rule does not allow reached the upstream")
	}

	// Edited: the POST becomes PUT on /v1/items/{item}, without approval.
	out = e.d.cli(t, "proposals", "accept", post.proposalID, "--method", "PUT", "--template", "/v1/items/{item}", "--approval", "none")
	if !strings.Contains(out, "installed local://learned/item-reader@1.0.1 (removed local://learned/item-reader@1.0.0)") {
		t.Errorf("the second accept printed %q", out)
	}
	if a := curlAnswer(t, e, "PUT", base+"/v1/items/77", "-d", "{}"); a.status != "200" {
		t.Errorf("PUT under the edited rule: %+v, want 200", a)
	}
	if a := curlAnswer(t, e, "POST", base+"/v1/items/77", "-d", "{}"); a.status != "403" {
		t.Errorf("POST, edited away: %+v, want 403", a)
	}
	if a := curlAnswer(t, e, "GET", base+"/v1/items/5"); a.status != "200" {
		t.Errorf("the first rule after the second version: %+v, want 200", a)
	}

	// DELETE keeps the default: approval required, so it is held.
	e.d.cli(t, "proposals", "accept", del.proposalID)
	deletes := theSuite.up.Hits("api.us.example.com", "/v1/items/9")
	if a := curlAnswer(t, e, "DELETE", base+"/v1/items/9"); a.status != "403" || a.reason != "approval_pending" {
		t.Errorf("DELETE under a rule needing approval: %+v, want 403 approval_pending", a)
	}
	if theSuite.up.Hits("api.us.example.com", "/v1/items/9") != deletes {
		t.Error("a DELETE needing approval reached the upstream")
	}

	e.d.cli(t, "proposals", "reject", orders.proposalID, "--reason", "orders are private")
	_, errOut, err := e.d.run(t.Context(), "proposals", "accept", orders.proposalID)
	if err == nil || !strings.Contains(errOut, "rejected") {
		t.Errorf("accepting a rejected proposal: %v %s; want it refused saying so", err, errOut)
	}
	lines, err := parseAuditLines([]byte(e.d.cli(t, "audit", "tail", "--json", "--event", "proposal.accepted")))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || lines[0].detail("proposal_id") != items.proposalID || lines[0].detail("connector") != "local://learned/item-reader@1.0.0" ||
		lines[1].detail("method") != "PUT" || lines[1].detail("template") != "/v1/items/{item}" || lines[2].detail("approval") != "required" {
		t.Errorf("proposal.accepted lines: %d %v", len(lines), lines)
	}
}

// TestAcceptSessionLearnsItsPolicy: a session's traffic from curl and
// Python, learned and accepted at once into one connector, is then allowed
// exactly: what it did goes through, anything else stays refused.
func TestAcceptSessionLearnsItsPolicy(t *testing.T) {
	e := learnAcceptEnv(t, "run")
	const base = "https://api.us.example.com"
	if a := curlAnswer(t, e, "GET", base+"/v2/reports/0f1e2d3c4b5a69788796a5b4c3d2e1f0"); a.status != "403" {
		t.Fatalf("learning: %+v", a)
	}
	if a := curlAnswer(t, e, "HEAD", base+"/v2/status", "-I"); a.status != "403" {
		t.Fatalf("learning: %+v", a)
	}
	if got := pythonGet(t, e, base+"/v2/users/17/profile"); got != "403" {
		t.Fatalf("learning with python: %s", got)
	}
	out := e.d.cli(t, "proposals", "accept", "--session", e.s.ID, "--connector", "run-policy")
	if strings.Count(out, "accepted pr_") != 3 || !strings.Contains(out, "installed local://learned/run-policy@1.0.0") {
		t.Fatalf("proposals accept --session printed %q", out)
	}
	for _, target := range []string{"/v2/reports/00112233445566778899aabbccddeeff", "/v2/users/18/profile"} {
		if got := pythonGet(t, e, base+target); got != "200" {
			t.Errorf("python GET %s: %s, want 200", target, got)
		}
	}
	if a := curlAnswer(t, e, "HEAD", base+"/v2/status", "-I"); a.status != "200" {
		t.Errorf("HEAD /v2/status: %+v, want 200", a)
	}
	for _, target := range []string{"/v2/users/18", "/v2/reports", "/v2/status/x"} {
		if got := pythonGet(t, e, base+target); got != "403" {
			t.Errorf("python GET %s, never asked for: %s, want 403", target, got)
		}
	}
}

// TestFleetAcceptProposal: on a two-node Postgres fleet, a request learned
// through node B and accepted on node A is allowed through node B: B takes
// the learned connector and the session's new connector list from the
// shared state.
func TestFleetAcceptProposal(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn, keys := pg.NewDatabase(), t.TempDir()
	node := func(name string) *daemon {
		cfg, err := theSuite.baseConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["api.us.example.com:443"] = theSuite.up.Addr
		cfg["state"] = map[string]any{"backend": "postgres", "dsn": dsn, "node": name,
			"fleet_key_file": filepath.Join(keys, "fleet.key"), "vault_key_file": filepath.Join(keys, "vault.key")}
		return theSuite.startTestDaemon(t, cfg, nil)
	}
	a, b := node("node-a"), node("node-b")
	a.cli(t, "connector", "install", testkitSpecFile(t, argsSpec))
	sess := a.newSession(t, "--name", "fleet learner", "--unknown", "learn", "--connector", argsFQN)
	viaB := sess.via(t, b)
	var proposal string
	waitFor(t, "node B to learn the session's unknown request", 20*time.Second, func() bool {
		status, hdr, _ := goDo(t, viaB, http.MethodGet, "https://api.us.example.com/v1/items/5", "")
		proposal = hdr.Get("X-Aileron-Proposal-Id")
		return status == http.StatusForbidden && proposal != ""
	})
	out := a.cli(t, "proposals", "accept", proposal)
	if !strings.Contains(out, "installed local://learned/fleet-learner@1.0.0") {
		t.Fatalf("accept on A printed %q", out)
	}
	waitFor(t, "node B to allow what was accepted on node A", 20*time.Second, func() bool {
		status, _, _ := goDo(t, viaB, http.MethodGet, "https://api.us.example.com/v1/items/6", "")
		return status == http.StatusOK
	})
	if status, _, _ := goDo(t, viaB, http.MethodGet, "https://api.us.example.com/v1/orders/6", ""); status != http.StatusForbidden {
		t.Errorf("another path through B after the accept: %d, want 403", status)
	}
}
