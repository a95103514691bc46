package admin

import (
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/store"
)

// TestAdminTrust: the trust routes set, list and remove an authority's
// signers, each audited; an install through the API judges the package's
// signature against them, and a listing re-judges it.
func TestAdminTrust(t *testing.T) {
	d := startDaemon(t)
	events := &testkit.Events{}
	d.admin.OnEvent = events.Record
	ctx := t.Context()
	keys := t.TempDir()
	alice := testkit.NewSSHKey(t, keys, "alice", "ed25519")

	_, err := d.client.Trust(ctx, "github://acme/repo", "signers", []byte("a@acme "+alice.Public))
	apiError(t, "authority with a repository", err, 400, "invalid_argument")
	_, err = d.client.Trust(ctx, "github://acme", "signers", []byte("a@acme cert-authority "+alice.Public))
	if ae := apiError(t, "cert-authority", err, 400, "invalid_argument"); !strings.Contains(ae.Message, "signers:1: cert-authority") {
		t.Errorf("message %q does not name the file and line", ae.Message)
	}
	ta, err := d.client.Trust(ctx, "github://acme", "signers", []byte("alice@acme "+alice.Public+"\n"))
	if err != nil || len(ta.Signers) != 1 || !strings.HasPrefix(ta.Signers[0].Fingerprint, "SHA256:") {
		t.Fatalf("Trust = %+v, %v", ta, err)
	}
	fp := ta.Signers[0].Fingerprint
	if d := events.Detail(-1); events.Names()[0] != "trust.set" || d["authority"] != "github://acme" || d["keys"] != fp {
		t.Errorf("events %v, last %v", events.Names(), d)
	}
	list, err := d.client.TrustList(ctx)
	if err != nil || len(list) != 1 || list[0].Authority != "github://acme" || list[0].Signers[0].Principals != "alice@acme" {
		t.Fatalf("TrustList = %+v, %v", list, err)
	}

	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, store.SpecFileName, testkit.Spec(t, "gmail"))
	stmt, err := store.PackageStatement(pkg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, pkg, store.SignatureFileName, testkit.SSHSign(t, alice, "file", stmt))
	_, err = d.install(ctx, pkg)
	apiError(t, "signature in another namespace", err, 400, "invalid_package")
	testkit.WriteFile(t, pkg, store.SignatureFileName, testkit.SSHSign(t, alice, signing.Namespace, stmt))
	inst, err := d.install(ctx, pkg)
	want := signing.Signature{Status: signing.Trusted, Authority: "github://acme", Fingerprint: fp, Principal: "alice@acme"}
	if err != nil || inst.Signature != want {
		t.Fatalf("InstallConnector = %+v, %v; want signature %+v", inst.Signature, err, want)
	}
	// store.installed, then store.consented: both name the signer.
	for _, i := range []int{-2, -1} {
		if d := events.Detail(i); d["signature"] != "trusted" || d["signer"] != fp || d["authority"] != "github://acme" {
			t.Errorf("%s details %v", events.Names()[len(events.Names())+i], d)
		}
	}

	if err := d.client.Untrust(ctx, "github://acme"); err != nil {
		t.Fatal(err)
	}
	apiError(t, "remove again", d.client.Untrust(ctx, "github://acme"), 404, "not_found")
	if !slices.Contains(events.Names(), "trust.removed") {
		t.Errorf("events %v lack trust.removed", events.Names())
	}
	conns, err := d.client.ListConnectors(ctx)
	if err != nil || len(conns) != 1 || conns[0].Signature.Status != signing.Untrusted || conns[0].Signature.Fingerprint != fp {
		t.Fatalf("ListConnectors after trust remove = %+v, %v", conns, err)
	}
}
