package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clientResult is one HTTP response as a client program saw it.
type clientResult struct {
	Status int
	Header http.Header
	Body   []byte
}

// clientFunc sends one request through the session's proxy with a real
// client. body "" means no body; otherwise it is JSON.
type clientFunc func(t *testing.T, s *session, method, url, body string) clientResult

func realClients() []struct {
	name string
	do   clientFunc
} {
	return []struct {
		name string
		do   clientFunc
	}{
		{"curl", curlDo},
		{"python_urllib", func(t *testing.T, s *session, m, u, b string) clientResult { return pythonDo(t, s, "urllib", m, u, b) }},
		{"python_requests", func(t *testing.T, s *session, m, u, b string) clientResult {
			return pythonDo(t, s, "requests", m, u, b)
		}},
		{"python_httpx", func(t *testing.T, s *session, m, u, b string) clientResult { return pythonDo(t, s, "httpx", m, u, b) }},
		{"node", nodeDo},
		{"go", func(t *testing.T, s *session, m, u, b string) clientResult {
			st, h, body := goDo(t, goClient(t, s), m, u, b)
			return clientResult{Status: st, Header: h, Body: body}
		}},
	}
}

// clientsFixture is what TestClients' scenarios share.
type clientsFixture struct {
	s                      *session
	gmailGet, graphql, reg specOp
}

// TestClients drives every real client through the proxy: allowed calls on a
// templated path, a JSON POST, a multi-host API (one host on port 8443), and
// a denial.
func TestClients(t *testing.T) {
	d := theSuite.mainDaemon(t)
	f := &clientsFixture{s: d.newSession(t, "--name", "clients")}
	f.gmailGet = gmailMessageGet(t)
	f.graphql = mustSpec(t, "linear").findOp(t, "POST /graphql", func(op specOp) bool {
		return op.Method == http.MethodPost && op.Path == "/graphql"
	})
	f.reg = regionalOp(t)

	t.Run("session_env_complete", f.sessionEnvComplete)
	for _, c := range realClients() {
		t.Run(c.name, func(t *testing.T) {
			t.Run("templated_get_allowed", func(t *testing.T) { f.templatedGet(t, c.name, c.do) })
			t.Run("graphql_post_allowed", func(t *testing.T) { f.graphqlPost(t, c.name, c.do) })
			t.Run("regional_two_hosts", func(t *testing.T) { f.regionalTwoHosts(t, c.name, c.do) })
			t.Run("denied_no_matching_operation", func(t *testing.T) { f.denied(t, c.name, c.do) })
		})
	}
	t.Run("curl_verbose_shows_session_ca", f.curlVerboseIssuer)
	t.Run("curl_verbose_shows_proxy_status", f.curlVerboseProxyStatus)
	if n := theSuite.up.proxyAuth.Load(); n != 0 {
		t.Errorf("%d requests reached the upstream carrying Proxy-Authorization", n)
	}
}

// gmailMessageGet is the Gmail spec's GET on /gmail/v1/users/me/messages/{…}.
func gmailMessageGet(t *testing.T) specOp {
	t.Helper()
	return mustSpec(t, "gmail").findOp(t, "a GET on a templated messages path", func(op specOp) bool {
		return op.Method == http.MethodGet && strings.HasPrefix(op.Path, "/gmail/v1/users/me/messages/") && strings.Contains(op.Path, "{")
	})
}

// regionalOp is a regional-spec operation served on a default-port host and
// on a host with port 8443.
func regionalOp(t *testing.T) specOp {
	t.Helper()
	return mustSpec(t, "regional").findOp(t, "an operation on several hosts, one with port 8443", func(op specOp) bool {
		return hostWithPort(op.Hosts, "8443") != "" && hostWithPort(op.Hosts, "") != ""
	})
}

func (f *clientsFixture) sessionEnvComplete(t *testing.T) {
	env := f.s.sessionEnv(t)
	for _, k := range []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY",
		"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"} {
		if !strings.Contains(env, "export "+k+"=") {
			t.Errorf("session env lacks export %s=…:\n%s", k, env)
		}
	}
	bundle, err := os.ReadFile(f.s.CABundlePath)
	if err != nil {
		t.Fatalf("ca_bundle_path: %v", err)
	}
	ca, _ := os.ReadFile(f.s.CACertPath)
	if n := strings.Count(string(bundle), "BEGIN CERTIFICATE"); n < 2 || !strings.Contains(string(bundle), strings.TrimSpace(string(ca))) {
		t.Errorf("ca-bundle.pem holds %d certificates and must hold the session CA plus the system roots", n)
	}
}

