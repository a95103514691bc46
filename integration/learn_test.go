package integration

import (
	"encoding/json"
	"strings"
	"testing"
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
