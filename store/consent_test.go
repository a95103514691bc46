package store

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
)

// gmailAt writes the gmail spec at version v, edited by edit (may be nil),
// as a spec file in a fresh directory.
func gmailAt(t *testing.T, v string, edit func(ops []any)) string {
	t.Helper()
	spec := testkit.WithVersion(t, testkit.Spec(t, "gmail"), v)
	if edit != nil {
		spec = testkit.EditJSON(t, spec, func(m map[string]any) {
			edit(m["tools"].([]any)[0].(map[string]any)["operations"].([]any))
		})
	}
	return testkit.WriteFile(t, t.TempDir(), "gmail.json", spec)
}

// op returns operation i of ops as a map.
func op(ops []any, i int) map[string]any { return ops[i].(map[string]any) }

func TestInstallNeedsConsentToTheHashShown(t *testing.T) {
	s, _ := newStore(t)
	path := gmailAt(t, "1.0.0", nil)
	offer, err := s.Offer(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	want := Request{FQN: testkit.GoogleFQN, Version: "1.0.0", Hash: offer.Hash,
		Grants:     manifest.Grants{Hosts: []string{"gmail.googleapis.com:443"}, CredentialKinds: []string{"oauth2"}},
		Approval:   []string{"google/gmail.messages.send (POST /gmail/v1/users/me/messages/send)"},
		NoApproval: []string{"google/gmail.messages.get (GET /gmail/v1/users/me/messages/{id})", "google/gmail.messages.search (GET /gmail/v1/users/me/messages)"},
		Signature:  signing.Signature{Status: signing.Unsigned}}
	if !reflect.DeepEqual(offer.Request, want) || offer.Active != "" || offer.Widening != nil {
		t.Errorf("Offer = %+v\nwant request %+v", offer, want)
	}
	// The file changes after it was shown: the consent names the old hash.
	testkit.WriteFile(t, filepath.Dir(path), "gmail.json", append(testkit.WithVersion(t, testkit.Spec(t, "gmail"), "1.0.0"), ' '))
	tests := map[string]Consent{
		"no hash":      {By: "test", Via: ViaYes},
		"changed hash": {Hash: offer.Hash, By: "test", Via: ViaYes},
		"unknown via":  {Hash: offer.Hash, By: "test", Via: "maybe"},
	}
	for name, c := range tests {
		_, err := s.Install(t.Context(), path, nil, c)
		if !errors.Is(err, ErrConsentMismatch) || !errors.Is(err, state.ErrConflict) {
			t.Errorf("%s: Install = %v, want ErrConsentMismatch", name, err)
		}
		if name == "changed hash" && !strings.Contains(err.Error(), "changed after it was shown") {
			t.Errorf("%s: message %q does not say the package changed", name, err)
		}
	}
	if got := refs(t, s); len(got) != 0 {
		t.Errorf("installed %v after refused consents", got)
	}
	if c, err := s.Consents(t.Context()); err != nil || len(c) != 0 {
		t.Errorf("Consents = %v, %v; want none", c, err)
	}
}

func TestInstallRecordsConsent(t *testing.T) {
	s, _ := newStore(t)
	path := gmailAt(t, "1.0.0", nil)
	c := yes(t, s, path)
	c.By, c.Via = "uid 0 (root)", ViaTerminal
	inst, err := s.Install(t.Context(), path, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Consents(t.Context())
	if err != nil || len(got) != 1 {
		t.Fatalf("Consents = %v, %v", got, err)
	}
	if g := got[0]; g.Hash != inst.Hash || g.By != "uid 0 (root)" || g.Via != ViaTerminal || g.At.IsZero() ||
		!reflect.DeepEqual(g.Grants, inst.Grants) || g.Signature.Status != signing.Unsigned {
		t.Errorf("consent on record = %+v", g)
	}
}

func TestUpgrades(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(ops []any)
		widening string // "" for an upgrade applied at once
	}{
		{"asks the same", nil, ""},
		{"asks less", func(ops []any) { op(ops, 1)["approval"] = "required" }, ""},
		{"new host", func(ops []any) { op(ops, 0)["hosts"] = []any{"gmail.googleapis.com", "evil.example.com"} }, `host "evil.example.com:443"`},
		{"new credential kind", func(ops []any) { op(ops, 0)["credential"] = "bearer" }, `credential kind "bearer"`},
		{"loses approval", func(ops []any) { op(ops, 2)["approval"] = "none" }, "operation google/gmail.messages.send (POST /gmail/v1/users/me/messages/send) no longer waits for approval"},
		{"new operation without approval", func(ops []any) {
			o := op(ops, 1)
			o["name"], o["path"] = "gmail.messages.trash", "/gmail/v1/users/me/messages/{id}/trash"
		}, "operation google/gmail.messages.trash (GET /gmail/v1/users/me/messages/{id}/trash) (new) does not wait for approval"},
		{"same name, another method, without approval", func(ops []any) { op(ops, 1)["method"] = "DELETE" },
			"operation google/gmail.messages.get (DELETE /gmail/v1/users/me/messages/{id}) (new) does not wait for approval"},
		{"same name, another path, without approval", func(ops []any) { op(ops, 1)["path"] = "/gmail/v1/users/me/settings/{id}" },
			"operation google/gmail.messages.get (GET /gmail/v1/users/me/settings/{id}) (new) does not wait for approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			old := install(t, s, gmailAt(t, "1.0.0", nil))
			inst := install(t, s, gmailAt(t, "1.1.0", tt.edit))
			srcs, errs := s.Load(t.Context())
			if len(errs) != 0 || len(srcs) != 1 {
				t.Fatalf("Load = %v, %v", srcs, errs)
			}
			if tt.widening == "" {
				if inst.Quarantined || !inst.Active || srcs[0].Hash != inst.Hash {
					t.Errorf("upgrade %+v not applied; serving %s", inst, srcs[0].Hash)
				}
				return
			}
			if !inst.Quarantined || inst.Active || srcs[0].Hash != old.Hash {
				t.Errorf("widening upgrade %+v not quarantined; serving %s, want the old %s", inst, srcs[0].Hash, old.Hash)
			}
			if !slices.Contains(inst.Widening, tt.widening) {
				t.Errorf("widening = %q, want it to hold %q", inst.Widening, tt.widening)
			}
			list, _ := s.List(t.Context())
			if len(list) != 2 || !list[1].Quarantined || !slices.Contains(list[1].Widening, tt.widening) {
				t.Errorf("List = %+v, want 1.1.0 quarantined with its widening", list)
			}
			if c, _ := s.Consents(t.Context()); len(c) != 1 || c[0].Version != "1.0.0" {
				t.Errorf("Consents = %+v, want only 1.0.0 (a quarantined version is not in the lock)", c)
			}
		})
	}
}

