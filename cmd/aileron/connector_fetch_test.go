package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/store"
)

const (
	googleRef      = "github://acme/aileron-connector-google@1.2.3"
	googleManifest = "[connector]\nname = \"github://acme/aileron-connector-google\"\nversion = \"1.2.3\"\n" +
		"[capabilities.network]\nhosts = [\"gmail.googleapis.com:443\"]\n[capabilities.credential]\nkind = \"oauth2\"\n"
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name, body, link string
	typ              byte
}

// tarGz builds a gzip'd tar of entries (regular files unless typ says).
func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o644, Linkname: e.link}
		if e.typ == 0 {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// googlePackage is the gmail package (spec and manifest) as an archive
// with one top-level directory, as a release would ship it.
func googlePackage(t *testing.T, spec string) []byte {
	t.Helper()
	return tarGz(t,
		tarEntry{name: "aileron-connector-google-1.2.3/", typ: tar.TypeDir},
		tarEntry{name: "aileron-connector-google-1.2.3/aileron.connector.v1.json", body: spec},
		tarEntry{name: "aileron-connector-google-1.2.3/manifest.toml", body: googleManifest})
}

func gmailSpec(t *testing.T) string {
	return mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "gmail.json"))
}

var installedLine = regexp.MustCompile(`(?m)^installed (\S+) sha256:([0-9a-f]{64})$`)

// installedRef returns the reference and hash `connector install` printed.
func installedRef(t *testing.T, out string) (ref, hash string) {
	t.Helper()
	m := installedLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no `installed REF sha256:HEX` line in:\n%s", out)
	}
	return m[1], m[2]
}

func putFile(t *testing.T, p string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// An archive installs as the same package as its unpacked directory, and
// --expect pins that hash: right installs, wrong refuses naming both.
func TestConnectorInstallArchiveAndExpect(t *testing.T) {
	spec := gmailSpec(t)
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "aileron.connector.v1.json"), []byte(spec))
	putFile(t, filepath.Join(dir, "manifest.toml"), []byte(googleManifest))
	code, out, errOut := runCLI(t, t.TempDir(), "connector", "install", "--yes", dir)
	if code != 0 {
		t.Fatalf("install dir: exit %d\n%s%s", code, out, errOut)
	}
	_, dirHash := installedRef(t, out)
	arch := putFile(t, filepath.Join(t.TempDir(), "google-1.2.3.tar.gz"), googlePackage(t, spec))
	wrong := "sha256:" + strings.Repeat("0", 64)

	home := t.TempDir()
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", "--expect", wrong, arch)
	if code != 1 || !strings.Contains(errOut, "has hash sha256:"+dirHash) || !strings.Contains(errOut, "--expect wants "+wrong) || !strings.Contains(errOut, "nothing was installed") {
		t.Errorf("wrong --expect: exit %d\n%s%s", code, out, errOut)
	}
	if _, out, _ := runCLI(t, home, "connector", "list"); strings.Contains(out, "aileron-connector-google") {
		t.Errorf("a package refused by --expect is listed:\n%s", out)
	}
	for _, args := range [][]string{{arch}, {"--expect", "sha256:" + dirHash, arch}, {"--expect", "sha256:" + dirHash, dir}} {
		code, out, errOut = runCLI(t, home, append([]string{"connector", "install", "--yes"}, args...)...)
		if code != 0 {
			t.Fatalf("install %v: exit %d\n%s%s", args, code, out, errOut)
		}
		if ref, hash := installedRef(t, out); ref != googleRef || hash != dirHash {
			t.Errorf("install %v: %s sha256:%s, want %s sha256:%s", args, ref, hash, googleRef, dirHash)
		}
		if len(args) > 1 && !strings.Contains(out, "hash matches --expect") {
			t.Errorf("install %v does not say the hash matched:\n%s", args, out)
		}
	}
	if code, _, errOut = runCLI(t, home, "connector", "install", "--yes", "--expect", wrong, dir); code != 1 || !strings.Contains(errOut, "has hash sha256:"+dirHash) {
		t.Errorf("wrong --expect on a directory: exit %d\n%s", code, errOut)
	}
	if code, _, errOut = runCLI(t, home, "connector", "install", "--yes", "--expect", "sha256:ABC", arch); code != 2 || !strings.Contains(errOut, "64 lower-case hex digits") {
		t.Errorf("malformed --expect: exit %d\n%s", code, errOut)
	}
	if entries, _ := filepath.Glob(filepath.Join(home, "fetch-*")); len(entries) != 0 {
		t.Errorf("work directories left in the home: %v", entries)
	}
}

