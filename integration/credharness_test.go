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
	"github.com/gorilla/websocket"
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
	// regionalFQN is policy/testdata/specs/regional.json's connector.
	regionalFQN = "github://acme/aileron-connector-regional"
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
// echoes WebSocket messages after an upgrade, serves an OAuth2 token endpoint on oauth2.example.com, verifies SigV4 on
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
	case websocket.IsWebSocketUpgrade(r):
		serveWebSocket(w, r)
	case r.Header.Get("X-Test-Answer") != "": // a model answer with usage (usage_test.go)
		serveModelAnswer(w, r)
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
	reg                                  *secretRegistry
	attempts, issued                     atomic.Int64
	expiresIn                            atomic.Int64
	fail                                 atomic.Bool
	mu                                   sync.Mutex
	clientID, clientSecret, refreshToken string
	lastToken                            string
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

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newSecret makes a random secret, registers it for the suite-wide scan
// under name, and returns it. specials are appended to exercise encoding.
func newSecret(name, prefix, specials string) string {
	v := prefix + randHex(16) + specials
	theSuite.secrets.add(name, v)
	return v
}

// setCred runs `credential set NAME ARGS…` with input on stdin.
func (e *credEnv) setCred(t *testing.T, input string, args ...string) {
	t.Helper()
	out, errOut, err := e.d.runInput(context.Background(), input, append([]string{"credential", "set"}, args...)...)
	if err != nil {
		t.Fatalf("aileron credential set %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
}

// credReq is one request a credential test sends through a real client.
// Values in url and header may hold ${VAR}, expanded from the session's
// `session env` (by the client itself for Python and Node).
type credReq struct {
	id, method, url, body string
	header                map[string]string
	follow                bool // follow redirects
}

// credClient is a real client that can send custom headers.
type credClient struct {
	name string
	do   func(t *testing.T, e *credEnv, s *session, r credReq) clientResult
}

func credClients(names ...string) []credClient {
	all := map[string]func(*testing.T, *credEnv, *session, credReq) clientResult{
		"curl": curlCred, "python_requests": pythonCred, "node": nodeCred, "go": goCred,
	}
	var out []credClient
	for _, n := range names {
		out = append(out, credClient{n, all[n]})
	}
	return out
}

// send runs r with c, records what came back for the secret scan and
// returns it.
func (c credClient) send(t *testing.T, e *credEnv, s *session, r credReq) clientResult {
	t.Helper()
	if r.header == nil {
		r.header = map[string]string{}
	}
	r.header["X-Test-Req"] = r.id
	res := c.do(t, e, s, r)
	theSuite.seen.add(c.name+": "+r.method+" "+r.url, res.Header, res.Body)
	return res
}

// sessionVars parses `session env` export lines.
func sessionVars(t *testing.T, s *session) map[string]string {
	t.Helper()
	vars := map[string]string{}
	for _, line := range strings.Split(s.sessionEnv(t), "\n") {
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "=")
		if ok {
			vars[k] = strings.Trim(v, `'"`)
		}
	}
	return vars
}

func expand(t *testing.T, s *session, v string) string {
	vars := sessionVars(t, s)
	return os.Expand(v, func(k string) string { return vars[k] })
}

func curlCred(t *testing.T, _ *credEnv, s *session, r credReq) clientResult {
	t.Helper()
	dir := t.TempDir()
	args := []string{"curl", "-sS", "--max-time", "60", "-o", filepath.Join(dir, "body"), "-D", filepath.Join(dir, "headers"), "-w", "%{http_code}"}
	if r.method != http.MethodGet {
		args = append(args, "-X", r.method)
	}
	for k, v := range r.header {
		args = append(args, "-H", k+": "+expand(t, s, v))
	}
	if r.body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", r.body)
	}
	if r.follow {
		args = append(args, "-L")
	}
	out, errOut, err := runWithEnv(t, s, append(args, expand(t, s, r.url))...)
	if err != nil {
		t.Fatalf("curl %s %s: %v\nstdout: %s\nstderr: %s", r.method, r.url, err, out, errOut)
	}
	hdr, _ := os.ReadFile(filepath.Join(dir, "headers"))
	b, _ := os.ReadFile(filepath.Join(dir, "body"))
	status, h := parseLastHeaderBlock(string(hdr))
	return clientResult{Status: status, Header: h, Body: b}
}