func TestApproveQuarantined(t *testing.T) {
	s, _ := newStore(t)
	install(t, s, gmailAt(t, "1.0.0", nil))
	wide := install(t, s, gmailAt(t, "1.1.0", func(ops []any) { op(ops, 0)["hosts"] = []any{"evil.example.com"} }))
	ref := wide.Ref()
	pending, err := s.Pending(t.Context(), ref)
	if err != nil || pending.Hash != wide.Hash || pending.Active != "1.0.0" ||
		!slices.Equal(pending.Widening, []string{`host "evil.example.com:443"`}) {
		t.Fatalf("Pending = %+v, %v", pending, err)
	}
	if _, err := s.Pending(t.Context(), testkit.GoogleFQN+"@1.0.0"); !errors.Is(err, state.ErrConflict) {
		t.Errorf("Pending(active) = %v, want state.ErrConflict", err)
	}
	if _, err := s.Pending(t.Context(), testkit.GoogleFQN+"@9.0.0"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Pending(missing) = %v, want state.ErrNotFound", err)
	}
	// Removing the active version would leave only a quarantined one.
	if err := s.Remove(t.Context(), testkit.GoogleFQN+"@1.0.0"); !errors.Is(err, state.ErrConflict) {
		t.Errorf("Remove(the only version served) = %v, want state.ErrConflict", err)
	}
	wrong := Consent{Hash: strings.Repeat("0", 64), By: "test", Via: ViaApprove}
	if _, err := s.Approve(t.Context(), ref, nil, wrong); !errors.Is(err, ErrConsentMismatch) {
		t.Errorf("Approve(another hash) = %v, want ErrConsentMismatch", err)
	}
	got, err := s.Approve(t.Context(), ref, nil, Consent{Hash: wide.Hash, By: "alice", Via: ViaApprove})
	if err != nil || !got.Active {
		t.Fatalf("Approve = %+v, %v", got, err)
	}
	srcs, _ := s.Load(t.Context())
	if len(srcs) != 1 || srcs[0].Hash != wide.Hash {
		t.Errorf("after approval Load serves %v, want %s", srcs, wide.Hash)
	}
	c, _ := s.Consents(t.Context())
	if len(c) != 2 || c[1].Version != "1.1.0" || c[1].By != "alice" || c[1].Via != ViaApprove {
		t.Errorf("Consents = %+v, want 1.1.0 approved by alice", c)
	}
	if _, err := s.Approve(t.Context(), ref, nil, Consent{Hash: wide.Hash, By: "alice", Via: ViaApprove}); !errors.Is(err, state.ErrConflict) {
		t.Errorf("second Approve = %v, want state.ErrConflict", err)
	}
}

