package ca_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
)

func TestLeafChainsToRootForItsHostOnly(t *testing.T) {
	tests := []struct {
		host   string
		verify string // name passed to x509.Verify
		other  string // a name the leaf must not be valid for
		wantIP bool
	}{
		{host: "api.example.com", verify: "api.example.com", other: "evil.example.com"},
		{host: "API.Example.COM.", verify: "api.example.com", other: "example.com"},
		{host: "xn--mnchen-3ya.de", verify: "xn--mnchen-3ya.de", other: "muenchen.de"},
		{host: "my_host.internal", verify: "my_host.internal", other: "myhost.internal"},
		{host: "127.0.0.1", verify: "127.0.0.1", other: "127.0.0.2", wantIP: true},
		{host: "2001:db8::1", verify: "2001:db8::1", other: "2001:db8::2", wantIP: true},
	}
	clk := newClock(epoch())
	a := newCA(t, ca.Options{Now: clk.Now})
	roots := rootPool(a)
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			c, err := a.Leaf(tt.host)
			if err != nil {
				t.Fatalf("Leaf: %v", err)
			}
			if len(c.Certificate) != 1 || c.Leaf == nil {
				t.Fatalf("chain has %d certificates and Leaf=%v, want exactly [leaf] with Leaf set",
					len(c.Certificate), c.Leaf)
			}
			opts := x509.VerifyOptions{
				DNSName:     tt.verify,
				Roots:       roots,
				CurrentTime: clk.Now(),
				KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			}
			if _, err := c.Leaf.Verify(opts); err != nil {
				t.Errorf("Verify(%q): %v", tt.verify, err)
			}
			opts.DNSName = tt.other
			var hostErr x509.HostnameError
			if _, err := c.Leaf.Verify(opts); !errors.As(err, &hostErr) {
				t.Errorf("Verify(%q) error = %v, want a HostnameError", tt.other, err)
			}
			if gotIP := len(c.Leaf.IPAddresses) == 1 && len(c.Leaf.DNSNames) == 0; gotIP != tt.wantIP {
				t.Errorf("SAN IPs=%v DNS=%v, want IP SAN: %v", c.Leaf.IPAddresses, c.Leaf.DNSNames, tt.wantIP)
			}
			checkLeafFields(t, a, c)
		})
	}
}

// checkLeafFields asserts the per-leaf invariants that do not depend on host.
func checkLeafFields(t *testing.T, a *ca.Authority, c *tls.Certificate) {
	t.Helper()
	l := c.Leaf
	if l.IsCA || !l.BasicConstraintsValid {
		t.Errorf("IsCA=%v BasicConstraintsValid=%v, want CA:FALSE", l.IsCA, l.BasicConstraintsValid)
	}
	if l.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("KeyUsage = %v, want DigitalSignature", l.KeyUsage)
	}
	if len(l.ExtKeyUsage) != 1 || l.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
		t.Errorf("ExtKeyUsage = %v, want [ServerAuth]", l.ExtKeyUsage)
	}
	if string(l.AuthorityKeyId) != string(a.Certificate().SubjectKeyId) {
		t.Errorf("AuthorityKeyId %x != root SubjectKeyId %x", l.AuthorityKeyId, a.Certificate().SubjectKeyId)
	}
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Fatalf("private key %T, want ECDSA P-256", c.PrivateKey)
	}
	if !key.PublicKey.Equal(l.PublicKey) {
		t.Error("private key does not match the leaf's public key")
	}
	if string(c.Certificate[0]) != string(l.Raw) {
		t.Error("Certificate[0] is not Leaf.Raw")
	}
}

