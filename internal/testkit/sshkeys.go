package testkit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SSHKey is a key pair made by ssh-keygen in a test's directory.
type SSHKey struct {
	// Private is the private key file.
	Private string
	// Public is the public key line: "ssh-ed25519 AAAA… comment".
	Public string
}

// NewSSHKey makes an unencrypted key pair of type typ (ed25519, ecdsa,
// rsa) with ssh-keygen under dir, named name. A missing ssh-keygen fails
// the test, naming scripts/test-deps.sh, which installs it.
func NewSSHKey(t testing.TB, dir, name, typ string) SSHKey {
	t.Helper()
	priv := filepath.Join(dir, name)
	sshKeygen(t, "-q", "-t", typ, "-N", "", "-C", name+"@test", "-f", priv)
	pub, err := os.ReadFile(priv + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return SSHKey{Private: priv, Public: strings.TrimSpace(string(pub))}
}

// SSHSign signs data with `ssh-keygen -Y sign -n namespace`, plus any
// extra options (-O hashalg=sha256), and returns the armored signature.
func SSHSign(t testing.TB, key SSHKey, namespace string, data []byte, extra ...string) []byte {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(key.Private), "signed-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer os.Remove(f.Name() + ".sig")
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close()
	args := append([]string{"-Y", "sign", "-n", namespace, "-f", key.Private}, extra...)
	sshKeygen(t, append(args, f.Name())...)
	sig, err := os.ReadFile(f.Name() + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// sshKeygen runs ssh-keygen with args and fails the test on error.
func sshKeygen(t testing.TB, args ...string) {
	t.Helper()
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatalf("ssh-keygen not found (%v): run scripts/test-deps.sh, which installs openssh-client", err)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
