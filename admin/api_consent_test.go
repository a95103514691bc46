package admin

import (
	"os/user"
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/store"
)

// consented returns the details of the store.consented events so far.
func (d *daemon) consented() []map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []map[string]string
	for _, e := range d.events {
		if e.name == audit.EventStoreConsented {
			out = append(out, e.details)
		}
	}
	return out
}

// TestAdminInstallConsentHandshake: the install API answers with the
// request first and installs only under a consent naming the hash shown;
// the consent records the socket peer's user and is audited.
func TestAdminInstallConsentHandshake(t *testing.T) {
	d := startDaemon(t)
	ctx := t.Context()
	dir := t.TempDir()
	path := testkit.WriteFile(t, dir, "gmail.json", testkit.Spec(t, "gmail"))
	offer, err := d.client.OfferConnector(ctx, path)
	if err != nil || offer.FQN != testkit.GoogleFQN || len(offer.Hash) != 64 ||
		!slices.Equal(offer.Approval, []string{"google/gmail.messages.send (POST /gmail/v1/users/me/messages/send)"}) {
		t.Fatalf("OfferConnector = %+v, %v", offer, err)
	}
	if list, _ := d.client.ListConnectors(ctx); len(list) != 0 || d.reloads.Load() != 0 {
		t.Fatalf("an offer installed %+v", list)
	}
	// The package changes between the offer and the consent.
	testkit.WriteFile(t, dir, "gmail.json", append(testkit.Spec(t, "gmail"), '\n'))
	_, err = d.client.InstallConnector(ctx, path, store.Consent{Hash: offer.Hash, Via: store.ViaTerminal})
	if ae := apiError(t, "stale consent", err, 409, "conflict"); !strings.Contains(ae.Message, "changed after it was shown") {
		t.Errorf("stale consent message %q", ae.Message)
	}
	if list, _ := d.client.ListConnectors(ctx); len(list) != 0 {
		t.Fatalf("a stale consent installed %+v", list)
	}
	offer, _ = d.client.OfferConnector(ctx, path)
	inst, err := d.client.InstallConnector(ctx, path, store.Consent{Hash: offer.Hash, Via: store.ViaTerminal, By: "mallory"})
	if err != nil || !inst.Active {
		t.Fatalf("InstallConnector = %+v, %v", inst, err)
	}
	me, _ := user.Current()
	want := "uid " + me.Uid + " (" + me.Username + ")"
	ev := d.consented()
	if len(ev) != 1 || ev[0]["by"] != want || ev[0]["via"] != "terminal" || ev[0]["hash"] != inst.Hash ||
		ev[0]["hosts"] != "gmail.googleapis.com:443" || ev[0]["signature"] != "unsigned" {
		t.Errorf("store.consented = %v, want by %q (the socket's peer, not what the client claimed)", ev, want)
	}
	c, err := d.client.ConnectorConsents(ctx)
	if err != nil || len(c) != 1 || c[0].By != want {
		t.Errorf("ConnectorConsents = %+v, %v", c, err)
	}
}

// TestAdminApproveQuarantined: a widening upgrade is installed but
// quarantined; approve shows the difference, then activates it under a
// consent naming its hash.
func TestAdminApproveQuarantined(t *testing.T) {
	d := startDaemon(t)
	ctx := t.Context()
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "g.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	wide := testkit.EditJSON(t, testkit.WithVersion(t, testkit.Spec(t, "gmail"), "1.3.0"), func(m map[string]any) {
		m["tools"].([]any)[0].(map[string]any)["operations"].([]any)[0].(map[string]any)["hosts"] = []any{"evil.example.com"}
	})
	inst, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "g.json", wide))
	if err != nil || !inst.Quarantined || inst.Active {
		t.Fatalf("widening install = %+v, %v; want quarantined", inst, err)
	}
	if ev := d.consented(); len(ev) != 2 || ev[1]["quarantined"] != "true" || !strings.Contains(ev[1]["widening"], "evil.example.com") {
		t.Errorf("store.consented of the quarantined install = %v", ev)
	}
	pending, err := d.client.PendingConnector(ctx, inst.Ref())
	if err != nil || pending.Active != "1.2.3" || !slices.Equal(pending.Widening, []string{`host "evil.example.com:443"`}) {
		t.Fatalf("PendingConnector = %+v, %v", pending, err)
	}
	_, err = d.client.ApproveConnector(ctx, inst.Ref(), store.Consent{Hash: strings.Repeat("0", 64)})
	apiError(t, "approve another hash", err, 409, "conflict")
	got, err := d.client.ApproveConnector(ctx, inst.Ref(), store.Consent{Hash: pending.Hash})
	if err != nil || !got.Active {
		t.Fatalf("ApproveConnector = %+v, %v", got, err)
	}
	if ev := d.consented(); len(ev) != 3 || ev[2]["via"] != "approve" || ev[2]["version"] != "1.3.0" {
		t.Errorf("store.consented of the approval = %v", ev)
	}
	list, _ := d.client.ListConnectors(ctx)
	if len(list) != 2 || !list[1].Active || list[1].Quarantined {
		t.Errorf("after approval List = %+v", list)
	}
	_, err = d.client.PendingConnector(ctx, "github://x/y@1.0.0")
	apiError(t, "pending of nothing", err, 404, "not_found")
}
