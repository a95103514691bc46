package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The credential tests run against their own daemon (bindings and vault
// entries would change what the shared daemon's tests see) and their own
// fake upstream, which records every request it receives in full so a test
// can prove what did, and did not, reach "the internet".

const (
	linearFQN = "github://acme/aileron-connector-linear"
	gmailFQN  = "github://acme/aileron-connector-google"
	bearerFQN = "local://test/cred-bearer"
	queryFQN  = "local://test/cred-query"
	basicFQN  = "local://test/cred-basic"
	lifeFQN   = "local://test/cred-life"
	sigv4FQN  = "local://test/cred-sigv4"
)

// credHostNames are the names the credential upstream answers for.
func credHostNames() []string {
	return []string{"api.linear.app", "gmail.googleapis.com", "bearer.example.com", "query.example.com",
		"basic.example.com", "life.example.com", "s3.us-east-1.amazonaws.com", "other.example.com",
		"oauth2.example.com", "passthrough.example.org"}
}

// credEnv is the credential tests' daemon, upstream and client scripts.
type credEnv struct {
	d       *daemon
	up      *credUpstream
	roots   *x509.CertPool // the upstream's runtime root
	scripts string         // directory holding client.py and client.js
}

// credDaemon starts (once) the credential daemon with every credential
// spec installed and every credential host resolved to the credential
// upstream, whose runtime root the daemon trusts.
func (s *suite) credDaemon(t *testing.T) *credEnv {
	t.Helper()
	s.credOnce.Do(func() { s.cred, s.credErr = s.startCredEnv() })
	if s.credErr != nil {
		t.Fatalf("credential daemon: %v", s.credErr)
	}
	s.cred.d.logOnFailure(t)
	return s.cred
}

func (s *suite) startCredEnv() (*credEnv, error) {
	dir, err := os.MkdirTemp(s.work, "cred-")
	if err != nil {
		return nil, err
	}
	cert, rootPath, roots, err := newRuntimePKI(dir, credHostNames())
	if err != nil {
		return nil, err
	}
	up, err := startCredUpstream(cert, &s.secrets)
	if err != nil {
		return nil, err
	}
	e := &credEnv{up: up, roots: roots, scripts: dir}
	if err := os.WriteFile(filepath.Join(dir, "client.py"), []byte(credClientPy), 0o600); err != nil {
		return e, err
	}
	if err := os.WriteFile(filepath.Join(dir, "client.js"), []byte(credClientJS), 0o600); err != nil {
		return e, err
	}
	res := map[string]string{}
	for _, h := range credHostNames() {
		res[h+":443"] = up.Addr
	}
	cfg := map[string]any{
		"proxy": map[string]any{"listen": "127.0.0.1:0",
			"passthrough": []any{map[string]any{"host": "passthrough.example.org", "port": 443}}},
		"upstream": map[string]any{"resolve": res, "ca_files": []string{rootPath}},
		"egress":   map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
		"log":      map[string]any{"level": "debug"},
	}
	if e.d, err = s.startDaemon(cfg, nil); err != nil {
		return e, err
	}
	specs := []string{filepath.Join(s.root, "policy", "testdata", "specs", "linear.json"),
		filepath.Join(s.root, "policy", "testdata", "specs", "gmail.json"),
		filepath.Join(s.root, "integration", "testdata", "specs", "other.json")}
	for _, n := range []string{"bearer", "query", "basic", "life", "sigv4"} {
		specs = append(specs, filepath.Join(s.root, "integration", "testdata", "specs", "cred-"+n+".json"))
	}
	for _, p := range specs {
		if _, stderr, err := e.d.run(context.Background(), "connector", "install", p); err != nil {
			return e, fmt.Errorf("aileron connector install %s: %w\n%s", p, err, stderr)
		}
	}
	return e, nil
}

// newRuntimePKI writes a fresh root (dir/root.pem) and returns a leaf for
// names and 127.0.0.2 signed by it.
func newRuntimePKI(dir string, names []string) (tls.Certificate, string, *x509.CertPool, error) {
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", nil, err
	}
	now := time.Now()
	rootTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Aileron Test Credential Upstream Root"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		return tls.Certificate{}, "", nil, err
	}
	root, _ := x509.ParseCertificate(rootDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, "", nil, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "credential upstream"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: names,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.2")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, root, &leafKey.PublicKey, rootKey)
	if err != nil {
		return tls.Certificate{}, "", nil, err
	}
	rootPath := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(rootPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rootDER}), 0o600); err != nil {
		return tls.Certificate{}, "", nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}, rootPath, pool, nil
}