// TestLockReplayedOnASecondHome: the lock of one home installs the same
// packages in another without a prompt; a package whose hash differs from
// the lock's, or one it does not record, is refused.
func TestLockReplayedOnASecondHome(t *testing.T) {
	a, _ := newStore(t)
	v1 := gmailAt(t, "1.0.0", nil)
	install(t, a, v1)
	lin := testkit.WriteFile(t, t.TempDir(), "linear.json", testkit.Spec(t, "linear"))
	install(t, a, lin)
	consents, err := a.Consents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	text, err := RenderLock(consents)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := RenderLock(consents)
	if string(text) != string(again) || !strings.HasPrefix(string(text), lockHeader) {
		t.Errorf("RenderLock is not deterministic or lacks its header:\n%s", text)
	}
	lock, err := ParseLock("aileron.lock", text)
	if err != nil || len(lock) != 2 {
		t.Fatalf("ParseLock = %v, %v\n%s", lock, err, text)
	}

	b, _ := newStore(t)
	entry := lock[testkit.GoogleFQN+"@1.0.0"]
	inst, err := b.Install(t.Context(), v1, nil, Consent{Hash: entry.Hash, By: "test", Via: ViaLock, Lock: &entry})
	if err != nil || inst.Hash != consents[0].Hash {
		t.Fatalf("Install from the lock = %+v, %v", inst, err)
	}
	// Same FQN@VERSION, other bytes: refused, naming both hashes.
	changed := gmailAt(t, "1.0.0", func(ops []any) { op(ops, 0)["summary"] = "changed" })
	offer, _ := b.Offer(t.Context(), changed)
	_, err = b.Install(t.Context(), changed, nil, Consent{Hash: offer.Hash, By: "test", Via: ViaLock, Lock: &entry})
	if !errors.Is(err, ErrConsentMismatch) || !strings.Contains(err.Error(), entry.Hash) || !strings.Contains(err.Error(), offer.Hash) {
		t.Errorf("Install of a changed package = %v, want ErrConsentMismatch naming both hashes", err)
	}
	// Not in the lock.
	v2 := gmailAt(t, "1.1.0", nil)
	offer, _ = b.Offer(t.Context(), v2)
	_, err = b.Install(t.Context(), v2, nil, Consent{Hash: offer.Hash, By: "test", Via: ViaLock})
	if !errors.Is(err, ErrConsentMismatch) || !strings.Contains(err.Error(), "no entry") {
		t.Errorf("Install of a version the lock lacks = %v, want ErrConsentMismatch", err)
	}
	// A lock entry with the right hash but less granted than the package
	// asks (edited by hand) is refused too.
	short := entry
	short.Grants.Hosts = nil
	_, err = b.Install(t.Context(), v1, nil, Consent{Hash: entry.Hash, By: "test", Via: ViaLock, Lock: &short})
	if !errors.Is(err, ErrConsentMismatch) || !strings.Contains(err.Error(), "more than the lock records") {
		t.Errorf("Install beyond the lock's grants = %v, want ErrConsentMismatch", err)
	}
}

