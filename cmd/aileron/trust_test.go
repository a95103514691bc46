package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/store"
)

// TestTrustCLI drives the publisher's and the user's side through the CLI,
// against a daemon's admin API and offline (no daemon: the store itself):
// connector statement, signing with ssh-keygen, trust add/list/remove,
// and what connector install and list say of each package's signature.
func TestTrustCLI(t *testing.T) {
	for _, mode := range []string{"daemon", "offline"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "daemon" {
				providerHome(t)
			} else {
				t.Setenv("AILERON_HOME", t.TempDir())
			}
			trustCLI(t)
		})
	}
}

func trustCLI(t *testing.T) {
	dir := t.TempDir()
	alice := testkit.NewSSHKey(t, dir, "alice", "ed25519")
	bob := testkit.NewSSHKey(t, dir, "bob", "ecdsa")
	spec := mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json"))
	signed := func(key testkit.SSHKey, version string) string {
		pkg := t.TempDir()
		testkit.WriteFile(t, pkg, store.SpecFileName, testkit.WithVersion(t, []byte(spec), version))
		code, stmt, errOut := providerCLI("", "connector", "statement", pkg)
		hash, err := store.HashPackage(pkg)
		if code != 0 || err != nil || stmt != string(signing.Statement("github://acme/aileron-connector-google", version, hash)) {
			t.Fatalf("connector statement: exit %d, %q, %s", code, stmt, errOut)
		}
		testkit.WriteFile(t, pkg, store.SignatureFileName, testkit.SSHSign(t, key, signing.Namespace, []byte(stmt)))
		return pkg
	}
	signers := testkit.WriteFile(t, dir, "acme.allowed_signers", []byte("# acme's release keys\nalice@acme "+alice.Public+
		"\nold@acme valid-before=\"20200101Z\" "+bob.Public+"\n"))
	bad := testkit.WriteFile(t, dir, "bad.allowed_signers", []byte("alice@acme "+alice.Public+"\n*@acme cert-authority "+bob.Public+"\n"))
	aliceFP, bobFP := fingerprintOf(t, alice), fingerprintOf(t, bob)

	expect := func(wantCode int, want []string, args ...string) string {
		t.Helper()
		code, out, errOut := providerCLI("", args...)
		for _, w := range want {
			if code != wantCode || !strings.Contains(out+errOut, w) {
				t.Fatalf("aileron %s: exit %d, want %d and %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, w, out, errOut)
			}
		}
		return out
	}
	expect(1, []string{bad + ":2: cert-authority is not supported"}, "trust", "add", "github://acme", "--signers", bad)
	expect(1, []string{"without a repository"}, "trust", "add", "github://acme/google", "--signers", signers)
	expect(0, []string{"no publisher is trusted"}, "trust", "list")
	expect(0, []string{"trusted github://acme: 2 key(s) listed; 1 may sign its packages now", aliceFP + " ssh-ed25519 alice@acme\n",
		bobFP + " ecdsa-sha2-nistp256 old@acme until 2020-01-01T00:00:00Z, NOT VALID NOW"}, "trust", "add", "github://acme", "--signers", signers)
	expect(0, []string{"AUTHORITY", "github://acme", aliceFP, "alice@acme", "always", "until 2020-01-01T00:00:00Z, NOT VALID NOW"}, "trust", "list")
	expect(1, []string{"is not a package directory"}, "connector", "statement", filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json"))
	if code, out, errOut := providerCLI("t@team "+bob.Public+"\n", "trust", "add", "gitlab://team", "--signers", "-"); code != 0 ||
		!strings.Contains(out, "trusted gitlab://team: 1 key(s)") {
		t.Fatalf("trust add --signers -: exit %d\n%s%s", code, out, errOut)
	}
	expect(0, []string{"removed gitlab://team"}, "trust", "remove", "gitlab://team")
	var list []store.TrustedAuthority
	if err := json.Unmarshal([]byte(expect(0, nil, "trust", "list", "--json")), &list); err != nil ||
		len(list) != 1 || list[0].Signers[0].Fingerprint != aliceFP {
		t.Fatalf("trust list --json = %+v, %v", list, err)
	}

	out := expect(0, []string{"signed by github://acme (" + aliceFP + ")"}, "connector", "install", "--yes", signed(alice, "1.2.3"))
	if lines := strings.Split(out, "\n"); !strings.HasPrefix(afterInstalled(lines), "signed by github://acme (") {
		t.Errorf("the verdict is not the line after installed:\n%s", out)
	}
	expect(0, []string{"signed by a key not trusted for github://acme (" + bobFP + ")"}, "connector", "install", "--yes", signed(bob, "1.2.4"))
	expect(0, []string{"\nunsigned\n"}, "connector", "install", "--yes", filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json"))
	wrongNS := signed(alice, "1.2.5")
	testkit.WriteFile(t, wrongNS, store.SignatureFileName, testkit.SSHSign(t, alice, "git", []byte(mustRead(t, filepath.Join(wrongNS, store.SpecFileName)))))
	expect(1, []string{"connector package signature does not verify", `namespace "git"`}, "connector", "install", "--yes", wrongNS)
	expect(0, []string{"SIGNER", "trusted " + aliceFP, "not-trusted " + bobFP, "unsigned"}, "connector", "list")

	expect(0, []string{"removed github://acme from the trust store"}, "trust", "remove", "github://acme")
	expect(1, []string{"github://acme is not in the trust store"}, "trust", "remove", "github://acme")
	expect(0, []string{"not-trusted " + aliceFP}, "connector", "list")
}

// afterInstalled returns the line after the "installed …" line.
func afterInstalled(lines []string) string {
	for i, l := range lines {
		if strings.HasPrefix(l, "installed ") && i+1 < len(lines) {
			return lines[i+1]
		}
	}
	return ""
}

// TestRequireSignatureCLI: with store.require_signature, connector install
// refuses an unsigned package, saying why and what to do, but installs a
// local:// one.
func TestRequireSignatureCLI(t *testing.T) {
	home := t.TempDir()
	t.Setenv("AILERON_STORE__REQUIRE_SIGNATURE", "true")
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json"))
	if code != 1 || !strings.Contains(errOut, "is unsigned and store.require_signature is on") {
		t.Fatalf("install unsigned: exit %d\n%s%s", code, out, errOut)
	}
	local := testkit.EditJSON(t, []byte(mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json"))), func(m map[string]any) {
		m["connector"].(map[string]any)["fqn"] = "local://me/linear"
	})
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", testkit.WriteFile(t, t.TempDir(), "linear.json", local))
	if code != 0 || !strings.Contains(out, "installed local://me/linear@") || !strings.Contains(out, "\nunsigned\n") {
		t.Fatalf("install local unsigned: exit %d\n%s%s", code, out, errOut)
	}
}

// fingerprintOf is key's SHA256 fingerprint.
func fingerprintOf(t *testing.T, key testkit.SSHKey) string {
	t.Helper()
	l, err := signing.ParseAllowedSigners("key", []byte("x "+key.Public))
	if err != nil {
		t.Fatal(err)
	}
	return l[0].Fingerprint
}