func TestLeafValidityInsideCA(t *testing.T) {
	day := 24 * time.Hour
	tests := []struct {
		name          string
		caValidity    time.Duration
		leafValidity  time.Duration
		advance       time.Duration // clock step between New and Leaf
		wantNotAfter  time.Duration // offset from epoch()
		wantNotBefore time.Duration // offset from epoch()
	}{
		{"defaults", 0, 0, 0, 7 * day, -time.Minute},
		{"CA outlives leaf", 30 * day, 2 * day, 3 * day, 5 * day, 3*day - time.Minute},
		{"CA expires before leaf validity", time.Hour, 0, 0, time.Hour, -time.Minute},
		{"CA expires mid-leaf after a while", 10 * day, 7 * day, 5 * day, 10 * day, 5*day - time.Minute},
		{"clock stepped back inside the CA window", 0, 0, -30 * time.Second, 7*day - 30*time.Second, -time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock(epoch())
			a := newCA(t, ca.Options{Validity: tt.caValidity, LeafValidity: tt.leafValidity, Now: clk.Now})
			clk.Advance(tt.advance)
			c, err := a.Leaf("svc.example")
			if err != nil {
				t.Fatalf("Leaf: %v", err)
			}
			root, l := a.Certificate(), c.Leaf
			if l.NotBefore.Before(root.NotBefore) || l.NotAfter.After(root.NotAfter) {
				t.Errorf("leaf window [%v, %v] is not inside CA window [%v, %v]",
					l.NotBefore, l.NotAfter, root.NotBefore, root.NotAfter)
			}
			if want := epoch().Add(tt.wantNotAfter); !l.NotAfter.Equal(want) {
				t.Errorf("NotAfter = %v, want %v", l.NotAfter, want)
			}
			if want := epoch().Add(tt.wantNotBefore); !l.NotBefore.Equal(want) {
				t.Errorf("NotBefore = %v, want %v", l.NotBefore, want)
			}
		})
	}
}

func TestLeafSingleFlight(t *testing.T) {
	a := newCA(t, ca.Options{})
	const n = 100
	start := make(chan struct{})
	got := make([]*tls.Certificate, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i], errs[i] = a.Leaf("same.example.com")
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("caller %d got a different *tls.Certificate than caller 0", i)
		}
	}
	s := a.Stats()
	if s.Mints != 1 {
		t.Errorf("Mints = %d, want exactly 1 for %d concurrent callers", s.Mints, n)
	}
	if s.Hits+s.Misses != n {
		t.Errorf("Hits+Misses = %d+%d, want %d", s.Hits, s.Misses, n)
	}
}

func TestLeafCache(t *testing.T) {
	type step struct {
		host     string
		wantSame int // index of an earlier step whose pointer must be returned; -1 for a fresh mint
	}
	tests := []struct {
		name      string
		size      int
		steps     []step
		wantStats ca.Stats
	}{
		{"hit returns the cached pointer", 0,
			[]step{{"a.example", -1}, {"a.example", 0}, {"A.EXAMPLE.", 0}},
			ca.Stats{Hits: 2, Misses: 1, Mints: 1}},
		{"IP spellings share an entry", 0,
			[]step{{"2001:db8::1", -1}, {"2001:0db8:0:0::1", 0}},
			ca.Stats{Hits: 1, Misses: 1, Mints: 1}},
		{"size 2 evicts the least recently used", 2,
			[]step{{"a.example", -1}, {"b.example", -1}, {"c.example", -1}, {"a.example", -1}, {"c.example", 2}},
			ca.Stats{Hits: 1, Misses: 4, Mints: 4}},
		{"use refreshes recency", 2,
			[]step{{"a.example", -1}, {"b.example", -1}, {"a.example", 0},
				{"c.example", -1}, {"a.example", 0}, {"b.example", -1}},
			ca.Stats{Hits: 2, Misses: 4, Mints: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newCA(t, ca.Options{CacheSize: tt.size})
			var got []*tls.Certificate
			for i, s := range tt.steps {
				c, err := a.Leaf(s.host)
				if err != nil {
					t.Fatalf("step %d Leaf(%q): %v", i, s.host, err)
				}
				if s.wantSame >= 0 && c != got[s.wantSame] {
					t.Errorf("step %d Leaf(%q): not the pointer from step %d", i, s.host, s.wantSame)
				}
				for j := range got {
					if s.wantSame < 0 && c == got[j] {
						t.Errorf("step %d Leaf(%q): reused the pointer from step %d, want a fresh mint", i, s.host, j)
					}
				}
				got = append(got, c)
			}
			if s := a.Stats(); s != tt.wantStats {
				t.Errorf("Stats = %+v, want %+v", s, tt.wantStats)
			}
		})
	}
}

func TestLeafRenewsNearExpiry(t *testing.T) {
	clk := newClock(epoch())
	a := newCA(t, ca.Options{LeafValidity: 8 * time.Hour, Now: clk.Now})
	first, err := a.Leaf("r.example")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Hour) // 2h+1m of validity left: still outside the 1h margin
	if c, err := a.Leaf("r.example"); err != nil || c != first {
		t.Fatalf("after 6h: got a new leaf (err %v), want the cached one", err)
	}
	clk.Advance(90 * time.Minute) // 31m left: inside the margin
	second, err := a.Leaf("r.example")
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Fatal("leaf near expiry was served from the cache, want a re-mint")
	}
	if !second.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Errorf("re-minted NotAfter %v is not later than %v", second.Leaf.NotAfter, first.Leaf.NotAfter)
	}
	if s := a.Stats(); s.Mints != 2 {
		t.Errorf("Mints = %d, want 2", s.Mints)
	}
}