// seenReq is one request as the credential upstream received it.
type seenReq struct {
	ID, Host, Method, Path, RawQuery string
	Header                           http.Header
}

// credUpstream is the credential tests' far end: it records every request,
// serves an OAuth2 token endpoint on oauth2.example.com, verifies SigV4 on
// s3.us-east-1.amazonaws.com, reflects credentials back on /reflect/…, and
// redirects /redirect to other.example.com.
type credUpstream struct {
	Addr string
	srv  *http.Server
	done chan struct{}
	tok  tokenEndpoint

	mu    sync.Mutex
	reqs  []seenReq
	sigv4 aws.Credentials
}

func startCredUpstream(cert tls.Certificate, reg *secretRegistry) (*credUpstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the credential upstream: %w", err)
	}
	u := &credUpstream{Addr: ln.Addr().String(), done: make(chan struct{})}
	u.tok.reg = reg
	u.tok.expiresIn.Store(3600)
	u.srv = &http.Server{Handler: u, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(u.done)
		_ = u.srv.ServeTLS(ln, "", "")
	}()
	return u, nil
}

// Close stops the server.
func (u *credUpstream) Close() {
	_ = u.srv.Close()
	<-u.done
}

// byID returns the requests carrying test request id (X-Test-Req header or
// rid query parameter) that arrived for host.
func (u *credUpstream) byID(host, id string) []seenReq {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []seenReq
	for _, r := range u.reqs {
		if r.ID == id && r.Host == host {
			out = append(out, r)
		}
	}
	return out
}

// containsAnywhere reports whether any recorded request carried needle in
// a header or its query.
func (u *credUpstream) containsAnywhere(needle string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range u.reqs {
		if strings.Contains(r.Path+"?"+r.RawQuery, needle) || headerContains(r.Header, needle) {
			return true
		}
	}
	return false
}

func headerContains(h http.Header, needle string) bool {
	for k, vs := range h {
		for _, v := range vs {
			if strings.Contains(k+": "+v, needle) {
				return true
			}
		}
	}
	return false
}

func (u *credUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	id := r.Header.Get("X-Test-Req")
	if id == "" {
		id = r.URL.Query().Get("rid")
	}
	host := hostOnly(r.Host)
	u.mu.Lock()
	u.reqs = append(u.reqs, seenReq{ID: id, Host: host, Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone()})
	u.mu.Unlock()
	switch {
	case host == "oauth2.example.com":
		u.tok.serve(w, r, body)
	case host == "s3.us-east-1.amazonaws.com":
		u.mu.Lock()
		creds := u.sigv4
		u.mu.Unlock()
		if err := verifySigV4(r, body, creds); err != nil {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "SignatureDoesNotMatch", "detail": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"verified": true, "method": r.Method, "path": r.URL.EscapedPath(), "body_len": len(body)})
	case strings.HasPrefix(r.URL.Path, "/reflect/"):
		serveReflect(w, r)
	case r.URL.Path == "/redirect":
		w.Header().Set("Location", "https://other.example.com/landed?rid="+url.QueryEscape(id))
		w.WriteHeader(http.StatusFound)
	default:
		sum := sha256.Sum256(body)
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "host": host, "path": r.URL.EscapedPath(), "body_sha256": hex.EncodeToString(sum[:])})
	}
}