// A hostile archive is refused naming what is wrong, and installs nothing.
func TestConnectorInstallHostileArchive(t *testing.T) {
	for name, c := range map[string]struct {
		entries []tarEntry
		want    string
	}{
		"symlink":   {[]tarEntry{{name: "aileron.connector.v1.json", typ: tar.TypeSymlink, link: "/etc/passwd"}}, `"aileron.connector.v1.json" is a symlink`},
		"traversal": {[]tarEntry{{name: "aileron.connector.v1.json", body: gmailSpec(t)}, {name: "../../evil", body: "x"}}, `has a ".." element`},
	} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			arch := putFile(t, filepath.Join(t.TempDir(), "p.tar.gz"), tarGz(t, c.entries...))
			code, out, errOut := runCLI(t, home, "connector", "install", "--yes", arch)
			if code != 1 || !strings.Contains(errOut, "invalid package archive") || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d\n%s%s\nwant a refusal naming %q", code, out, errOut, c.want)
			}
			if _, out, _ := runCLI(t, home, "connector", "list"); strings.Contains(out, "aileron-connector-google") {
				t.Errorf("listed:\n%s", out)
			}
		})
	}
}

// releaseHost is a stand-in for a publisher's release host: HTTPS on
// loopback with the committed test PKI, reached as other.example.com
// through upstream.resolve, as the daemon's own upstreams are.
type releaseHost struct {
	srv   *httptest.Server
	files map[string][]byte
	hits  atomic.Int64
}

func newReleaseHost(t *testing.T, files map[string][]byte) *releaseHost {
	t.Helper()
	pki := filepath.Join("..", "..", "integration", "testdata", "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "server.pem"), filepath.Join(pki, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	h := &releaseHost{files: files}
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		if to, ok := strings.CutPrefix(r.URL.Path, "/redirect/"); ok {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		b, ok := h.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	h.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	h.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the point
	h.srv.StartTLS()
	t.Cleanup(h.srv.Close)
	return h
}

// config writes a config file that reaches the release host as
// other.example.com:443 and trusts the test root; allow lets the SSRF
// guard dial loopback; extra is appended.
func (h *releaseHost) config(t *testing.T, allow bool, extra string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "integration", "testdata", "pki", "root.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("upstream:\n  resolve: {\"other.example.com:443\": %q}\n  ca_files: [%q]\n", h.srv.Listener.Addr().String(), root)
	if allow {
		cfg += "egress:\n  allow_cidrs: [127.0.0.1/32]\n"
	}
	return putFile(t, filepath.Join(t.TempDir(), "aileron.yaml"), []byte(cfg+extra))
}

const googleAsset = "/acme/aileron-connector-google/releases/download/v1.2.3/aileron-connector-google-1.2.3.tar.gz"

// connector install fetches an https URL through the SSRF guard with the
// configured roots, and refuses plain http, a redirect to it, and an
// address the guard does not allow.
func TestConnectorInstallURL(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the plain http server got %s %s", r.Method, r.URL)
	}))
	defer plain.Close()
	h := newReleaseHost(t, map[string][]byte{"/pkg.tar.gz": googlePackage(t, gmailSpec(t))})
	cfg := h.config(t, true, "")
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", "--config", cfg, "https://other.example.com/pkg.tar.gz")
	if code != 0 || !strings.Contains(out, "from https://other.example.com/pkg.tar.gz") {
		t.Fatalf("install URL: exit %d\n%s%s", code, out, errOut)
	}
	if ref, _ := installedRef(t, out); ref != googleRef {
		t.Errorf("installed %s, want %s", ref, googleRef)
	}
	for _, c := range []struct {
		name, cfg, url, want string
	}{
		{"plain http", cfg, plain.URL + "/pkg.tar.gz", "is plain http; packages are fetched over https only"},
		{"redirect to http", cfg, "https://other.example.com/redirect/" + plain.URL + "/pkg.tar.gz", "is plain http"},
		{"loopback not allowed", h.config(t, false, ""), "https://other.example.com/pkg.tar.gz", "add it to egress.allow_cidrs"},
		{"root not trusted", putFile(t, filepath.Join(t.TempDir(), "c.yaml"), []byte("upstream:\n  resolve: {\"other.example.com:443\": \""+h.srv.Listener.Addr().String()+"\"}\negress:\n  allow_cidrs: [127.0.0.1/32]\n")),
			"https://other.example.com/pkg.tar.gz", "certificate"},
		{"missing", cfg, "https://other.example.com/nope.tar.gz", "404"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			code, out, errOut := runCLI(t, home, "connector", "install", "--yes", "--config", c.cfg, c.url)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d\n%s%s\nwant a refusal naming %q", code, out, errOut, c.want)
			}
		})
	}
}

