package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
)

// keys are ssh-keygen's keys of one test: alice and bob publish for acme,
// old and new are one publisher's keys before and after a rotation.
type keys struct{ alice, bob, old, new testkit.SSHKey }

func newKeys(t *testing.T) keys {
	dir := t.TempDir()
	return keys{
		alice: testkit.NewSSHKey(t, dir, "alice", "ed25519"),
		bob:   testkit.NewSSHKey(t, dir, "bob", "ed25519"),
		old:   testkit.NewSSHKey(t, dir, "old", "ed25519"),
		new:   testkit.NewSSHKey(t, dir, "new", "ed25519"),
	}
}

// gmailPackage writes the gmail spec at version v as a package directory.
func gmailPackage(t *testing.T, v string) string {
	t.Helper()
	dir := t.TempDir()
	testkit.WriteFile(t, dir, SpecFileName, testkit.WithVersion(t, testkit.Spec(t, "gmail"), v))
	return dir
}

// sign signs the statement of the package dir with key in namespace ns
// and puts the signature at the package's root.
func sign(t *testing.T, dir string, key testkit.SSHKey, ns string) {
	t.Helper()
	stmt, err := PackageStatement(dir)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, dir, SignatureFileName, testkit.SSHSign(t, key, ns, stmt))
}

// trust sets acme's allowed signers, failing the test on error.
func trust(t *testing.T, s *Store, authority string, lines ...string) {
	t.Helper()
	if _, err := s.Trust(t.Context(), authority, "allowed_signers", []byte(strings.Join(lines, "\n")+"\n")); err != nil {
		t.Fatal(err)
	}
}

func fingerprintOf(t *testing.T, key testkit.SSHKey) string {
	t.Helper()
	l, err := signing.ParseAllowedSigners("k", []byte("x "+key.Public))
	if err != nil {
		t.Fatal(err)
	}
	return l[0].Fingerprint
}

func TestInstallSignature(t *testing.T) {
	k := newKeys(t)
	// The clock reads 2026-03-01: old's lines ended 2026-02-15, new's began then.
	signers := []string{
		"alice@acme " + k.alice.Public,
		`release@acme valid-before="20260215Z" ` + k.old.Public,
		`release@acme valid-after="20260215Z" ` + k.new.Public,
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    signing.Signature
		wantErr string
	}{
		{name: "unsigned", prepare: func(*testing.T, string) {}, want: signing.Signature{Status: signing.Unsigned}},
		{name: "valid", prepare: func(t *testing.T, dir string) { sign(t, dir, k.alice, signing.Namespace) },
			want: signing.Signature{Status: signing.Trusted, Authority: "github://acme", Fingerprint: fingerprintOf(t, k.alice), Principal: "alice@acme"}},
		{name: "wrong key", prepare: func(t *testing.T, dir string) { sign(t, dir, k.bob, signing.Namespace) },
			want: signing.Signature{Status: signing.Untrusted, Authority: "github://acme", Fingerprint: fingerprintOf(t, k.bob)}},
		{name: "expired signer", prepare: func(t *testing.T, dir string) { sign(t, dir, k.old, signing.Namespace) },
			want: signing.Signature{Status: signing.Untrusted, Authority: "github://acme", Fingerprint: fingerprintOf(t, k.old)}},
		{name: "rotated signer", prepare: func(t *testing.T, dir string) { sign(t, dir, k.new, signing.Namespace) },
			want: signing.Signature{Status: signing.Trusted, Authority: "github://acme", Fingerprint: fingerprintOf(t, k.new), Principal: "release@acme"}},
		{name: "wrong namespace", prepare: func(t *testing.T, dir string) { sign(t, dir, k.alice, "git") }, wantErr: `namespace "git"`},
		{name: "another package's statement", prepare: func(t *testing.T, dir string) {
			other := gmailPackage(t, "1.2.3")
			testkit.WriteFile(t, other, "README.md", []byte("another package, same name and version\n"))
			sign(t, other, k.alice, signing.Namespace)
			sig, _ := os.ReadFile(filepath.Join(other, SignatureFileName))
			testkit.WriteFile(t, dir, SignatureFileName, sig)
		}, wantErr: "not a signature over this package's statement"},
		{name: "a directory", prepare: func(t *testing.T, dir string) {
			testkit.WriteFile(t, dir, SignatureFileName+"/x.sig", []byte("x"))
		}, wantErr: "is not a file"},
		{name: "corrupt", prepare: func(t *testing.T, dir string) { testkit.WriteFile(t, dir, SignatureFileName, []byte("signed, acme\n")) },
			wantErr: "not an armored SSH signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := newStore(t)
			trust(t, s, "github://acme", signers...)
			dir := gmailPackage(t, "1.2.3")
			tt.prepare(t, dir)
			active, _ := s.Load(t.Context())
			inst, err := s.Install(t.Context(), dir, active, yes(t, s, dir))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadSignature) || !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Install err = %v; want ErrBadSignature, ErrInvalidPackage and %q", err, tt.wantErr)
				}
				if r := refs(t, s); len(r) != 0 {
					t.Fatalf("refused package installed anyway: %v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inst.Signature != tt.want {
				t.Errorf("Install signature = %+v, want %+v", inst.Signature, tt.want)
			}
			list, err := s.List(t.Context())
			if err != nil || len(list) != 1 || list[0].Signature != tt.want {
				t.Errorf("List = %+v, %v; want signature %+v", list, err, tt.want)
			}
			if !strings.Contains(logs.String(), `"signature":"`+string(tt.want.Status)+`"`) {
				t.Errorf("install log line does not carry the verdict:\n%s", logs.String())
			}
			if _, err := os.Stat(filepath.Join(inst.Dir, SignatureFileName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the store's package directory holds %s (%v); it keeps only what is hashed", SignatureFileName, err)
			}
		})
	}
}