// TestLockActivatesAWideningVersion: a lock records a consent given before,
// so a version it records is served even where it asks for more than the
// active one.
func TestLockActivatesAWideningVersion(t *testing.T) {
	s, _ := newStore(t)
	install(t, s, gmailAt(t, "1.0.0", nil))
	wide := gmailAt(t, "1.1.0", func(ops []any) { op(ops, 0)["hosts"] = []any{"evil.example.com"} })
	offer, _ := s.Offer(t.Context(), wide)
	if len(offer.Widening) == 0 || offer.Active != "1.0.0" {
		t.Fatalf("Offer = %+v, want the widening shown", offer)
	}
	req := offer.Request
	inst, err := s.Install(t.Context(), wide, nil, Consent{Hash: req.Hash, By: "test", Via: ViaLock, Lock: &req})
	if err != nil || inst.Quarantined || !inst.Active {
		t.Errorf("Install from a lock recording it = %+v, %v; want it active", inst, err)
	}
}

func TestParseLockRefuses(t *testing.T) {
	entry := "[[connector]]\nname = \"github://a/b\"\nversion = \"1.0.0\"\nhash = \"sha256:" + strings.Repeat("a", 64) + "\"\nsignature = \"unsigned\"\n"
	if _, err := ParseLock("l", []byte("lock_version = 1\n"+entry)); err != nil {
		t.Fatalf("a minimal lock: %v", err)
	}
	tests := map[string]string{
		"unknown key":   "lock_version = 1\n" + entry + "hostz = []\n",
		"version":       "lock_version = 2\n" + entry,
		"no version":    entry,
		"short hash":    "lock_version = 1\n" + strings.Replace(entry, strings.Repeat("a", 64), "abc", 1),
		"bad fqn":       "lock_version = 1\n" + strings.Replace(entry, "github://a/b", "b", 1),
		"bad signature": "lock_version = 1\n" + strings.Replace(entry, `"unsigned"`, `"maybe"`, 1),
		"twice":         "lock_version = 1\n" + entry + entry,
		"not toml":      "lock_version = \n",
	}
	for name, text := range tests {
		if _, err := ParseLock("l", []byte(text)); !errors.Is(err, ErrInvalidLock) {
			t.Errorf("%s: ParseLock = %v, want ErrInvalidLock", name, err)
		}
	}
}

func TestExceedsSignerAndManifest(t *testing.T) {
	trusted := signing.Signature{Status: signing.Trusted, Authority: "github://acme", Fingerprint: "SHA256:old"}
	base := Request{Grants: manifest.Grants{CredentialScope: "read", OAuthScopes: []string{"a"}, Imports: []string{"wasi:cli/stdout"}},
		Signature: trusted}
	tests := []struct {
		name string
		edit func(r *Request)
		want string // "" for no more
	}{
		{"same", func(r *Request) {}, ""},
		{"rotated trusted key", func(r *Request) { r.Signature.Fingerprint = "SHA256:new" }, ""},
		{"no longer trusted", func(r *Request) { r.Signature.Status = signing.Untrusted },
			"signer: signed by a key not trusted for github://acme (SHA256:old), where the consented version was signed by github://acme (SHA256:old)"},
		{"now unsigned", func(r *Request) { r.Signature = signing.Signature{Status: signing.Unsigned} }, "signer: unsigned, where"},
		{"scope", func(r *Request) { r.Grants.CredentialScope = "write" }, `credential scope "write" (was "read")`},
		{"oauth scope", func(r *Request) { r.Grants.OAuthScopes = []string{"a", "b"} }, `OAuth scope "b"`},
		{"import", func(r *Request) { r.Grants.Imports = []string{"wasi:http/outgoing-handler"} }, `runtime import "wasi:http/outgoing-handler"`},
	}
	for _, tt := range tests {
		r := base
		r.Grants.OAuthScopes = slices.Clone(base.Grants.OAuthScopes)
		tt.edit(&r)
		got := strings.Join(r.Exceeds(base), "; ")
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("%s: Exceeds = %q, want %q", tt.name, got, tt.want)
		}
	}
	// Unsigned before: a key not in the trust store is more; no key is not.
	unsigned := Request{Signature: signing.Signature{Status: signing.Unsigned}}
	stranger := Request{Signature: signing.Signature{Status: signing.Untrusted, Authority: "github://acme", Fingerprint: "SHA256:x"}}
	if got := stranger.Exceeds(unsigned); len(got) != 1 || !strings.Contains(got[0], "not in the trust store") {
		t.Errorf("untrusted key over unsigned: Exceeds = %q", got)
	}
	if got := unsigned.Exceeds(unsigned); got != nil {
		t.Errorf("unsigned over unsigned: Exceeds = %q", got)
	}
}