// serveReflect answers with the credential it received in every form a
// careless API could echo (raw, base64, URL-encoded, Basic's user:pass), in
// response headers and in a body streamed a few bytes per flush, so a
// secret straddles write boundaries.
func serveReflect(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	cred, pair := auth, ""
	if v, ok := strings.CutPrefix(auth, "Bearer "); ok {
		cred = v
	}
	if v, ok := strings.CutPrefix(auth, "Basic "); ok {
		dec, _ := base64.StdEncoding.DecodeString(v)
		pair = string(dec)
		_, cred, _ = strings.Cut(pair, ":")
	}
	if k := r.URL.Query().Get("key"); k != "" {
		cred = k
	}
	b64 := base64.StdEncoding.EncodeToString
	body := strings.Join([]string{"authorization=" + auth, "credential=" + cred, "credential-base64=" + b64([]byte(cred)),
		"credential-urlencoded=" + url.QueryEscape(cred), "basic-pair=" + pair, "basic-pair-base64=" + b64([]byte(pair)),
		"raw-query=" + r.URL.RawQuery, "end"}, "\n")
	w.Header().Set("X-Echo-Authorization", auth)
	w.Header().Set("X-Echo-Credential", cred)
	w.Header().Set("X-Echo-Credential-Base64", b64([]byte(cred)))
	w.Header().Set("X-Echo-Query", r.URL.RawQuery)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for i := 0; i < len(body); i += 5 {
		if _, err := io.WriteString(w, body[i:min(i+5, len(body))]); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

// tokenEndpoint is a refresh-token grant endpoint. It counts attempts,
// issues fresh access tokens (registered as secrets) valid for expiresIn
// seconds, and answers 503 while fail is set.
type tokenEndpoint struct {
	reg                                     *secretRegistry
	attempts, issued                        atomic.Int64
	expiresIn                               atomic.Int64
	fail                                    atomic.Bool
	mu                                      sync.Mutex
	clientID, clientSecret, refreshToken    string
	lastToken                               string
}

func (te *tokenEndpoint) configure(clientID, clientSecret, refreshToken string) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.clientID, te.clientSecret, te.refreshToken = clientID, clientSecret, refreshToken
}

func (te *tokenEndpoint) last() string {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.lastToken
}

func (te *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	te.attempts.Add(1)
	if r.Method != http.MethodPost || r.URL.Path != "/token" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found"})
		return
	}
	if te.fail.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "temporarily_unavailable"})
		return
	}
	form, _ := url.ParseQuery(string(body))
	id, secret, ok := r.BasicAuth()
	if ok { // RFC 6749 2.3.1: form-encoded before base64
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = form.Get("client_id"), form.Get("client_secret")
	}
	te.mu.Lock()
	defer te.mu.Unlock()
	if form.Get("grant_type") != "refresh_token" || form.Get("refresh_token") != te.refreshToken || id != te.clientID || secret != te.clientSecret {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
		return
	}
	n := te.issued.Add(1)
	te.lastToken = fmt.Sprintf("ya29.issued-%d-%s", n, randHex(16))
	te.reg.add(fmt.Sprintf("oauth2 access token #%d issued by the fake token endpoint", n), te.lastToken)
	writeJSON(w, http.StatusOK, map[string]any{"access_token": te.lastToken, "token_type": "Bearer", "expires_in": te.expiresIn.Load()})
}

var sigv4AuthRe = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$`)

// verifySigV4 re-signs what arrived with the AWS SDK's signer and the
// credentials the test stored, and compares.
func verifySigV4(r *http.Request, body []byte, creds aws.Credentials) error {
	auth := r.Header.Get("Authorization")
	m := sigv4AuthRe.FindStringSubmatch(auth)
	if m == nil {
		return fmt.Errorf("Authorization is not a SigV4 header: %q", auth)
	}
	if m[1] != creds.AccessKeyID || m[3] != "us-east-1" || m[4] != "s3" {
		return fmt.Errorf("credential scope %s/%s/%s, want %s/us-east-1/s3", m[1], m[3], m[4], creds.AccessKeyID)
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date %q: %v", r.Header.Get("X-Amz-Date"), err)
	}
	if got := r.Header.Get("X-Amz-Security-Token"); got != creds.SessionToken {
		return fmt.Errorf("X-Amz-Security-Token is not the stored session token (len %d)", len(got))
	}
	sum := sha256.Sum256(body)
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = hex.EncodeToString(sum[:])
	} else if payload != "UNSIGNED-PAYLOAD" && payload != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("X-Amz-Content-Sha256 %s is not the SHA-256 of the %d-byte body received", payload, len(body))
	}
	re, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, h := range strings.Split(m[5], ";") {
		switch h {
		case "host":
		case "content-length":
			re.ContentLength = r.ContentLength
		default:
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), creds, re, payload, "s3", "us-east-1", when); err != nil {
		return err
	}
	if want := re.Header.Get("Authorization"); want != auth {
		return fmt.Errorf("signature mismatch:\n got  %s\n want %s", auth, want)
	}
	return nil
}