// FQN@VERSION is looked up in store.sources in order: a github-style
// release host and a local mirror; a package that is another connector or
// version than asked is refused; a miss names every place tried.
func TestConnectorInstallRef(t *testing.T) {
	spec := gmailSpec(t)
	other := strings.Replace(spec, `"version": "1.2.3"`, `"version": "1.2.4"`, 1)
	h := newReleaseHost(t, map[string][]byte{
		googleAsset: googlePackage(t, spec),
		"/acme/aileron-connector-google/releases/download/v2.0.0/aileron-connector-google-2.0.0.tar.gz": googlePackage(t, other),
	})
	mirror := t.TempDir()
	putFile(t, filepath.Join(mirror, "github", "acme", "aileron-connector-google", "1.2.3.tar.gz"), googlePackage(t, spec))
	sources := fmt.Sprintf("store:\n  sources:\n    - {authority: gitlab, base_url: 'https://other.example.com'}\n"+
		"    - {authority: github, base_url: 'https://other.example.com'}\n    - {mirror: %q}\n", mirror)
	cfg := h.config(t, true, sources)

	code, out, errOut := runCLI(t, t.TempDir(), "connector", "install", "--yes", "--config", cfg, googleRef)
	if code != 0 || !strings.Contains(out, "from https://other.example.com"+googleAsset) {
		t.Fatalf("install %s: exit %d\n%s%s", googleRef, code, out, errOut)
	}
	if ref, _ := installedRef(t, out); ref != googleRef {
		t.Errorf("installed %s, want %s", ref, googleRef)
	}
	mirrorOnly := putFile(t, filepath.Join(t.TempDir(), "m.yaml"), []byte(fmt.Sprintf("store:\n  sources:\n    - {mirror: %q}\n", mirror)))
	code, out, errOut = runCLI(t, t.TempDir(), "connector", "install", "--yes", "--config", mirrorOnly, googleRef)
	if code != 0 || !strings.Contains(out, "from "+filepath.Join(mirror, "github", "acme", "aileron-connector-google", "1.2.3.tar.gz")) {
		t.Fatalf("install from the mirror: exit %d\n%s%s", code, out, errOut)
	}

	home := t.TempDir()
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", "--config", cfg, "github://acme/aileron-connector-google@2.0.0")
	if code != 1 || !strings.Contains(errOut, "the package fetched for github://acme/aileron-connector-google@2.0.0 is github://acme/aileron-connector-google@1.2.4; refused") {
		t.Errorf("another version: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, home, "connector", "install", "--yes", "--config", cfg, "github://acme/aileron-connector-google@9.0.0")
	for _, want := range []string{
		"github://acme/aileron-connector-google@9.0.0: not found in store.sources; tried:",
		"gitlab https://other.example.com (serves no github:// FQN)",
		"https://other.example.com/acme/aileron-connector-google/releases/download/v9.0.0/aileron-connector-google-9.0.0.tar.gz",
		filepath.Join(mirror, "github", "acme", "aileron-connector-google", "9.0.0.tar.gz"),
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("a miss: exit %d\n%s%s\nwant it to name %q", code, out, errOut, want)
		}
	}
	if _, out, _ := runCLI(t, home, "connector", "list"); strings.Contains(out, "aileron-connector-google") {
		t.Errorf("a refused package is listed:\n%s", out)
	}
	if code, _, errOut = runCLI(t, home, "connector", "install", "--yes", "github://acme/aileron-connector-google@latest"); code != 2 || !strings.Contains(errOut, "latest") {
		t.Errorf("a bad reference: exit %d\n%s", code, errOut)
	}
}

// --expect on a spec file is checked against the package the file makes
// (the spec alone), as on a directory and a spec on stdin: the hash the
// daemon offers, which the consent names; a wrong one installs nothing; a
// link in the directory is refused as the store refuses it.
func TestConnectorInstallExpectLocal(t *testing.T) {
	linear := filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json")
	home := t.TempDir()
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", linear)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
	_, hash := installedRef(t, out)
	if code, out, errOut = runCLI(t, t.TempDir(), "connector", "install", "--yes", "--expect", "sha256:"+hash, linear); code != 0 || !strings.Contains(out, "hash matches --expect") {
		t.Errorf("--expect on a spec file: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "aileron.connector.v1.json"), []byte(mustRead(t, linear)))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut = runCLI(t, t.TempDir(), "connector", "install", "--yes", "--expect", "sha256:"+hash, dir); code != 1 || !strings.Contains(errOut, "link is a symlink") {
		t.Errorf("a symlink in the directory: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("AILERON_HOME", t.TempDir())
	spec := mustRead(t, linear)
	if code, out, errOut = providerCLI(spec, "connector", "install", "--yes", "--expect", "sha256:"+strings.Repeat("0", 64), "-"); code != 1 ||
		!strings.Contains(errOut, "the package from stdin has hash sha256:"+hash) || !strings.Contains(errOut, "nothing was installed") {
		t.Errorf("a spec on stdin with a wrong --expect: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = providerCLI("", "connector", "list"); strings.Contains(out, "linear") {
		t.Errorf("a spec refused by --expect is listed:\n%s", out)
	}
	if code, out, errOut = providerCLI(spec, "connector", "install", "--yes", "--expect", "sha256:"+hash, "-"); code != 0 || !strings.Contains(out, "hash matches --expect") {
		t.Errorf("a spec on stdin with --expect: exit %d\n%s%s", code, out, errOut)
	}
}

// A signed package travels in its archive: fetched for FQN@VERSION from a
// mirror, its signature verifies against the trust store, and --expect
// pins the hash the signature signs (which leaves the signature out).
func TestConnectorInstallSignedArchive(t *testing.T) {
	home, keys := t.TempDir(), t.TempDir()
	alice := testkit.NewSSHKey(t, keys, "alice", "ed25519")
	pkg := t.TempDir()
	putFile(t, filepath.Join(pkg, store.SpecFileName), []byte(gmailSpec(t)))
	putFile(t, filepath.Join(pkg, "manifest.toml"), []byte(googleManifest))
	hash, err := store.HashPackage(pkg)
	if err != nil {
		t.Fatal(err)
	}
	sig := testkit.SSHSign(t, alice, signing.Namespace, signing.Statement("github://acme/aileron-connector-google", "1.2.3", hash))
	signers := testkit.WriteFile(t, keys, "acme.allowed_signers", []byte("alice@acme "+alice.Public+"\n"))
	if code, out, errOut := runCLI(t, home, "trust", "add", "github://acme", "--signers", signers); code != 0 {
		t.Fatalf("trust add: exit %d\n%s%s", code, out, errOut)
	}
	mirror := t.TempDir()
	putFile(t, filepath.Join(mirror, "github", "acme", "aileron-connector-google", "1.2.3.tar.gz"), tarGz(t,
		tarEntry{name: "p/" + store.SpecFileName, body: gmailSpec(t)},
		tarEntry{name: "p/manifest.toml", body: googleManifest},
		tarEntry{name: "p/" + store.SignatureFileName, body: string(sig)}))
	cfg := putFile(t, filepath.Join(t.TempDir(), "aileron.yaml"), []byte(fmt.Sprintf("store:\n  sources: [{mirror: %q}]\n", mirror)))
	code, out, errOut := runCLI(t, home, "connector", "install", "--yes", "--config", cfg, "--expect", "sha256:"+hash, googleRef)
	if code != 0 || !strings.Contains(out, "signed by github://acme (") || !strings.Contains(out, "hash matches --expect") {
		t.Fatalf("install: exit %d\n%s%s", code, out, errOut)
	}
}

// A package archive on stdin (a container image without a shell: docker
// exec -i aileron aileron connector install - < pkg.tar.gz) installs like
// the file, --expect included; a spec's JSON on stdin still installs.
func TestConnectorInstallStdinArchive(t *testing.T) {
	t.Setenv("AILERON_HOME", t.TempDir())
	arch := string(googlePackage(t, gmailSpec(t)))
	code, out, errOut := providerCLI(arch, "connector", "install", "--yes", "-")
	if code != 0 || !strings.Contains(out, "from stdin") {
		t.Fatalf("archive on stdin: exit %d\n%s%s", code, out, errOut)
	}
	ref, hash := installedRef(t, out)
	if ref != googleRef {
		t.Errorf("installed %s, want %s", ref, googleRef)
	}
	if code, out, errOut = providerCLI(arch, "connector", "install", "--yes", "--expect", "sha256:"+hash, "-"); code != 0 || !strings.Contains(out, "hash matches --expect") {
		t.Errorf("archive on stdin with --expect: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut = providerCLI(arch, "connector", "install", "--yes", "--expect", "sha256:"+strings.Repeat("0", 64), "-"); code != 1 || !strings.Contains(errOut, "the package from stdin has hash sha256:"+hash) {
		t.Errorf("archive on stdin with a wrong --expect: exit %d\n%s%s", code, out, errOut)
	}
	linear := mustRead(t, filepath.Join("..", "..", "policy", "testdata", "specs", "linear.json"))
	if code, out, errOut = providerCLI(linear, "connector", "install", "--yes", "-"); code != 0 || !strings.Contains(out, "installed github://acme/aileron-connector-linear@1.2.3") {
		t.Errorf("spec on stdin: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = providerCLI(string(tarGz(t, tarEntry{name: "x", typ: tar.TypeSymlink, link: "/etc/passwd"})), "connector", "install", "--yes", "-"); code != 1 || !strings.Contains(errOut, `"x" is a symlink`) {
		t.Errorf("a hostile archive on stdin: exit %d\n%s", code, errOut)
	}
}

// A path that is a FIFO is refused as the store refuses it, without
// opening it (which would wait for a writer for ever).
func TestConnectorInstallFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, t.TempDir(), "connector", "install", "--yes", p); code != 1 || !strings.Contains(errOut, "is neither a spec file nor a package directory") {
		t.Errorf("exit %d\n%s%s", code, out, errOut)
	}
}

// A package fetched from an https URL is nobody's own: naming itself
// local:// does not exempt it from store.require_signature, while the same
// package installed from a directory is exempt.
func TestConnectorInstallURLLocalNotExempt(t *testing.T) {
	spec := strings.Replace(gmailSpec(t), `"fqn": "github://acme/aileron-connector-google"`, `"fqn": "local://me/google"`, 1)
	h := newReleaseHost(t, map[string][]byte{"/pkg.tar.gz": tarGz(t, tarEntry{name: "p/" + store.SpecFileName, body: spec})})
	for _, c := range []struct {
		name, extra, want string
	}{
		{"require_signature", "store:\n  require_signature: true\n", "fetched from https://other.example.com/pkg.tar.gz"},
		{"without it", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := h.config(t, true, c.extra)
			code, out, errOut := runCLI(t, t.TempDir(), "connector", "install", "--yes", "--config", cfg, "https://other.example.com/pkg.tar.gz")
			if c.want == "" {
				if code != 0 || !strings.Contains(out, "installed local://me/google@1.2.3") || !strings.Contains(out, "unsigned") {
					t.Fatalf("exit %d\n%s%s", code, out, errOut)
				}
				return
			}
			if code == 0 || !strings.Contains(errOut, "store.require_signature is on") || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d\n%s%s\nwant a refusal naming require_signature and %q", code, out, errOut, c.want)
			}
			dir := t.TempDir()
			putFile(t, filepath.Join(dir, store.SpecFileName), []byte(spec))
			if code, out, errOut := runCLI(t, t.TempDir(), "connector", "install", "--yes", "--config", cfg, dir); code != 0 {
				t.Fatalf("the same package from a directory: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// connector statement of a package archive is the statement of the package
// it holds (what install will hash), the same as of its files in a
// directory; an archive install would refuse is refused.
func TestConnectorStatementArchive(t *testing.T) {
	home := t.TempDir()
	pkg := t.TempDir()
	putFile(t, filepath.Join(pkg, store.SpecFileName), []byte(gmailSpec(t)))
	putFile(t, filepath.Join(pkg, "manifest.toml"), []byte(googleManifest))
	hash, err := store.HashPackage(pkg)
	if err != nil {
		t.Fatal(err)
	}
	want := string(signing.Statement("github://acme/aileron-connector-google", "1.2.3", hash))
	arch := putFile(t, filepath.Join(t.TempDir(), "google-1.2.3.tar.gz"), googlePackage(t, gmailSpec(t)))
	for _, arg := range []string{pkg, arch} {
		if code, out, errOut := runCLI(t, home, "connector", "statement", arg); code != 0 || out != want || errOut != "" {
			t.Errorf("connector statement %s: exit %d\n%s%s\nwant:\n%s", arg, code, out, errOut, want)
		}
	}
	// A git checkout: its .git is hashed too, and the publisher is told.
	putFile(t, filepath.Join(pkg, ".git", "HEAD"), []byte("ref: refs/heads/main\n"))
	if code, out, errOut := runCLI(t, home, "connector", "statement", pkg); code != 0 || out == want ||
		!strings.Contains(errOut, "note: the package hash covers "+filepath.Join(pkg, ".git")+" too") {
		t.Errorf("connector statement of a checkout: exit %d\n%s%s", code, out, errOut)
	}
	hostile := putFile(t, filepath.Join(t.TempDir(), "link.tar.gz"), tarGz(t,
		tarEntry{name: store.SpecFileName, body: gmailSpec(t)},
		tarEntry{name: "manifest.toml", typ: tar.TypeSymlink, link: "/etc/passwd"}))
	if code, out, errOut := runCLI(t, home, "connector", "statement", hostile); code != 1 || !strings.Contains(errOut, "manifest.toml") || out != "" {
		t.Errorf("connector statement of an archive with a link: exit %d\n%s%s", code, out, errOut)
	}
}