func (f *clientsFixture) templatedGet(t *testing.T, name string, do clientFunc) {
	id := "msg-" + name
	path := concretePath(f.gmailGet.Path, id)
	r := do(t, f.s, http.MethodGet, urlFor(f.gmailGet.Hosts[0], path), "")
	assertAllowed(t, r)
	if !strings.Contains(string(r.Body), "hello from fake gmail") || !strings.Contains(string(r.Body), id) {
		t.Errorf("body is not the upstream's answer for %s: %s", path, trunc(r.Body))
	}
	if n := theSuite.up.Hits(hostOnly(authority(f.gmailGet.Hosts[0])), path); n != 1 {
		t.Errorf("upstream saw %d requests for %s, want 1", n, path)
	}
}

func (f *clientsFixture) graphqlPost(t *testing.T, name string, do clientFunc) {
	body := `{"query":"{ viewer { id name } }","variables":{"client":"` + name + `"}}`
	r := do(t, f.s, http.MethodPost, urlFor(f.graphql.Hosts[0], "/graphql"), body)
	assertAllowed(t, r)
	var got struct {
		Data       map[string]any `json:"data"`
		BodySHA256 string         `json:"body_sha256"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil || got.Data == nil {
		t.Fatalf("body is not the upstream's GraphQL answer (%v): %s", err, trunc(r.Body))
	}
	sum := sha256.Sum256([]byte(body))
	if got.BodySHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("upstream received a different body: sha256 %s, sent %x", got.BodySHA256, sum)
	}
}

func (f *clientsFixture) regionalTwoHosts(t *testing.T, name string, do clientFunc) {
	op := f.reg
	for _, h := range []string{hostWithPort(op.Hosts, ""), hostWithPort(op.Hosts, "8443")} {
		path := concretePath(op.Path, "r-"+name)
		body := ""
		if op.Method == http.MethodPost || op.Method == http.MethodPut || op.Method == http.MethodPatch {
			body = `{"region":"test"}`
		}
		r := do(t, f.s, op.Method, urlFor(h, path), body)
		assertAllowed(t, r)
		var echo echoReply
		if err := json.Unmarshal(r.Body, &echo); err != nil {
			t.Fatalf("%s: body is not the upstream echo (%v): %s", h, err, trunc(r.Body))
		}
		if echo.Path != path || echo.Method != op.Method {
			t.Errorf("%s: upstream saw %s %s, want %s %s", h, echo.Method, echo.Path, op.Method, path)
		}
		if wantHost := strings.TrimSuffix(h, ":443"); !strings.EqualFold(echo.Host, wantHost) {
			t.Errorf("%s: upstream saw Host %q, want %q", h, echo.Host, wantHost)
		}
		if echo.ProxyAuthorization {
			t.Errorf("%s: Proxy-Authorization reached the upstream", h)
		}
	}
}

func (f *clientsFixture) denied(t *testing.T, name string, do clientFunc) {
	path := "/gmail/v1/users/me/aileron-denied-" + name
	r := do(t, f.s, http.MethodGet, urlFor(f.gmailGet.Hosts[0], path), "")
	assertDenial(t, name, r.Status, r.Body, http.StatusForbidden, "capability_denied", "no_matching_operation")
	if n := theSuite.up.Hits(hostOnly(authority(f.gmailGet.Hosts[0])), path); n != 0 {
		t.Errorf("denied request reached the upstream %d times", n)
	}
}

func (f *clientsFixture) curlVerboseIssuer(t *testing.T) {
	caCert := f.s.caCert(t)
	_, stderr, err := runWithEnv(t, f.s, "curl", "-v", "-sS", "-o", "/dev/null", "--max-time", "60",
		urlFor(f.gmailGet.Hosts[0], concretePath(f.gmailGet.Path, "verbose")))
	if err != nil {
		t.Fatalf("curl -v: %v\n%s", err, stderr)
	}
	var issuer string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "issuer:") {
			issuer = line
		}
	}
	if issuer == "" {
		t.Fatalf("curl -v printed no issuer line:\n%s", stderr)
	}
	if !strings.Contains(issuer, caCert.Subject.CommonName) || strings.Contains(issuer, "Aileron Test Upstream Root") {
		t.Errorf("leaf issuer %q is not the session CA %q", strings.TrimSpace(issuer), caCert.Subject.CommonName)
	}
}

// curlVerboseProxyStatus: what `curl -v` prints for a refused CONNECT
// (curl shows no CONNECT body) and for a refused request inside a tunnel
// names the reason in the Proxy-Status header.
func (f *clientsFixture) curlVerboseProxyStatus(t *testing.T) {
	for _, tc := range []struct {
		name, url, want string
	}{
		{"refused CONNECT", "https://not-allowed.example.test/x",
			`< Proxy-Status: aileron; error=http_request_denied; details="host_not_allowed: `},
		{"refused request", urlFor(f.gmailGet.Hosts[0], "/gmail/v1/users/me/aileron-denied-verbose"),
			`< Proxy-Status: aileron; error=http_request_denied; details="no_matching_operation: `},
	} {
		_, stderr, err := runWithEnv(t, f.s, "curl", "-v", "-sS", "-o", "/dev/null", "--max-time", "60", tc.url)
		if tc.name == "refused CONNECT" && err == nil {
			t.Errorf("%s: curl succeeded", tc.name)
		}
		if !strings.Contains(strings.ToLower(stderr), strings.ToLower(tc.want)) { // h2 prints names in lower case
			t.Errorf("%s: curl -v does not show %q:\n%s", tc.name, tc.want, stderr)
		}
	}
}

