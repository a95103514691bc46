package ca_test

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
)

// savedPEMs saves a and returns its certificate and key PEM as written.
func savedPEMs(t *testing.T, a *ca.Authority) (certPEM, keyPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	if err := a.Save(dir); err != nil {
		t.Fatalf("Save: %v", err)
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, ca.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = os.ReadFile(filepath.Join(dir, ca.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

func fileMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestSaveLoadDirRoundTrip(t *testing.T) {
	a := newCA(t, ca.Options{})
	dir := filepath.Join(t.TempDir(), "sessions", "s1")
	for i := range 2 { // the second Save overwrites in place
		if err := a.Save(dir); err != nil {
			t.Fatalf("Save #%d: %v", i+1, err)
		}
	}
	for path, want := range map[string]fs.FileMode{
		dir:                             0o700,
		filepath.Join(dir, ca.CertFile): 0o644,
		filepath.Join(dir, ca.KeyFile):  0o600,
	} {
		if got := fileMode(t, path); got != want {
			t.Errorf("%s has mode %04o, want %04o", path, got, want)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want only %s and %s (no temp files)", len(entries), ca.CertFile, ca.KeyFile)
	}

	b, err := ca.LoadDir(dir, ca.Options{})
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if !b.Certificate().Equal(a.Certificate()) || string(b.CertPEM()) != string(a.CertPEM()) {
		t.Fatal("loaded certificate differs from the saved one")
	}
	c, err := b.Leaf("round.trip.example")
	if err != nil {
		t.Fatalf("Leaf from loaded CA: %v", err)
	}
	opts := x509.VerifyOptions{DNSName: "round.trip.example", Roots: rootPool(a)}
	if _, err := c.Leaf.Verify(opts); err != nil {
		t.Errorf("leaf of the loaded CA does not verify against the original root: %v", err)
	}
}

func TestLoadDirRefusesAccessibleKey(t *testing.T) {
	for _, mode := range []fs.FileMode{0o644, 0o640, 0o604, 0o620} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			if err := newCA(t, ca.Options{}).Save(dir); err != nil {
				t.Fatal(err)
			}
			keyPath := filepath.Join(dir, ca.KeyFile)
			if err := os.Chmod(keyPath, mode); err != nil {
				t.Fatal(err)
			}
			_, err := ca.LoadDir(dir, ca.Options{})
			if !errors.Is(err, ca.ErrKeyPermissions) {
				t.Fatalf("LoadDir error = %v, want ErrKeyPermissions", err)
			}
			for _, want := range []string{keyPath, "chmod 600"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestLoadDirMissingFiles(t *testing.T) {
	for _, missing := range []string{ca.CertFile, ca.KeyFile} {
		t.Run(missing, func(t *testing.T) {
			dir := t.TempDir()
			if err := newCA(t, ca.Options{}).Save(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(dir, missing)); err != nil {
				t.Fatal(err)
			}
			_, err := ca.LoadDir(dir, ca.Options{})
			if !errors.Is(err, ca.ErrIO) || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
				t.Errorf("LoadDir error = %v, want ErrIO + fs.ErrNotExist naming %s", err, missing)
			}
		})
	}
}

func TestLoadDirNamesTheBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := newCA(t, ca.Options{}).Save(dir); err != nil {
		t.Fatal(err)
	}
	certPath := filepath.Join(dir, ca.CertFile)
	if err := os.WriteFile(certPath, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ca.LoadDir(dir, ca.Options{})
	if !errors.Is(err, ca.ErrInvalidCA) || !strings.Contains(err.Error(), certPath) {
		t.Errorf("LoadDir error = %v, want ErrInvalidCA naming %s", err, certPath)
	}
}

func TestLoadAcceptsKeyFormats(t *testing.T) {
	a := newCA(t, ca.Options{})
	certPEM, pkcs8PEM := savedPEMs(t, a)
	block, _ := pem.Decode(pkcs8PEM)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	// openssl ecparam -genkey writes an EC PARAMETERS block before the key.
	p256OID := []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}
	params := pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: p256OID})
	tests := []struct {
		name   string
		keyPEM []byte
	}{
		{"PKCS#8", pkcs8PEM},
		{"SEC 1 after EC PARAMETERS", append(params, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ca.Load(certPEM, tt.keyPEM, ca.Options{})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if _, err := b.Leaf("k.example"); err != nil {
				t.Errorf("Leaf: %v", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	a := newCA(t, ca.Options{})
	certA, keyA := savedPEMs(t, a)
	_, keyB := savedPEMs(t, newCA(t, ca.Options{}))
	past := newClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	certOld, keyOld := savedPEMs(t, newCA(t, ca.Options{Validity: time.Hour, Now: past.Now}))

	leaf, err := a.Leaf("leaf.example")
	if err != nil {
		t.Fatal(err)
	}
	leafCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]})
	leafDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: leafDER})
	corrupt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})
	corruptKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("garbage")})
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte("x")})

	tests := []struct {
		name        string
		cert, key   []byte
		wantMsgs    []string
		wantExpired bool
	}{
		{"garbage certificate", []byte("hello"), keyA,
			[]string{"certificate PEM", "no CERTIFICATE PEM block", "no PEM data"}, false},
		{"empty certificate", nil, keyA, []string{"certificate PEM", "no CERTIFICATE PEM block"}, false},
		{"corrupt certificate block", corrupt, keyA, []string{"certificate PEM", "parsing the CERTIFICATE block"}, false},
		{"garbage key", certA, []byte("hello"), []string{"key PEM", "no PRIVATE KEY"}, false},
		{"corrupt key block", certA, corruptKey, []string{"key PEM", "parsing the PRIVATE KEY block"}, false},
		{"encrypted key", certA, encrypted, []string{"key PEM", "encrypted"}, false},
		{"swapped", keyA, certA, []string{"certificate PEM", "found PRIVATE KEY", "swapped"}, false},
		{"mismatched key", certA, keyB, []string{"key PEM does not match certificate PEM"}, false},
		{"non-CA certificate", leafCert, leafKey, []string{"certificate PEM", `"leaf.example" is not a CA`}, false},
		{"expired CA", certOld, keyOld, []string{"certificate PEM", "expired at 2020-01-01T01:00:00Z"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ca.Load(tt.cert, tt.key, ca.Options{})
			if !errors.Is(err, ca.ErrInvalidCA) || got != nil {
				t.Fatalf("Load = %v, %v; want nil and ErrInvalidCA", got, err)
			}
			if errors.Is(err, ca.ErrCAExpired) != tt.wantExpired {
				t.Errorf("errors.Is(err, ErrCAExpired) = %v, want %v", !tt.wantExpired, tt.wantExpired)
			}
			for _, want := range tt.wantMsgs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "BEGIN") {
				t.Errorf("error %q echoes PEM content", err)
			}
		})
	}
}