// TestVersionInstalledBeforeConsents: a version with no consent on record
// (installed before consents were recorded) is compared by what its
// package asks; it is not in the lock until installed again.
func TestVersionInstalledBeforeConsents(t *testing.T) {
	s, _ := newStore(t)
	v1 := gmailAt(t, "1.0.0", nil)
	install(t, s, v1)
	if err := testkit.Exec(t, s.DB, `DELETE FROM store_consents`); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Consents(t.Context()); len(c) != 0 {
		t.Errorf("Consents = %+v, want none", c)
	}
	if inst := install(t, s, gmailAt(t, "1.0.1", nil)); inst.Quarantined {
		t.Errorf("an upgrade asking what the old package asks was quarantined: %+v", inst.Widening)
	}
	if err := testkit.Exec(t, s.DB, `DELETE FROM store_consents`); err != nil {
		t.Fatal(err)
	}
	wide := install(t, s, gmailAt(t, "1.1.0", func(ops []any) { op(ops, 2)["approval"] = "none" }))
	if !wide.Quarantined || !slices.Equal(wide.Widening, []string{"operation google/gmail.messages.send (POST /gmail/v1/users/me/messages/send) no longer waits for approval"}) {
		t.Errorf("widening over a version without a consent = %+v", wide)
	}
	install(t, s, v1) // installed again: consented now
	if c, _ := s.Consents(t.Context()); len(c) != 1 || c[0].Version != "1.0.0" {
		t.Errorf("Consents after reinstalling 1.0.0 = %+v", c)
	}
}

// TestClaimUnaudited: a consent given without the daemon (Audited false)
// is claimed once for its audit line; one the daemon audited is not.
func TestClaimUnaudited(t *testing.T) {
	s, _ := newStore(t)
	install(t, s, gmailAt(t, "1.0.0", nil))
	wide := gmailAt(t, "1.1.0", func(ops []any) { op(ops, 0)["hosts"] = []any{"evil.example.com"} })
	install(t, s, wide)
	got, err := s.ClaimUnaudited(t.Context())
	if err != nil || len(got) != 2 || got[0].Version != "1.0.0" || got[0].Quarantined || !got[1].Quarantined || got[1].By != "test" {
		t.Fatalf("ClaimUnaudited = %+v, %v; want both versions, 1.1.0 quarantined", got, err)
	}
	if again, err := s.ClaimUnaudited(t.Context()); err != nil || len(again) != 0 {
		t.Errorf("second ClaimUnaudited = %+v, %v; want nothing", again, err)
	}
	c := yes(t, s, gmailAt(t, "1.0.1", nil))
	c.Audited = true
	if _, err := s.Install(t.Context(), gmailAt(t, "1.0.1", nil), nil, c); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ClaimUnaudited(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("ClaimUnaudited after an audited install = %+v, %v; want nothing", got, err)
	}
}
