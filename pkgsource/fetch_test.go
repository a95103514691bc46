package pkgsource

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
)

// standIn is an HTTPS server on loopback standing in for a publisher's
// release host, reached as host:443 through the guard's resolve map.
type standIn struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newStandIn(t *testing.T, h http.HandlerFunc) *standIn {
	t.Helper()
	s := &standIn{}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// addr is the stand-in's loopback address.
func (s *standIn) addr() netip.AddrPort {
	return netip.MustParseAddrPort(s.srv.Listener.Addr().String())
}

// fetcher reaches the stand-in as example.com:443 (a name its certificate
// holds) and trusts its certificate; allow lets the guard dial loopback.
func (s *standIn) fetcher(allow bool) *Fetcher {
	g := &dataplane.Guard{Resolve: map[string]netip.AddrPort{"example.com:443": s.addr()}}
	if allow {
		g.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.srv.Certificate())
	return &Fetcher{Guard: g, RootCAs: pool}
}

func TestFetcherUnpacksAnHTTPSArchive(t *testing.T) {
	body := archive(t, entry{name: "gmail-1.2.3/" + spec, body: "{}"})
	s := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old":
			http.Redirect(w, r, "https://example.com/pkg.tar.gz", http.StatusFound)
			return
		case "/encoded": // a server that labels a .tar.gz as gzip-encoded: the bytes are still the archive
			w.Header().Set("Content-Encoding", "gzip")
		}
		_, _ = w.Write(body)
	})
	for _, u := range []string{"https://example.com/pkg.tar.gz", "https://example.com/old", "https://example.com/encoded"} {
		dir := filepath.Join(t.TempDir(), "pkg")
		root, err := s.fetcher(true).Unpack(context.Background(), u, dir)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if b, err := os.ReadFile(filepath.Join(root, spec)); err != nil || string(b) != "{}" {
			t.Errorf("%s: spec %q, %v", u, b, err)
		}
	}
}

// Every fetch that would weaken TLS, leave https or pass the SSRF guard is
// refused, and an http URL is refused before anything is sent.
func TestFetcherRefuses(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the plain http server got %s %s", r.Method, r.URL)
	}))
	defer plain.Close()
	big := archive(t, entry{name: spec, body: strings.Repeat("x", 4000)})
	s := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-http":
			http.Redirect(w, r, plain.URL+"/pkg.tar.gz", http.StatusFound)
		case "/missing":
			http.NotFound(w, r)
		case "/broken":
			http.Error(w, "down", http.StatusBadGateway)
		case "/big":
			_, _ = w.Write(big)
		}
	})
	untrusted := s.fetcher(true)
	untrusted.RootCAs = x509.NewCertPool()
	small := s.fetcher(true)
	small.MaxSize = 64
	for _, c := range []struct {
		name string
		f    *Fetcher
		url  string
		is   error
		want string
	}{
		{"plain http", s.fetcher(true), plain.URL + "/pkg.tar.gz", nil, "is plain http; packages are fetched over https only"},
		{"redirect to http", s.fetcher(true), "https://example.com/to-http", nil, "is plain http"},
		{"credentials in the URL", s.fetcher(true), "https://u:p@example.com/x.tar.gz", nil, "carries a user name or password"},
		{"not a URL", s.fetcher(true), "ftp://example.com/x.tar.gz", nil, "is not an https URL"},
		{"loopback without egress.allow_cidrs", s.fetcher(false), "https://example.com/pkg.tar.gz", dataplane.ErrPrivateAddress, "loopback"},
		{"untrusted certificate", untrusted, "https://example.com/pkg.tar.gz", nil,
			"fetching https://example.com/pkg.tar.gz: tls: failed to verify certificate: x509: certificate signed by unknown authority; " +
				"if this source is meant to be trusted, add its root certificate to upstream.ca_files"},
		{"404", s.fetcher(true), "https://example.com/missing", ErrNotFound, "404"},
		{"502", s.fetcher(true), "https://example.com/broken", nil, "the server answered 502"},
		{"too big", small, "https://example.com/big", ErrInvalidArchive, "larger than 64 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.f.Unpack(context.Background(), c.url, filepath.Join(t.TempDir(), "pkg"))
			if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("err = %v, want one naming %q (is %v)", err, c.want, c.is)
			}
			if n := strings.Count(err.Error(), c.url); n > 1 && !strings.Contains(err.Error(), "redirected from "+c.url) {
				t.Errorf("err = %v names %s %d times, want once", err, c.url, n)
			}
		})
	}
	if n := s.hits.Load(); n != 4 {
		t.Errorf("the stand-in got %d requests, want 4 (none for the refused URLs)", n)
	}
}

// A source that sends part of an archive and then stalls is cut off at the
// fetch's time bound (the read then fails as the deadline or as the cut
// connection, whichever the transport sees first); without the bound the
// test would hang.
func TestFetcherBoundsTime(t *testing.T) {
	body := archive(t, entry{name: spec, body: strings.Repeat("x", 10000)})
	s := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	f := s.fetcher(true)
	f.Timeout = 300 * time.Millisecond
	_, err := f.Unpack(context.Background(), "https://example.com/pkg.tar.gz", filepath.Join(t.TempDir(), "pkg"))
	if !errors.Is(err, ErrInvalidArchive) {
		t.Fatalf("err = %v, want the fetch cut off at its deadline", err)
	}
}