// hostWithPort returns the first host entry with the given explicit port, or
// (port "") the first without one.
func hostWithPort(hosts []string, port string) string {
	for _, h := range hosts {
		i := strings.LastIndex(h, ":")
		has := i >= 0 && !strings.Contains(h, "]")
		if port == "" && (!has || h[i+1:] == "443") {
			return h
		}
		if port != "" && has && h[i+1:] == port {
			return h
		}
	}
	return ""
}

func assertAllowed(t *testing.T, r clientResult) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, want 200; body: %s", r.Status, trunc(r.Body))
	}
	if r.Header.Get("X-Aileron-Audit-Id") == "" {
		t.Errorf("allowed response lacks X-Aileron-Audit-Id; headers: %v", r.Header)
	}
}

// sessionEnv returns the session's `session env` lines, fetched once.
func (s *session) sessionEnv(t *testing.T) string {
	t.Helper()
	if s.envText == "" {
		s.envText = s.env(t)
	}
	return s.envText
}

// runWithEnv runs argv under sh after eval'ing `aileron session env`.
func runWithEnv(t *testing.T, s *session, argv ...string) (stdout, stderr string, err error) {
	t.Helper()
	requireTool(t, argv[0])
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // hang guard only
	defer cancel()
	script := s.sessionEnv(t) + "\nexec \"$@\"\n"
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, "sh"}, argv...)...)
	cmd.Env = cleanEnv(t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	theSuite.seen.add("client output: "+strings.Join(argv, " "), nil, []byte(out.String()+errb.String()))
	return out.String(), errb.String(), err
}

func curlDo(t *testing.T, s *session, method, url, body string) clientResult {
	t.Helper()
	dir := t.TempDir()
	args := []string{"curl", "-sS", "--max-time", "60", "-X", method, "-o", filepath.Join(dir, "body"),
		"-D", filepath.Join(dir, "headers"), "-w", "%{http_code}"}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", body)
	}
	out, errOut, err := runWithEnv(t, s, append(args, url)...)
	if err != nil {
		t.Fatalf("curl %s %s: %v\nstdout: %s\nstderr: %s", method, url, err, out, errOut)
	}
	hdr, _ := os.ReadFile(filepath.Join(dir, "headers"))
	b, _ := os.ReadFile(filepath.Join(dir, "body"))
	theSuite.seen.add("curl received: "+method+" "+url, nil, append(hdr, b...))
	status, h := parseLastHeaderBlock(string(hdr))
	if code, _ := strconv.Atoi(strings.TrimSpace(out)); code != status {
		t.Fatalf("curl reported status %q but its header dump says %d:\n%s", out, status, hdr)
	}
	return clientResult{Status: status, Header: h, Body: b}
}

// parseLastHeaderBlock parses the final response head in a curl -D dump (the
// first blocks are the proxy's CONNECT answer).
func parseLastHeaderBlock(raw string) (int, http.Header) {
	var last string
	for _, blk := range strings.Split(strings.ReplaceAll(raw, "\r\n", "\n"), "\n\n") {
		if strings.TrimSpace(blk) != "" {
			last = strings.TrimSpace(blk)
		}
	}
	h := http.Header{}
	lines := strings.Split(last, "\n")
	status := 0
	if f := strings.Fields(lines[0]); len(f) >= 2 {
		status, _ = strconv.Atoi(f[1])
	}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return status, h
}

// scriptResult is what client.py and client.js print.
type scriptResult struct {
	Status  int            `json:"status"`
	Headers map[string]any `json:"headers"`
	Body    string         `json:"body"`
	Stage   string         `json:"stage"`
	Error   string         `json:"error"`
}

func runScript(t *testing.T, s *session, argv ...string) clientResult {
	t.Helper()
	out, errOut, err := runWithEnv(t, s, argv...)
	if err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, out, errOut)
	}
	var r scriptResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s printed invalid JSON (%v): %q\nstderr: %s", argv[0], err, out, errOut)
	}
	if r.Error != "" {
		t.Fatalf("%s got no HTTP response: %s", strings.Join(argv, " "), r.Error)
	}
	h := http.Header{}
	for k, v := range r.Headers {
		h.Add(k, fmt.Sprint(v))
	}
	return clientResult{Status: r.Status, Header: h, Body: []byte(r.Body)}
}