// TestSignatureLeavesHash: adding, changing or removing the signature
// file never changes the package hash it signs.
func TestSignatureLeavesHash(t *testing.T) {
	k := newKeys(t)
	dir := gmailPackage(t, "1.2.3")
	before, err := HashPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	stmtBefore, _ := PackageStatement(dir)
	sign(t, dir, k.alice, signing.Namespace)
	signed, err := HashPackage(dir)
	if err != nil || signed != before {
		t.Fatalf("hash with a signature = %s, %v; want %s", signed, err, before)
	}
	if stmt, _ := PackageStatement(dir); string(stmt) != string(stmtBefore) {
		t.Fatalf("statement changed by signing:\n%s\n%s", stmtBefore, stmt)
	}
	sign(t, dir, k.bob, signing.Namespace)
	if h, _ := HashPackage(dir); h != before {
		t.Fatalf("hash with another signature = %s, want %s", h, before)
	}
	// Any other file, hidden or nested, still counts.
	testkit.WriteFile(t, dir, "sub/"+SignatureFileName, []byte("x"))
	if h, _ := HashPackage(dir); h == before {
		t.Fatal("a nested file named like the signature is not hashed")
	}
	// Installed signed, the package has the same hash as unsigned.
	s, _ := newStore(t)
	plain := install(t, s, gmailPackage(t, "1.2.3"))
	if plain.Hash != before {
		t.Fatalf("installed hash = %s, want %s", plain.Hash, before)
	}
}

func TestRequireSignature(t *testing.T) {
	k := newKeys(t)
	local := func(t *testing.T) string {
		dir := t.TempDir()
		spec := testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
			m["connector"].(map[string]any)["fqn"] = "local://me/google"
		})
		testkit.WriteFile(t, dir, SpecFileName, spec)
		return dir
	}
	tests := []struct {
		name    string
		pkg     func(t *testing.T) string
		wantErr string
		fetched string // InstallOptions.FetchedFrom
	}{
		{"unsigned", func(t *testing.T) string { return gmailPackage(t, "1.2.3") }, "is unsigned and store.require_signature is on", ""},
		{"untrusted", func(t *testing.T) string {
			dir := gmailPackage(t, "1.2.3")
			sign(t, dir, k.bob, signing.Namespace)
			return dir
		}, "is signed by a key not trusted for github://acme (" + fingerprintOf(t, k.bob) + ")", ""},
		{"trusted", func(t *testing.T) string {
			dir := gmailPackage(t, "1.2.3")
			sign(t, dir, k.alice, signing.Namespace)
			return dir
		}, "", ""},
		{"expired", func(t *testing.T) string {
			dir := gmailPackage(t, "1.2.3")
			sign(t, dir, k.old, signing.Namespace)
			return dir
		}, "the key is listed for github://acme (line 2 of its signers) but may not sign packages now", ""},
		{"local unsigned", local, "", ""},
		{"local unsigned, fetched", local, "is unsigned and store.require_signature is on: it was fetched from https://pkgs.example/google.tar.gz, " +
			"so its local:// name exempts it from nothing", "https://pkgs.example/google.tar.gz"},
		{"local untrusted", func(t *testing.T) string {
			dir := local(t)
			sign(t, dir, k.bob, signing.Namespace)
			return dir
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			s.RequireSignature = true
			trust(t, s, "github://acme", "alice@acme "+k.alice.Public, `old@acme valid-before="20200101Z" `+k.old.Public)
			pkg, opts := tt.pkg(t), InstallOptions{FetchedFrom: tt.fetched}
			_, err := s.InstallWith(t.Context(), pkg, nil, opts, yesWith(t, s, pkg, opts))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrSignatureRequired) || !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Install err = %v; want ErrSignatureRequired containing %q", err, tt.wantErr)
			}
			if r := refs(t, s); len(r) != 0 {
				t.Fatalf("refused package installed anyway: %v", r)
			}
		})
	}
}

