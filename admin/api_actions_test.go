package admin

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/store"
)

// TestInstallAllowUnpinned: the install API refuses an action requiring
// another connector by a placeholder hash unless the request says
// allow_unpinned, and then audits the install naming the unpinned action.
func TestInstallAllowUnpinned(t *testing.T) {
	d := startDaemon(t)
	var mu sync.Mutex
	var installed []map[string]string
	d.admin.OnEvent = func(ev audit.EventName, details map[string]string) {
		if ev == audit.EventStoreInstalled {
			mu.Lock()
			installed = append(installed, details)
			mu.Unlock()
		}
	}
	ctx := context.Background()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile(filepath.Join("..", "action", "testdata", "linear", store.SpecFileName))
	if err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, store.SpecFileName, spec)
	testkit.WriteFile(t, pkg, "actions/triage/action.md", []byte(`+++
name = "triage"
version = "1.0.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "self"
capabilities = ["network:api.linear.test:443", "credential:api_key"]

[[requires.connectors]]
name = "`+testkit.GoogleFQN+`"
version = "1.2.3"
hash = "sha256:bound-at-release"

[[execute]]
id = "issue"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"
+++
Looks an issue up.
`))
	_, err = d.install(ctx, pkg)
	if ae := apiError(t, "placeholder without allow_unpinned", err, http.StatusBadRequest, "invalid_package"); !strings.Contains(ae.Message, "--allow-unpinned") {
		t.Fatalf("refusal does not say how to allow it: %s", ae.Message)
	}
	inst, err := d.installWith(ctx, InstallRequest{Path: pkg, AllowUnpinned: true})
	if err != nil {
		t.Fatal(err)
	}
	want := testkit.GoogleFQN + "@1.2.3"
	if len(inst.Actions) != 1 || len(inst.Actions[0].Unpinned) != 1 || inst.Actions[0].Unpinned[0] != want {
		t.Fatalf("Installed.Actions = %+v, want triage unpinned on %s", inst.Actions, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(installed); n != 2 || installed[1]["unpinned_actions"] != "triage: "+want || installed[0]["unpinned_actions"] != "" {
		t.Fatalf("store.installed details = %v, want the second naming triage: %s", installed, want)
	}
}

// TestInstallFetchedLocalNotExempt: with store.require_signature on, the
// install API exempts an unsigned local:// package from the daemon's
// machine, but not one the request says was fetched from a URL.
func TestInstallFetchedLocalNotExempt(t *testing.T) {
	d := startDaemon(t)
	d.admin.Store.RequireSignature = true
	spec := testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
		m["connector"].(map[string]any)["fqn"] = "local://me/google"
	})
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, store.SpecFileName, spec)
	ctx := context.Background()
	_, err := d.installWith(ctx, InstallRequest{Path: pkg, FetchedFrom: "https://pkgs.example/google.tar.gz"})
	if ae := apiError(t, "fetched local:// package", err, http.StatusBadRequest, "invalid_package"); !strings.Contains(ae.Message, "fetched from https://pkgs.example/google.tar.gz") {
		t.Fatalf("refusal does not say the package was fetched: %s", ae.Message)
	}
	if _, err := d.installWith(ctx, InstallRequest{Path: pkg}); err != nil {
		t.Fatalf("the same package from this machine: %v", err)
	}
}