func pythonDo(t *testing.T, s *session, mode, method, url, body string) clientResult {
	t.Helper()
	requireTool(t, "/usr/bin/python3")
	if mode == "requests" {
		if out, err := exec.Command("/usr/bin/python3", "-c", "import requests").CombinedOutput(); err != nil {
			t.Fatalf("/usr/bin/python3 cannot import requests (%v: %s): run `make test`, which installs python3-requests via scripts/test-deps.sh", err, out)
		}
	}
	script := filepath.Join(theSuite.root, "integration", "testdata", "clients", "client.py")
	return runScript(t, s, "/usr/bin/python3", "-B", script, mode, method, url, body)
}

func nodeDo(t *testing.T, s *session, method, url, body string) clientResult {
	t.Helper()
	script := filepath.Join(theSuite.root, "integration", "testdata", "clients", "client.js")
	return runScript(t, s, "/usr/bin/node", script, method, url, body)
}

// TestHealthCommand: `aileron health` (a container's HEALTHCHECK) exits 0
// against a running daemon, naming its socket.
func TestHealthCommand(t *testing.T) {
	d := theSuite.mainDaemon(t)
	out, errOut, err := d.run(t.Context(), "health")
	if err != nil || !strings.HasPrefix(out, "ok: the daemon answers on ") {
		t.Fatalf("aileron health: %v\n%s%s", err, out, errOut)
	}
}

// TestBashCompletion: the script of `aileron completion bash`, sourced in a
// real bash, completes commands, subcommands and flags from the binary.
func TestBashCompletion(t *testing.T) {
	requireTool(t, "bash")
	dir := t.TempDir()
	script := filepath.Join(dir, "aileron.bash")
	out, err := exec.Command(theSuite.bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theSuite.bin, filepath.Join(dir, "aileron")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ line, want string }{
		{"aileron sess", "session"},
		{"aileron session ", "create delete env list render"},
		{"aileron approvals approve --h", "--home"},
	} {
		words := strings.Fields(tc.line)
		if strings.HasSuffix(tc.line, " ") {
			words = append(words, "")
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `source "$1"; COMP_WORDS=(`+strings.Join(quoted, " ")+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _aileron; echo "${COMPREPLY[*]}"`, "bash", script)
		cmd.Env = append(cleanEnv(dir), "PATH="+dir+":/usr/bin:/bin")
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != tc.want {
			t.Errorf("%q: %q (%v), want %q", tc.line, got, err, tc.want)
		}
	}
}

// TestGitHeldPush: a git push held for approval and not released in time
// is refused in git's own terms: git prints the reason, the approval id and
// what to do ("remote:" lines and "[remote rejected]"), not only "RPC
// failed; HTTP 403"; nothing reaches the upstream.
func TestGitHeldPush(t *testing.T) {
	requireTool(t, "git")
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["approval"] = map[string]any{"hold": "1s"}
	d := theSuite.startTestDaemon(t, cfg, nil)
	d.cli(t, "connector", "install", filepath.Join(theSuite.root, "integration", "testdata", "specs", "gitpush.json"))
	s := d.newSession(t)
	repo := t.TempDir()
	for _, argv := range [][]string{{"git", "init", "-q", "-b", "main", repo},
		{"git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "one"}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", argv, err, out)
		}
	}
	before := theSuite.up.Hits("stream.example.com", "/repo.git/git-receive-pack")
	_, stderr, err := runWithEnv(t, s, "git", "-C", repo, "push", "https://stream.example.com/repo.git", "main")
	if err == nil {
		t.Fatalf("the held push succeeded:\n%s", stderr)
	}
	for _, want := range []string{"remote: Aileron: POST /repo.git/git-receive-pack waits for a human's approval (ap_",
		"remote: Aileron: approval ap_", "! [remote rejected] main -> main (approval_pending ap_"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("git does not print %q:\n%s", want, stderr)
		}
	}
	if got := theSuite.up.Hits("stream.example.com", "/repo.git/git-receive-pack") - before; got != 0 {
		t.Errorf("the held push reached the upstream %d times", got)
	}
	// Approved, the same push again is the identical request: it goes on
	// (this fake host then refuses it, which is git's business).
	id := regexp.MustCompile(`approval_pending (ap_\w+)`).FindStringSubmatch(stderr)
	if id == nil {
		t.Fatal("no approval id")
	}
	d.cli(t, "approvals", "approve", id[1])
	_, stderr, _ = runWithEnv(t, s, "git", "-C", repo, "push", "https://stream.example.com/repo.git", "main")
	if got := theSuite.up.Hits("stream.example.com", "/repo.git/git-receive-pack") - before; got != 1 {
		t.Errorf("after the approval, the push reached the upstream %d times, want 1:\n%s", got, stderr)
	}
}
