package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/store"
)

// A running daemon installs a connector the CLI fetched for FQN@VERSION
// from a github-style release host (a stand-in on 127.0.0.2 with the test
// PKI, reached through upstream.resolve and egress.allow_cidrs as the
// daemon's upstreams are), pinned by --expect; the wrong hash installs
// nothing.
func TestFetchInstallFromRelease(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join(theSuite.root, "policy", "testdata", "specs", "linear.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	if err := os.WriteFile(filepath.Join(pkg, store.SpecFileName), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	hash, err := store.HashPackage(pkg)
	if err != nil {
		t.Fatal(err)
	}
	const asset = "/acme/aileron-connector-linear/releases/download/v1.2.3/aileron-connector-linear-1.2.3.tar.gz"
	addr := serveRelease(t, map[string][]byte{asset: tarGzOf(t, "aileron-connector-linear-1.2.3/"+store.SpecFileName, spec)})

	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["other.example.com:443"] = addr
	cfg["store"] = map[string]any{"sources": []any{map[string]any{"authority": "github", "base_url": "https://other.example.com"}}}
	d := theSuite.startTestDaemon(t, cfg, nil)
	cfgPath := filepath.Join(d.home, "config.yaml")
	const ref = "github://acme/aileron-connector-linear@1.2.3"

	out, errOut, err := d.run(t.Context(), "connector", "install", "--config", cfgPath, "--expect", "sha256:"+strings.Repeat("a", 64), ref)
	if err == nil || !strings.Contains(errOut, "has hash sha256:"+hash) {
		t.Fatalf("wrong --expect: err %v\n%s%s", err, out, errOut)
	}
	out = d.cli(t, "connector", "install", "--config", cfgPath, "--expect", "sha256:"+hash, ref)
	if first, _, _ := strings.Cut(out, "\n"); first != "installed "+ref+" sha256:"+hash || !strings.Contains(out, "from https://other.example.com"+asset) {
		t.Errorf("install printed:\n%s", out)
	}
	var list []store.Installed
	if err := json.Unmarshal([]byte(d.cli(t, "connector", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Ref() != ref || list[0].Hash != hash || !list[0].Active {
		t.Errorf("the daemon lists %+v, want %s sha256:%s active", list, ref, hash)
	}
	if left, _ := filepath.Glob(filepath.Join(d.home, "fetch-*")); len(left) != 0 {
		t.Errorf("work directories left in the home: %v", left)
	}
}

// serveRelease serves files over HTTPS on 127.0.0.2 with the test PKI's
// server certificate, until t ends, and returns its address.
func serveRelease(t *testing.T, files map[string][]byte) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(theSuite.pkiDir, "server.pem"), filepath.Join(theSuite.pkiDir, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if b, ok := files[r.URL.Path]; ok {
				_, _ = w.Write(b)
				return
			}
			http.NotFound(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// tarGzOf is a gzip'd tar holding one file.
func tarGzOf(t *testing.T, name string, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
