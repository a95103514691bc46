package ca

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"errors"
	"testing"
	"time"
)

func TestDeriveIsDeterministic(t *testing.T) {
	seed := bytes.Repeat([]byte{7}, 32)
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	opts := DeriveOptions{Seed: seed, CommonName: "Aileron session s_x", NotBefore: start, NotAfter: start.Add(48 * time.Hour),
		Now: func() time.Time { return start.Add(time.Hour) }}
	a, err := Derive(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Derive(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Certificate().Raw, b.Certificate().Raw) {
		t.Fatal("two derivations from one seed gave different certificates")
	}
	c := a.Certificate()
	if !c.IsCA || c.Subject.CommonName != "Aileron session s_x" || !c.NotBefore.Equal(start) || !c.NotAfter.Equal(start.Add(48*time.Hour)) ||
		c.SerialNumber.BitLen() != 128 {
		t.Errorf("certificate: CA %v, CN %q, %s..%s, serial %d bits", c.IsCA, c.Subject.CommonName, c.NotBefore, c.NotAfter, c.SerialNumber.BitLen())
	}
	// A leaf minted by one node verifies against the other's root.
	leaf, err := b.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(a.Certificate())
	lc, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com", CurrentTime: start.Add(time.Hour)}); err != nil {
		t.Fatalf("leaf of one derivation does not verify under the other's root: %v", err)
	}
	other := opts
	other.Seed = bytes.Repeat([]byte{8}, 32)
	o, err := Derive(other)
	if err != nil {
		t.Fatal(err)
	}
	if o.Certificate().PublicKey.(*ecdsa.PublicKey).Equal(c.PublicKey) {
		t.Fatal("different seeds gave the same key")
	}
}

func TestDeriveRefusesBadOptions(t *testing.T) {
	now := time.Now()
	for _, o := range []DeriveOptions{
		{Seed: make([]byte, 16), NotBefore: now, NotAfter: now.Add(time.Hour)},
		{Seed: make([]byte, 32), NotBefore: now, NotAfter: now},
		{Seed: make([]byte, 32), NotBefore: now, NotAfter: now.Add(time.Hour), CacheSize: -1},
	} {
		if _, err := Derive(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Derive(%+v) = %v; want ErrInvalidOptions", o, err)
		}
	}
}
