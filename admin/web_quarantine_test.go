package admin

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/store"
)

// TestWebListsQuarantined: the approvals page lists each quarantined
// connector version, how it asks for more, and the command that approves
// it, escaped.
func TestWebListsQuarantined(t *testing.T) {
	f := newWebFixture(t)
	f.web.Quarantined = func(context.Context) ([]store.Installed, error) {
		return []store.Installed{
			{FQN: "github://acme/x", Version: "1.0.0", Active: true},
			{FQN: "github://acme/x", Version: "1.1.0", Hash: strings.Repeat("ab", 32), Quarantined: true,
				Widening: []string{`host "evil.example.com:443"`, "operation t/<script> (new) does not wait for approval"}},
		}, nil
	}
	cookie, _ := f.login(t)
	_, page := f.do(t, "GET", "/", nil, cookie, nil)
	for _, want := range []string{`id="quarantined"`, "<code>aileron connector approve github://acme/x@1.1.0</code>",
		"sha256:" + strings.Repeat("ab", 32), "host &#34;evil.example.com:443&#34;", "t/&lt;script&gt;"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "github://acme/x@1.0.0") || strings.Contains(page, "<script>") {
		t.Errorf("page lists the active version or an unescaped string:\n%s", page)
	}
	f.web.Quarantined = nil
	if _, page = f.do(t, "GET", "/", nil, cookie, nil); strings.Contains(page, `id="quarantined"`) {
		t.Error("page lists quarantined versions with none to show")
	}
}

// TestWebApprovesQuarantined: a login approves a quarantined version with
// its button: the form must carry the login's CSRF token and the hash the
// page showed; the approval is audited as the login's.
func TestWebApprovesQuarantined(t *testing.T) {
	d := startDaemon(t)
	ctx := t.Context()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "g.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	wide := testkit.EditJSON(t, testkit.WithVersion(t, testkit.Spec(t, "gmail"), "1.3.0"), func(m map[string]any) {
		m["tools"].([]any)[0].(map[string]any)["operations"].([]any)[0].(map[string]any)["hosts"] = []any{"evil.example.com"}
	})
	inst, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "g.json", wide))
	if err != nil || !inst.Quarantined {
		t.Fatalf("widening install = %+v, %v", inst, err)
	}
	f := newWebFixture(t)
	f.web.Quarantined, f.web.ApproveConnector = d.admin.Store.List, d.admin.ApproveConnector
	cookie, csrf := f.login(t)
	if _, page := f.do(t, "GET", "/", nil, cookie, nil); !strings.Contains(page, `name="hash" value="`+inst.Hash+`"`) ||
		!strings.Contains(page, `action="/connectors/approve"`) {
		t.Fatalf("page has no approve form for %s:\n%s", inst.Ref(), page)
	}
	served := func() bool {
		list, _ := d.admin.Store.List(ctx)
		return len(list) == 2 && list[1].Active
	}
	for name, form := range map[string]url.Values{
		"no csrf":    {"ref": {inst.Ref()}, "hash": {inst.Hash}},
		"other hash": {"csrf": {csrf}, "ref": {inst.Ref()}, "hash": {strings.Repeat("0", 64)}},
	} {
		if resp, body := f.do(t, "POST", "/connectors/approve", form, cookie, nil); resp.StatusCode < 400 || served() {
			t.Errorf("%s: %d, served %v\n%s", name, resp.StatusCode, served(), body)
		}
	}
	form := url.Values{"csrf": {csrf}, "ref": {inst.Ref()}, "hash": {inst.Hash}}
	if resp, body := f.do(t, "POST", "/connectors/approve", form, cookie, nil); resp.StatusCode != http.StatusSeeOther || !served() {
		t.Fatalf("approve: %d, served %v\n%s", resp.StatusCode, served(), body)
	}
	if ev := d.consented(); len(ev) != 3 || ev[2]["via"] != "approve" || ev[2]["by"] != "web" {
		t.Errorf("store.consented of the page's approval = %v", ev)
	}
}