func scriptSpec(t *testing.T, r credReq) string {
	raw, err := json.Marshal(map[string]any{"method": r.method, "url": r.url, "body": r.body, "headers": r.header, "follow": r.follow})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func pythonCred(t *testing.T, e *credEnv, s *session, r credReq) clientResult {
	t.Helper()
	return runScript(t, s, "/usr/bin/python3", "-B", filepath.Join(e.scripts, "client.py"), scriptSpec(t, r))
}

func nodeCred(t *testing.T, e *credEnv, s *session, r credReq) clientResult {
	t.Helper()
	return runScript(t, s, "/usr/bin/node", filepath.Join(e.scripts, "client.js"), scriptSpec(t, r))
}

func goCred(t *testing.T, _ *credEnv, s *session, r credReq) clientResult {
	t.Helper()
	c := goClient(t, s)
	if r.follow {
		c.CheckRedirect = nil
	}
	h := expandHeader(t, s, r.header)
	if _, set := h["Content-Type"]; r.body != "" && !set {
		h["Content-Type"] = "application/json" // as the curl and node clients send a body
	}
	res, err := goSend(c, expand(t, s, r.method), expand(t, s, r.url), r.body, h)
	if err != nil {
		t.Fatalf("go %s %s: %v", r.method, r.url, err)
	}
	return res
}

func expandHeader(t *testing.T, s *session, h map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = expand(t, s, v)
	}
	return out
}

