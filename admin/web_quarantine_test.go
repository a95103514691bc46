package admin

import (
	"context"
	"strings"
	"testing"

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