func TestLeafFailsOutsideCAWindow(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration
		wantMsg string
	}{
		{"expired", time.Hour, "expired"},
		{"clock stepped back", -time.Hour, "check the system clock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock(epoch())
			a := newCA(t, ca.Options{Validity: time.Hour, Now: clk.Now})
			if _, err := a.Leaf("x.example"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.advance)
			_, err := a.Leaf("x.example")
			if !errors.Is(err, ca.ErrCAExpired) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Leaf error = %v, want ErrCAExpired mentioning %q", err, tt.wantMsg)
			}
		})
	}
}

func TestLeafRejectsInvalidHosts(t *testing.T) {
	tests := []struct{ name, host, wantMsg string }{
		{"empty", "", "empty host"},
		{"space", "exa mple.com", "' '"},
		{"NUL", "ex\x00ample.com", `'\x00'`},
		{"port", "example.com:443", "':'"},
		{"brackets", "[::1]", "'['"},
		{"IPv6 zone", "fe80::1%eth0", "zone"},
		{"wildcard", "*.example.com", "'*'"},
		{"slash", "example.com/path", "'/'"},
		{"unicode", "münchen.de", "'ü'"},
		{"empty label", "a..example", "empty label"},
		{"only dot", ".", "empty label"},
		{"leading hyphen", "-a.example", "'-'"},
		{"long label", strings.Repeat("a", 64) + ".example", "63"},
		{"long name", strings.Repeat("abcdefghi.", 26), "253"},
	}
	a := newCA(t, ca.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := a.Leaf(tt.host)
			if !errors.Is(err, ca.ErrInvalidHost) || c != nil {
				t.Fatalf("Leaf(%q) = %v, %v; want nil and ErrInvalidHost", tt.host, c, err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
		})
	}
	if s := a.Stats(); s != (ca.Stats{}) {
		t.Errorf("invalid hosts touched the cache: %+v", s)
	}
}

func TestTLSHandshakeWithLeaf(t *testing.T) {
	a := newCA(t, ca.Options{})
	tests := []struct {
		name    string
		sni     string
		roots   *x509.CertPool
		wantErr bool
	}{
		{"trusting only the session root", "api.example.com", rootPool(a), false},
		{"trusting another root", "api.example.com", rootPool(newCA(t, ca.Options{})), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srvConn, cliConn := tcpPair(t)
			srv := tls.Server(srvConn, &tls.Config{
				GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return a.Leaf(h.ServerName) },
			})
			cli := tls.Client(cliConn, &tls.Config{RootCAs: tt.roots, ServerName: tt.sni, MinVersion: tls.VersionTLS12})
			srvErr := make(chan error, 1)
			go func() { srvErr <- srv.HandshakeContext(t.Context()) }()
			err := cli.HandshakeContext(t.Context())
			cliConn.Close()
			<-srvErr
			if tt.wantErr {
				var unknown x509.UnknownAuthorityError
				if !errors.As(err, &unknown) {
					t.Fatalf("client handshake error = %v, want UnknownAuthorityError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("client handshake: %v", err)
			}
			peers := cli.ConnectionState().PeerCertificates
			if len(peers) != 1 || len(peers[0].DNSNames) != 1 || peers[0].DNSNames[0] != tt.sni {
				t.Errorf("server presented %d certificates, first for %v; want [leaf for %q]",
					len(peers), peers[0].DNSNames, tt.sni)
			}
		})
	}
}

// tcpPair returns the two ends of a loopback TCP connection. Unlike net.Pipe,
// TCP buffers writes, so a client sending an alert while the server is still
// flushing its handshake flight cannot deadlock.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acceptErr := make(chan error, 1)
	go func() {
		var err error
		server, err = ln.Accept()
		acceptErr <- err
	}()
	client, dialErr := net.Dial("tcp", ln.Addr().String())
	if err := <-acceptErr; err != nil || dialErr != nil {
		t.Fatalf("loopback connection: accept: %v, dial: %v", err, dialErr)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func BenchmarkLeafHit(b *testing.B) {
	a := newCA(b, ca.Options{})
	if _, err := a.Leaf("bench.example.com"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Leaf("bench.example.com"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkLeafMint(b *testing.B) {
	a := newCA(b, ca.Options{CacheSize: 1})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := a.Leaf(fmt.Sprintf("h%d.example.com", i)); err != nil {
			b.Fatal(err)
		}
	}
}