// TestListJudgesNow: List judges the recorded signature against the trust
// store as it stands, so trusting or removing an authority shows at once;
// a reinstall without the file keeps the recorded signature; removal
// forgets it.
func TestListJudgesNow(t *testing.T) {
	k := newKeys(t)
	s, _ := newStore(t)
	dir := gmailPackage(t, "1.2.3")
	sign(t, dir, k.alice, signing.Namespace)
	inst := install(t, s, dir)
	if inst.Signature.Status != signing.Untrusted {
		t.Fatalf("no trust entry: %+v", inst.Signature)
	}
	status := func() signing.Status {
		t.Helper()
		list, err := s.List(t.Context())
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %+v, %v", list, err)
		}
		return list[0].Signature.Status
	}
	trust(t, s, "github://acme", "alice@acme "+k.alice.Public)
	if got := status(); got != signing.Trusted {
		t.Fatalf("after trust add: %s", got)
	}
	os.Remove(filepath.Join(dir, SignatureFileName))
	if again := install(t, s, dir); again.Signature.Status != signing.Trusted {
		t.Fatalf("reinstalled without the file: %+v; the recorded signature still vouches for the hash", again.Signature)
	}
	if err := s.Untrust(t.Context(), "github://acme"); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != signing.Untrusted {
		t.Fatalf("after trust remove: %s", got)
	}
	if err := s.Remove(t.Context(), inst.Ref()); err != nil {
		t.Fatal(err)
	}
	if n := testkit.CountRows(t, s.DB, "store_signatures"); n != 0 {
		t.Fatalf("store_signatures holds %d rows after the package was removed", n)
	}
	if again := install(t, s, dir); again.Signature.Status != signing.Unsigned {
		t.Fatalf("installed unsigned after removal: %+v", again.Signature)
	}
}

func TestTrustStore(t *testing.T) {
	k := newKeys(t)
	s, _ := newStore(t)
	ctx := t.Context()
	for _, c := range []struct{ authority, file, want string }{
		{"github://acme/repo", "a@acme " + k.alice.Public, "without a repository"},
		{"ftp://acme", "a@acme " + k.alice.Public, "unknown scheme"},
		{"github://acme", "# nothing\n", "lists no key"},
		{"github://acme", "a@acme cert-authority " + k.alice.Public, "f:1: cert-authority is not supported"},
		{"github://acme", strings.Repeat("#", MaxAllowedSigners+1), "may be at most"},
	} {
		if _, err := s.Trust(ctx, c.authority, "f", []byte(c.file)); !errors.Is(err, state.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Trust(%q, %q) = %v; want ErrInvalidArgument containing %q", c.authority, c.file, err, c.want)
		}
	}
	if list, err := s.TrustList(ctx); err != nil || len(list) != 0 {
		t.Fatalf("refused entries were stored: %+v, %v", list, err)
	}
	got, err := s.Trust(ctx, "github://acme", "f", []byte("a@acme "+k.alice.Public+"\nb@acme "+k.bob.Public+"\n"))
	if err != nil || len(got.Signers) != 2 || got.Signers[1].Fingerprint != fingerprintOf(t, k.bob) {
		t.Fatalf("Trust = %+v, %v", got, err)
	}
	trust(t, s, "gitlab://team", "t@team "+k.old.Public)
	// Adding again replaces the authority's signers.
	trust(t, s, "github://acme", "n@acme "+k.new.Public)
	list, err := s.TrustList(ctx)
	if err != nil || len(list) != 2 || list[0].Authority != "github://acme" || list[1].Authority != "gitlab://team" ||
		len(list[0].Signers) != 1 || list[0].Signers[0].Principals != "n@acme" || list[0].UpdatedAt.IsZero() {
		t.Fatalf("TrustList = %+v, %v", list, err)
	}
	if err := s.Untrust(ctx, "github://acme"); err != nil {
		t.Fatal(err)
	}
	if err := s.Untrust(ctx, "github://acme"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Untrust of an absent authority = %v, want ErrNotFound", err)
	}
}

// TestFleetSharesTrust: on a database the nodes share (Postgres), the trust
// store and a package's signature set on node A are what node B judges by.
func TestFleetSharesTrust(t *testing.T) {
	k := newKeys(t)
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := fleetStore(t, dsn), fleetStore(t, dsn)
	dir := gmailPackage(t, "1.2.3")
	sign(t, dir, k.alice, signing.Namespace)
	trust(t, a, "github://acme", "alice@acme "+k.alice.Public)
	install(t, a, dir)
	list, err := b.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Signature.Status != signing.Trusted || list[0].Signature.Principal != "alice@acme" {
		t.Fatalf("node B List = %+v, %v; want the package trusted", list, err)
	}
	if err := b.Untrust(t.Context(), "github://acme"); err != nil {
		t.Fatal(err)
	}
	if list, err := a.List(t.Context()); err != nil || list[0].Signature.Status != signing.Untrusted {
		t.Fatalf("node A List after B removed the authority = %+v, %v", list, err)
	}
}
