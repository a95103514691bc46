package signing_test

import (
	"crypto/dsa" // only to show DSA keys are refused
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/signing"
	"golang.org/x/crypto/ssh"
)

const (
	fqn     = "github://acme/aileron-connector-google"
	version = "1.2.3"
	hashA   = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fingerprint returns key's SHA256 fingerprint as ssh-keygen -l prints it.
func fingerprint(t *testing.T, key testkit.SSHKey) string {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", key.Private+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))[1]
}

func signers(t *testing.T, lines ...string) []signing.Signer {
	t.Helper()
	s, err := signing.ParseAllowedSigners("allowed_signers", []byte(strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerify(t *testing.T) {
	dir := t.TempDir()
	alice := testkit.NewSSHKey(t, dir, "alice", "ed25519")
	bob := testkit.NewSSHKey(t, dir, "bob", "ecdsa")
	carol := testkit.NewSSHKey(t, dir, "carol", "rsa")
	stmt := signing.Statement(fqn, version, hashA)
	good := testkit.SSHSign(t, alice, signing.Namespace, stmt)
	trustAlice := signers(t, "alice@acme "+alice.Public)
	aliceFP := fingerprint(t, alice)
	tests := []struct {
		name      string
		sig       []byte
		signers   []signing.Signer
		status    signing.Status
		principal string
		fp        string
		wantErr   string
	}{
		{name: "valid", sig: good, signers: trustAlice, status: signing.Trusted, principal: "alice@acme", fp: aliceFP},
		{name: "valid, CRLF line ends", sig: []byte(strings.ReplaceAll(string(good), "\n", "\r\n")), signers: trustAlice,
			status: signing.Trusted, principal: "alice@acme", fp: aliceFP},
		{name: "valid sha256", sig: testkit.SSHSign(t, alice, signing.Namespace, stmt, "-O", "hashalg=sha256"),
			signers: trustAlice, status: signing.Trusted, principal: "alice@acme", fp: aliceFP},
		{name: "ecdsa key", sig: testkit.SSHSign(t, bob, signing.Namespace, stmt),
			signers: signers(t, "bob@acme "+bob.Public), status: signing.Trusted, principal: "bob@acme", fp: fingerprint(t, bob)},
		{name: "rsa key", sig: testkit.SSHSign(t, carol, signing.Namespace, stmt),
			signers: signers(t, "carol@acme "+carol.Public), status: signing.Trusted, principal: "carol@acme", fp: fingerprint(t, carol)},
		{name: "wrong key", sig: testkit.SSHSign(t, bob, signing.Namespace, stmt), signers: trustAlice,
			status: signing.Untrusted, fp: fingerprint(t, bob)},
		{name: "no signers", sig: good, status: signing.Untrusted, fp: aliceFP},
		{name: "expired signer", sig: good, signers: signers(t, `alice@acme valid-before="20260201Z" `+alice.Public),
			status: signing.Untrusted, fp: aliceFP},
		{name: "not yet valid", sig: good, signers: signers(t, `alice@acme valid-after="20260401Z" `+alice.Public),
			status: signing.Untrusted, fp: aliceFP},
		{name: "within validity", sig: good, signers: signers(t, `alice@acme valid-after="20260101Z",valid-before="20260401Z" `+alice.Public),
			status: signing.Trusted, principal: "alice@acme", fp: aliceFP},
		{name: "namespace allowed", sig: good, signers: signers(t, `alice@acme namespaces="git,aileron-*" `+alice.Public),
			status: signing.Trusted, principal: "alice@acme", fp: aliceFP},
		{name: "namespace not allowed", sig: good, signers: signers(t, `alice@acme namespaces="git" `+alice.Public),
			status: signing.Untrusted, fp: aliceFP},
		{name: "namespace negated", sig: good, signers: signers(t, `alice@acme namespaces="*,!aileron-connector" `+alice.Public),
			status: signing.Untrusted, fp: aliceFP},
		{name: "wrong namespace", sig: testkit.SSHSign(t, alice, "git", stmt), signers: trustAlice, wantErr: `namespace "git"`},
		{name: "another package's statement", sig: testkit.SSHSign(t, alice, signing.Namespace, signing.Statement(fqn, version, hashB)),
			signers: trustAlice, wantErr: "not a signature over this package's statement"},
		{name: "another version's statement", sig: testkit.SSHSign(t, alice, signing.Namespace, signing.Statement(fqn, "1.2.4", hashA)),
			signers: trustAlice, wantErr: "not a signature over this package's statement"},
		{name: "corrupt", sig: corrupt(good), signers: trustAlice, wantErr: "does not verify"},
		{name: "not armored", sig: []byte("hello\n"), signers: trustAlice, wantErr: "not an armored SSH signature"},
		{name: "text before", sig: append([]byte("note\n"), good...), signers: trustAlice, wantErr: "not an armored SSH signature"},
		{name: "text after", sig: append(append([]byte{}, good...), "note\n"...), signers: trustAlice, wantErr: "text follows"},
		{name: "empty", sig: nil, signers: trustAlice, wantErr: "not an armored SSH signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := signing.Verify(stmt, tt.sig, tt.signers, now)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, signing.ErrNotVerified) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Verify = %+v, %v; want an ErrNotVerified error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := signing.Signature{Status: tt.status, Authority: "github://acme", Fingerprint: tt.fp, Principal: tt.principal}
			if got != want {
				t.Fatalf("Verify = %+v, want %+v", got, want)
			}
		})
	}
}

// corrupt flips one bit in the signature bytes of an armored signature.
func corrupt(sig []byte) []byte {
	out := append([]byte{}, sig...)
	lines := strings.Split(string(out), "\n")
	b := []byte(lines[len(lines)-3]) // the last base64 line of the body
	if b[0] == 'A' {
		b[0] = 'B'
	} else {
		b[0] = 'A'
	}
	lines[len(lines)-3] = string(b)
	return []byte(strings.Join(lines, "\n"))
}

// TestRotation: the old key's lines end (valid-before) where the new key's
// begin (valid-after); a package signed with either is judged by the time
// of verification, and ssh-keygen agrees with the statement and the file.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	old := testkit.NewSSHKey(t, dir, "old", "ed25519")
	cur := testkit.NewSSHKey(t, dir, "new", "ed25519")
	file := fmt.Sprintf("# acme's signers\nrelease@acme valid-before=\"20260215Z\" %s\nrelease@acme valid-after=\"20260215Z\" %s\n", old.Public, cur.Public)
	list, err := signing.ParseAllowedSigners("acme", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	stmt := signing.Statement(fqn, version, hashA)
	oldSig := testkit.SSHSign(t, old, signing.Namespace, stmt)
	newSig := testkit.SSHSign(t, cur, signing.Namespace, stmt)
	before := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		sig  []byte
		at   time.Time
		want signing.Status
	}{
		{"old key before the rotation", oldSig, before, signing.Trusted},
		{"new key before the rotation", newSig, before, signing.Untrusted},
		{"old key after the rotation", oldSig, now, signing.Untrusted},
		{"new key after the rotation", newSig, now, signing.Trusted},
	} {
		got, err := signing.Verify(stmt, c.sig, list, c.at)
		if err != nil || got.Status != c.want {
			t.Errorf("%s: Verify = %+v, %v; want %s", c.name, got, err, c.want)
		}
	}
	// ssh-keygen reads the same file and statement the same way (at the
	// real time, which is after the rotation).
	allowed := testkit.WriteFile(t, dir, "allowed_signers", []byte(file))
	sigFile := testkit.WriteFile(t, dir, "new.sig", newSig)
	cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "release@acme", "-n", signing.Namespace, "-s", sigFile)
	cmd.Stdin = strings.NewReader(string(stmt))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y verify: %v\n%s", err, out)
	}
}

