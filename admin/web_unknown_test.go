package admin

import (
	"net/http"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/dataplane"
)

// TestWebShowsUnknownRequest: the approval of a request no operation
// matches (ask mode) says so on the page, links its proposal's page, and
// shows no connector or undeclared-field warning; what came from the
// sandbox is escaped.
func TestWebShowsUnknownRequest(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	id := seedApproval(t, f.store, "s_42", "", dataplane.Preview{Method: "GET", Host: "new.example.com",
		Path: "/v1/<b>x</b>", Query: "q=1", ProposalID: "pr_abc",
		Fields: []dataplane.PreviewField{{Source: "query", Name: "q", Value: "1"}}})
	for _, path := range []string{"/", "/approvals/" + id} {
		resp, page := f.do(t, "GET", path, nil, cookie, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		for _, want := range []string{"No operation matches this request", `href="/proposals/pr_abc"`, "none: no operation matches this request",
			`action="/approvals/` + id + `/approve"`} {
			if !strings.Contains(page, want) {
				t.Errorf("GET %s: page lacks %q", path, want)
			}
		}
		for _, lack := range []string{"<dt>Connector</dt>", "Not declared by the connector", "<b>x</b>"} {
			if strings.Contains(page, lack) {
				t.Errorf("GET %s: page has %q", path, lack)
			}
		}
	}
}