// goSend is a Go request without t, for use from goroutines.
func goSend(c *http.Client, method, target, body string, header map[string]string) (clientResult, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		return clientResult{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return clientResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return clientResult{}, err
	}
	return clientResult{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// credClientPy is client.py with request headers (${VAR} expanded from the
// environment, the way an SDK reads LINEAR_API_KEY) and redirect following.
const credClientPy = `import json, os, sys
import requests
spec = json.loads(sys.argv[1])
ex = lambda v: os.path.expandvars(v)
hdrs = {k: ex(v) for k, v in (spec.get("headers") or {}).items()}
body = spec.get("body") or None
if body and not any(k.lower() == "content-type" for k in hdrs):
    hdrs["Content-Type"] = "application/json"  # as the curl and node clients send a body
try:
    r = requests.request(spec["method"], ex(spec["url"]), data=body.encode() if body else None, headers=hdrs,
                         timeout=60, allow_redirects=bool(spec.get("follow")))
except Exception as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(0)
print(json.dumps({"status": r.status_code, "headers": dict(r.headers), "body": r.content.decode("utf-8", "replace")}))
`

// credClientJS is client.js with request headers (${VAR} expanded from the
// environment).
const credClientJS = `'use strict';
const http = require('http');
const tls = require('tls');
const spec = JSON.parse(process.argv[2]);
const ex = (v) => String(v).replace(/\$\{(\w+)\}/g, (_, k) => process.env[k] || '');
const out = (v) => { process.stdout.write(JSON.stringify(v) + '\n'); process.exit(0); };
const fail = (e) => out({ error: String(e && e.stack || e) });
const proxy = new URL(process.env.HTTPS_PROXY);
const u = new URL(ex(spec.url));
const authority = u.hostname + ':' + (u.port || '443');
const creds = Buffer.from(decodeURIComponent(proxy.username) + ':' + decodeURIComponent(proxy.password)).toString('base64');
const cr = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: authority,
  headers: { Host: authority, 'Proxy-Authorization': 'Basic ' + creds } });
cr.on('error', fail);
cr.on('connect', (res, socket) => {
  if (res.statusCode !== 200) { socket.destroy(); out({ stage: 'connect', status: res.statusCode, headers: res.headers, body: '' }); }
  const ts = tls.connect({ socket, servername: u.hostname });
  ts.on('error', fail);
  const headers = { Host: u.port ? authority : u.hostname };
  for (const [k, v] of Object.entries(spec.headers || {})) headers[k] = ex(v);
  if (spec.body) { headers['Content-Type'] = 'application/json'; headers['Content-Length'] = Buffer.byteLength(spec.body); }
  const req = http.request({ method: spec.method, path: u.pathname + u.search, setHost: false, headers, createConnection: () => ts });
  req.on('error', fail);
  req.on('response', (r) => {
    const chunks = [];
    r.on('data', (c) => chunks.push(c));
    r.on('end', () => { ts.destroy(); out({ stage: 'request', status: r.statusCode, headers: r.headers, body: Buffer.concat(chunks).toString('utf8') }); });
  });
  req.end(spec.body || undefined);
});
cr.end();
`

// errNoRecord is returned by onlyRecord when the upstream saw nothing.
var errNoRecord = errors.New("the upstream received no such request")

// onlyRecord returns the single request id that reached host.
func (e *credEnv) onlyRecord(host, id string) (seenReq, error) {
	rs := e.up.byID(host, id)
	if len(rs) == 0 {
		return seenReq{}, errNoRecord
	}
	if len(rs) > 1 {
		return seenReq{}, fmt.Errorf("the upstream received request %s %d times", id, len(rs))
	}
	return rs[0], nil
}

// expectUpstreamAuth checks that request id reached host once carrying
// exactly one Authorization header equal to want (compared without
// printing it).
func (e *credEnv) expectUpstreamAuth(t *testing.T, host, id, want string) {
	t.Helper()
	rec, err := e.onlyRecord(host, id)
	if err != nil {
		t.Errorf("%s request %s: %v", host, id, err)
		return
	}
	got := rec.Header.Values("Authorization")
	if len(got) != 1 || got[0] != want {
		t.Errorf("%s request %s: the upstream received %d Authorization value(s) %s, want exactly the stored credential",
			host, id, len(got), describeValues(got))
	}
}

// expectNeverReached checks that request id never reached host.
func (e *credEnv) expectNeverReached(t *testing.T, host, id string) {
	t.Helper()
	if rs := e.up.byID(host, id); len(rs) != 0 {
		t.Errorf("%s request %s reached the upstream %d time(s); it must be refused at the proxy", host, id, len(rs))
	}
}

// expectNoCredential checks that request id reached host without an
// Authorization header and without any registered secret anywhere.
func (e *credEnv) expectNoCredential(t *testing.T, host, id string) {
	t.Helper()
	rs := e.up.byID(host, id)
	if len(rs) == 0 {
		t.Errorf("%s request %s never reached the upstream", host, id)
	}
	for _, r := range rs {
		if v := r.Header.Values("Authorization"); len(v) != 0 {
			t.Errorf("%s request %s reached the upstream with an Authorization header %s", host, id, describeValues(v))
		}
		for _, sec := range theSuite.secrets.values() {
			if headerContains(r.Header, sec) || strings.Contains(r.RawQuery, url.QueryEscape(sec)) || strings.Contains(r.RawQuery, sec) {
				t.Errorf("%s request %s carried a stored secret to the upstream", host, id)
			}
		}
	}
}

// describeValues prints the shape of header values without their content
// (which may be a secret).
func describeValues(vs []string) string {
	var out []string
	for _, v := range vs {
		scheme, _, _ := strings.Cut(v, " ")
		if len(scheme) > 12 {
			scheme = scheme[:12] + "…"
		}
		out = append(out, fmt.Sprintf("%q…(%d bytes)", scheme, len(v)))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// rid makes a unique request id.
func rid(t *testing.T, what string) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + what + "-" + randHex(4)
}

// assertNoSecretForms checks res (headers and body) for every form of each
// secret, naming the secret but never printing it.
func assertNoSecretForms(t *testing.T, what string, res clientResult, secrets map[string]string) {
	t.Helper()
	found := scanPlaces(secrets, []place{{name: what, data: append([]byte(fmt.Sprint(res.Header)), res.Body...)}})
	for _, f := range found {
		t.Errorf("%s", f)
	}
}

// bindMainCredentials binds a test credential for each of the shared
// daemon's connectors whose operations need one (see bindTestCredential).
func (s *suite) bindMainCredentials(d *daemon) error {
	for _, fqn := range []string{gmailFQN, linearFQN, regionalFQN} {
		if err := s.bindTestCredential(d, fqn); err != nil {
			return err
		}
	}
	return nil
}

// bindTestCredential stores a fresh credential for fqn (gmail: an OAuth2
// token a day from expiry, so its token endpoint is never called; linear: an
// API key; regional: a bearer token), binds it, and registers it for the
// secret scan. Other connectors are left alone.
func (s *suite) bindTestCredential(d *daemon, fqn string) error {
	nk := map[string][2]string{gmailFQN: {"gmail", "oauth2"}, linearFQN: {"linear", "api_key"}, regionalFQN: {"regional", "bearer"}}[fqn]
	name, kind := nk[0], nk[1]
	if name == "" {
		return nil
	}
	input := name + "-main-" + randHex(16)
	s.secrets.add("shared test credential "+name+" ("+d.home+")", input)
	if kind == "oauth2" {
		raw, err := json.Marshal(map[string]string{"token_url": "https://oauth2.example.com/token", "client_id": "aileron-it-main",
			"refresh_token": "1//main-" + randHex(16), "access_token": input, "expiry": time.Now().Add(24 * time.Hour).Format(time.RFC3339)})
		if err != nil {
			return err
		}
		input = string(raw)
	}
	if _, stderr, err := d.runInput(context.Background(), input, "credential", "set", name, "--kind", kind); err != nil {
		return fmt.Errorf("aileron credential set %s: %w\n%s", name, err, stderr)
	}
	if _, stderr, err := d.run(context.Background(), "credential", "bind", fqn, "--credential", name); err != nil {
		return fmt.Errorf("aileron credential bind %s: %w\n%s", fqn, err, stderr)
	}
	return nil
}
