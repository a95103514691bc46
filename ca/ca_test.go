package ca_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
)

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// epoch is a fixed, second-aligned start time for clock-driven tests.
func epoch() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }

func newCA(t testing.TB, opts ca.Options) *ca.Authority {
	t.Helper()
	a, err := ca.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

func rootPool(a *ca.Authority) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Certificate())
	return p
}

func TestNewRootFields(t *testing.T) {
	tests := []struct {
		name         string
		opts         ca.Options
		wantCN       string
		wantValidity time.Duration
	}{
		{"defaults", ca.Options{}, "Aileron session CA", 30 * 24 * time.Hour},
		{"custom", ca.Options{CommonName: "session s-1", Validity: 2 * time.Hour}, "session s-1", 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock(epoch())
			tt.opts.Now = clk.Now
			root := newCA(t, tt.opts).Certificate()
			if !root.IsCA || !root.BasicConstraintsValid {
				t.Errorf("IsCA=%v BasicConstraintsValid=%v, want both true", root.IsCA, root.BasicConstraintsValid)
			}
			if root.MaxPathLen != 0 || !root.MaxPathLenZero {
				t.Errorf("MaxPathLen=%d MaxPathLenZero=%v, want 0/true", root.MaxPathLen, root.MaxPathLenZero)
			}
			if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; root.KeyUsage != want {
				t.Errorf("KeyUsage = %v, want %v", root.KeyUsage, want)
			}
			if !root.NotBefore.Equal(epoch().Add(-time.Minute)) {
				t.Errorf("NotBefore = %v, want %v", root.NotBefore, epoch().Add(-time.Minute))
			}
			if !root.NotAfter.Equal(epoch().Add(tt.wantValidity)) {
				t.Errorf("NotAfter = %v, want %v", root.NotAfter, epoch().Add(tt.wantValidity))
			}
			if len(root.SubjectKeyId) == 0 {
				t.Error("SubjectKeyId is empty")
			}
			if root.Subject.CommonName != tt.wantCN {
				t.Errorf("CN = %q, want %q", root.Subject.CommonName, tt.wantCN)
			}
			pub, ok := root.PublicKey.(*ecdsa.PublicKey)
			if !ok || pub.Curve != elliptic.P256() {
				t.Errorf("public key %T, want ECDSA P-256", root.PublicKey)
			}
			if err := root.CheckSignatureFrom(root); err != nil {
				t.Errorf("root is not self-signed: %v", err)
			}
		})
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	tests := []struct {
		name string
		opts ca.Options
	}{
		{"negative validity", ca.Options{Validity: -time.Hour}},
		{"negative leaf validity", ca.Options{LeafValidity: -time.Hour}},
		{"negative cache size", ca.Options{CacheSize: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ca.New(tt.opts); !errors.Is(err, ca.ErrInvalidOptions) {
				t.Errorf("New error = %v, want ErrInvalidOptions", err)
			}
		})
	}
}

func TestCertPEMIsACopy(t *testing.T) {
	a := newCA(t, ca.Options{})
	p := a.CertPEM()
	p[0] = 'X'
	if a.CertPEM()[0] == 'X' {
		t.Error("CertPEM returned the internal buffer; modifying it changed the authority")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(a.CertPEM()) {
		t.Error("CertPEM is not a parsable PEM certificate")
	}
}

func TestSerialsAreLongAndUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := range 5 {
		a := newCA(t, ca.Options{})
		serials := []string{a.Certificate().SerialNumber.String()}
		// The contract is >= 120 bits; the implementation fixes the top bit, so
		// every serial has exactly 128 and a short one is caught at once.
		if n := a.Certificate().SerialNumber.BitLen(); n != 128 {
			t.Errorf("root %d serial has %d bits, want 128", i, n)
		}
		for _, host := range []string{"a.example", "b.example", "10.0.0.1", "c.example"} {
			c, err := a.Leaf(host)
			if err != nil {
				t.Fatalf("Leaf(%q): %v", host, err)
			}
			if n := c.Leaf.SerialNumber.BitLen(); n != 128 {
				t.Errorf("leaf %q serial has %d bits, want 128", host, n)
			}
			if c.Leaf.SerialNumber.Sign() <= 0 {
				t.Errorf("leaf %q serial %v is not positive", host, c.Leaf.SerialNumber)
			}
			serials = append(serials, c.Leaf.SerialNumber.String())
		}
		for _, s := range serials {
			if seen[s] {
				t.Errorf("serial %s issued twice", s)
			}
			seen[s] = true
		}
	}
}