func TestParseAllowedSigners(t *testing.T) {
	key := testkit.NewSSHKey(t, t.TempDir(), "k", "ed25519")
	f := strings.Fields(key.Public)
	typ, b64 := f[0], f[1]
	good := []struct {
		line string
		want signing.Signer
	}{
		{"alice@acme " + key.Public, signing.Signer{Principals: "alice@acme"}},
		{`"alice@acme,bob@acme" ` + typ + " " + b64, signing.Signer{Principals: "alice@acme,bob@acme"}},
		{`*@acme NAMESPACES="aileron-connector",Valid-After="202601021504Z" ` + key.Public,
			signing.Signer{Principals: "*@acme", Namespaces: "aileron-connector", ValidAfter: time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)}},
		{`a@acme valid-before="20260102150405Z" ` + typ + " " + b64 + " a comment with words",
			signing.Signer{Principals: "a@acme", ValidBefore: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}},
	}
	for _, g := range good {
		got, err := signing.ParseAllowedSigners("f", []byte("# comment\n\n  \t\n"+g.line+"\r\n"))
		if err != nil {
			t.Errorf("%q: %v", g.line, err)
			continue
		}
		if len(got) != 1 || got[0].Line != 4 || got[0].Principals != g.want.Principals || got[0].Namespaces != g.want.Namespaces ||
			!got[0].ValidAfter.Equal(g.want.ValidAfter) || !got[0].ValidBefore.Equal(g.want.ValidBefore) ||
			got[0].Key.Type() != typ {
			t.Errorf("%q: got %+v, want %+v", g.line, got, g.want)
		}
	}
	bad := []struct{ line, want string }{
		{`*@acme cert-authority ` + key.Public, "f:2: cert-authority is not supported"},
		{`a@acme valid-after="20260101" ` + key.Public, `has no Z`},
		{`a@acme valid-after="2026-01-01Z" ` + key.Public, "is not YYYYMMDDZ"},
		{`a@acme valid-after=20260101Z ` + key.Public, "needs a double-quoted value"},
		{`a@acme valid-after="20260201Z",valid-before="20260101Z" ` + key.Public, "is not before valid-before"},
		{`a@acme valid-after="20260101Z",valid-after="20260102Z" ` + key.Public, "appears twice"},
		{`a@acme no-touch-required ` + key.Public, `unknown option "no-touch-required"`},
		{`a@acme namespaces="a b" ` + key.Public, "want a comma-separated list"},
		{`a@acme namespaces="a ` + key.Public, "a double quote is not closed"},
		{`a@acme`, "no key"},
		{`a@acme ` + typ, "no key"},
		{`a@acme ` + typ + " !!!", "not valid base64"},
		{`a@acme ssh-rsa ` + b64, "is a ssh-ed25519 key, but the line says ssh-rsa"},
		{`a@acme ssh-ed25519-cert-v01@openssh.com ` + b64, "is a certificate"},
		{`"" ` + key.Public, "principals field is empty"},
		{`a@acme ` + dsaKey(t), "ssh-dss (DSA) keys sign with SHA-1"},
	}
	for _, b := range bad {
		_, err := signing.ParseAllowedSigners("f", []byte("# first\n"+b.line+"\n"))
		if err == nil || !strings.Contains(err.Error(), b.want) || !strings.Contains(err.Error(), "f:2: ") {
			t.Errorf("%q: err = %v, want f:2: … %q", b.line, err, b.want)
		}
	}
	// Every bad line is reported, each with its number.
	_, err := signing.ParseAllowedSigners("f", []byte("a@acme\n"+"b@acme "+key.Public+"\nc@acme cert-authority "+key.Public+"\n"))
	if err == nil || !strings.Contains(err.Error(), "f:1: ") || !strings.Contains(err.Error(), "f:3: ") || strings.Contains(err.Error(), "f:2: ") {
		t.Errorf("err = %v, want lines 1 and 3 named", err)
	}
}

