package admin

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/proposals"
)

// proposalsWeb is the page of an API with a real store, sessions,
// proposals and approvals, and a proposal learned from a hostile path.
func proposalsWeb(t *testing.T) (*webFixture, *daemon, string) {
	t.Helper()
	d := acceptDaemon(t)
	f := &webFixture{store: d.admin.Approvals, now: time.Now()}
	f.web = &Web{Approvals: d.admin.Approvals, TokenFile: filepath.Join(t.TempDir(), "keys", "admin.token"),
		Proposals: d.admin.Proposals, AcceptProposal: d.admin.AcceptProposal,
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }}
	f.srv = httptest.NewServer(f.web.Handler())
	t.Cleanup(f.srv.Close)
	id, err := d.admin.Proposals.Learn(t.Context(), dataplane.UnknownRequest{Session: "s_aaaaaaaaaaaaaaaaaaaa", Method: "POST",
		Host: "api.example.com", Port: 443, Path: "/x/<script>alert(1)</script>/\x1b[31m", AuditID: "au_1", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return f, d, id
}

// TestWebProposalsEscaped: what came from a sandbox is escaped on the list
// and on the proposal's page.
func TestWebProposalsEscaped(t *testing.T) {
	f, _, id := proposalsWeb(t)
	cookie, _ := f.login(t)
	for _, path := range []string{"/proposals", "/proposals/" + id} {
		resp, page := f.do(t, "GET", path, nil, cookie, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, page)
		}
		if strings.Contains(page, "<script>") || strings.Contains(page, "\x1b") {
			t.Errorf("GET %s shows the sandbox's markup or control bytes unescaped:\n%s", path, page)
		}
		if !strings.Contains(page, "&lt;script&gt;") || !strings.Contains(page, id) {
			t.Errorf("GET %s does not show the proposal escaped:\n%s", path, page)
		}
	}
	if resp, _ := f.do(t, "GET", "/proposals", nil, nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /proposals without a login: %d, want 303 to /login", resp.StatusCode)
	}
}

// TestWebProposalsDecide: accept and reject need the login's CSRF token
// and the page's own origin; the form's edits are the rule accepted; a bad
// edit changes nothing and says why.
func TestWebProposalsDecide(t *testing.T) {
	f, d, hostile := proposalsWeb(t)
	cookie, csrf := f.login(t)
	id, err := d.admin.Proposals.Learn(t.Context(), dataplane.UnknownRequest{Session: "s_aaaaaaaaaaaaaaaaaaaa", Method: "GET",
		Host: "api.example.com", Port: 443, Path: "/items/7", Time: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	edits := url.Values{"method": {"GET"}, "template": {"/items/{item}"}, "approval": {"required"}, "connector": {"web-rules"}}
	for _, c := range []struct {
		name string
		csrf string
		hdr  map[string]string
	}{
		{"no token", "", nil},
		{"wrong token", csrf + "x", nil},
		{"cross-origin", csrf, map[string]string{"Origin": "http://evil.example"}},
	} {
		for _, act := range []string{"accept", "reject"} {
			form := url.Values{"csrf": {c.csrf}, "reason": {"no"}}
			for k, v := range edits {
				form[k] = v
			}
			if resp, _ := f.do(t, "POST", "/proposals/"+id+"/"+act, form, cookie, c.hdr); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s: %d, want 403", c.name, act, resp.StatusCode)
			}
		}
	}
	if p, _ := d.admin.Proposals.Get(t.Context(), id); p.State != proposals.StateOpen {
		t.Fatalf("after refused forms the proposal is %s", p.State)
	}
	bad := url.Values{"csrf": {csrf}, "method": {"GET"}, "template": {"/items/{a...}/x"}}
	resp, page := f.do(t, "POST", "/proposals/"+id+"/accept", bad, cookie, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(page, "not a valid path template") {
		t.Errorf("a bad template: %d\n%s", resp.StatusCode, page)
	}
	form := url.Values{"csrf": {csrf}}
	for k, v := range edits {
		form[k] = v
	}
	resp, page = f.do(t, "POST", "/proposals/"+id+"/accept", form, cookie, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/proposals/"+id+"?done=accepted" {
		t.Fatalf("accept: %d to %q\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	p, _ := d.admin.Proposals.Get(t.Context(), id)
	if p.State != proposals.StateAccepted || p.Rule == nil || p.Rule.Template != "/items/{item}" || !p.Rule.Approval ||
		p.Connector != "local://learned/web-rules@1.0.0" || p.DecidedBy != "web" {
		t.Errorf("accepted as %+v", p)
	}
	if _, page := f.do(t, "GET", "/proposals/"+id+"?done=accepted", nil, cookie, nil); !strings.Contains(page, "Accepted.") ||
		strings.Contains(page, `id="accept"`) {
		t.Errorf("the accepted proposal's page:\n%s", page)
	}
	resp, _ = f.do(t, "POST", "/proposals/"+hostile+"/reject", url.Values{"csrf": {csrf}, "reason": {"never"}}, cookie, nil)
	if p, _ := d.admin.Proposals.Get(t.Context(), hostile); resp.StatusCode != http.StatusSeeOther || p.State != proposals.StateRejected || p.Reason != "never" {
		t.Errorf("reject: %d, %+v", resp.StatusCode, p)
	}
	resp, page = f.do(t, "POST", "/proposals/"+hostile+"/accept", form, cookie, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, "rejected") {
		t.Errorf("accepting a rejected proposal: %d\n%s", resp.StatusCode, page)
	}
}