func TestStatement(t *testing.T) {
	s := signing.Statement(fqn, version, hashA)
	want := "aileron-connector-statement v1\nfqn " + fqn + "\nversion 1.2.3\nsha256 " + hashA + "\n"
	if string(s) != want {
		t.Fatalf("Statement = %q, want %q", s, want)
	}
	f, v, h, err := signing.ParseStatement(s)
	if err != nil || f != fqn || v != version || h != hashA {
		t.Fatalf("ParseStatement = %q %q %q %v", f, v, h, err)
	}
	for _, bad := range []string{
		strings.TrimSuffix(want, "\n"),
		strings.Replace(want, "v1", "v2", 1),
		strings.Replace(want, "fqn ", "fqn  ", 1),
		strings.Replace(want, "1.2.3", "v1.2.3", 1),
		strings.Replace(want, hashA, strings.ToUpper(hashA), 1),
		strings.Replace(want, fqn, "acme/google", 1),
		want + "extra\n",
		strings.Replace(want, "version", "sha256", 1),
	} {
		if _, _, _, err := signing.ParseStatement([]byte(bad)); err == nil {
			t.Errorf("ParseStatement(%q) accepted it", bad)
		}
	}
}

func FuzzParseAllowedSigners(f *testing.F) {
	f.Add([]byte("alice@acme ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEtJBFeW6oJhBmVqIbaCkJARH0xEMhrOr/xcGjBRUQrB\n"))
	f.Add([]byte(`a@b namespaces="x,!y",valid-after="20260101Z",valid-before="202601021504Z" ssh-ed25519 AAAA` + "\n# c\n"))
	f.Add([]byte(`"a b" cert-authority ssh-rsa AAAAB3Nza`))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := signing.ParseAllowedSigners("f", data)
		if err != nil {
			return
		}
		for _, s := range list {
			if s.Key == nil || s.Principals == "" || s.Line < 1 {
				t.Fatalf("accepted an incomplete signer %+v", s)
			}
			if !s.ValidAfter.IsZero() && !s.ValidBefore.IsZero() && !s.ValidAfter.Before(s.ValidBefore) {
				t.Fatalf("accepted an empty validity period %+v", s)
			}
			s.ValidAt(now)
			if s.Fingerprint != ssh.FingerprintSHA256(s.Key) || s.KeyType != s.Key.Type() {
				t.Fatalf("signer %+v does not describe its key", s)
			}
		}
	})
}

func FuzzReadSignature(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.sig")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n"))
	stmt := signing.Statement(fqn, version, hashA)
	f.Fuzz(func(t *testing.T, data []byte) {
		sig, err := signing.ReadSignature(data)
		if err == nil && sig.PublicKey == nil {
			t.Fatal("read a signature without a key")
		}
		v, err := signing.Verify(stmt, data, nil, now)
		if err == nil && (v.Status != signing.Untrusted || v.Fingerprint == "") {
			t.Fatalf("Verify with no signers = %+v", v)
		}
	})
}

// dsaKey returns a DSA public key as "ssh-dss base64-key", made in Go:
// recent ssh-keygen cannot make one.
func dsaKey(t *testing.T) string {
	t.Helper()
	var k dsa.PrivateKey
	if err := dsa.GenerateParameters(&k.Parameters, rand.Reader, dsa.L1024N160); err != nil {
		t.Fatal(err)
	}
	if err := dsa.GenerateKey(&k, rand.Reader); err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}
