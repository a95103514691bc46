package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The audit tests drive one daemon through every audit event the daemon
// emits, then check the lines against golden files (testdata/audit/*.json,
// regenerated with AILERON_UPDATE_GOLDEN=1), the hash chain with
// `aileron audit verify`, and that nothing the audit must never hold
// (query strings, body values outside audit[], headers, credentials) got in.

const (
	auditFQN = "local://test/audit"
	// Needles: distinctive values sent where the audit must not copy them
	// raw. Constant so the golden files (which hold their hashes) are too.
	needleQuery     = "needle-query-5b1e9c"
	needleQueryPost = "needle-query-post-77d0"
	needleBodyTo    = "needle-body-to-c4a2"
	needleBodyDrop  = "needle-body-drop-0e8f"
	needleBodyOther = "needle-body-unnamed-91aa"
	needleHeader    = "needle-header-3f61"
	auditSubject    = "Quarterly report"
)

// auditLine is one parsed audit line.
type auditLine struct {
	Raw []byte
	M   map[string]any
}

func (l auditLine) str(key string) string { s, _ := l.M[key].(string); return s }

func (l auditLine) detail(key string) string {
	d, _ := l.M["details"].(map[string]any)
	s, _ := d[key].(string)
	return s
}

// auditFiles lists the daemon's audit files in chain order.
func auditFiles(t *testing.T, d *daemon) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(d.home, "audit", "audit-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// parseAuditLines parses JSON lines (numbers kept as written); a partial
// last line (no newline yet) is left out.
func parseAuditLines(raw []byte) ([]auditLine, error) {
	var out []auditLine
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			break
		}
		line := raw[:i]
		raw = raw[i+1:]
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("audit line %q is not a JSON object: %w", trunc(line), err)
		}
		out = append(out, auditLine{Raw: append([]byte(nil), line...), M: m})
	}
	return out, nil
}

// readAudit reads every line of the daemon's audit files.
func readAudit(t *testing.T, d *daemon) []auditLine {
	t.Helper()
	var all []auditLine
	for _, f := range auditFiles(t, d) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := parseAuditLines(raw)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, lines...)
	}
	return all
}

// waitAudit polls the audit files until ok accepts the lines (outcome
// lines are written after the client got its answer). It fails t after 30s.
func waitAudit(t *testing.T, d *daemon, what string, ok func([]auditLine) bool) []auditLine {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		lines := readAudit(t, d)
		if ok(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, l := range lines {
				b.Write(l.Raw)
				b.WriteByte('\n')
			}
			t.Fatalf("the audit trail never showed %s within 30s; it holds:\n%s", what, b.String())
		}
		<-tick.C
	}
}

// auditCase names one golden event: the first line match accepts.
type auditCase struct {
	name  string // golden file testdata/audit/<name>.json
	match func(auditLine) bool
}

// auditFixture is the daemon of TestAudit and what was sent through it.
type auditFixture struct {
	d         *daemon
	s         *session
	tokenHits func() int
	secrets   []string          // credential bytes stored in the daemon
	ids       map[string]string // request name -> audit_id
	lines     []auditLine
	cases     []auditCase
}

func TestAudit(t *testing.T) {
	f := &auditFixture{ids: map[string]string{}}
	f.start(t)
	f.controlPlane(t)
	f.requests(t)
	f.passthrough(t)
	f.oauth(t)
	f.d.cli(t, "credential", "delete", "audit-oauth-bad")
	f.d.cli(t, "credential", "unbind", auditFQN)
	held := f.openPassthrough(t) // open when the session is deleted: cut
	defer held.Close()
	f.d.cli(t, "session", "delete", f.s.ID)
	f.tamper(t)
	f.cases = f.goldenCases()
	f.lines = waitAudit(t, f.d, "every golden event", func(lines []auditLine) bool {
		for _, c := range f.cases {
			if findLine(lines, c.match) == nil {
				return false
			}
		}
		return true
	})
	t.Run("golden_events", f.golden)
	t.Run("tail_filters", f.tailFilters)
	t.Run("verify", f.verify)
	t.Run("privacy", f.privacy)
}

// start runs a daemon whose other.example.com resolves to a local OAuth2
// token endpoint, and installs the audit spec.
func (f *auditFixture) start(t *testing.T) {
	tokenAddr, hits := startTokenServer(t)
	f.tokenHits = hits
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["upstream"].(map[string]any)["resolve"].(map[string]string)["other.example.com:443"] = tokenAddr
	f.d = theSuite.startTestDaemon(t, cfg, nil)
}

// startTokenServer serves a refresh-token grant on 127.0.0.2 with the
// suite's server certificate (valid for other.example.com): refresh token
// "rt-audit-good" gets a fresh access token, anything else invalid_grant.
func startTokenServer(t *testing.T) (string, func() int) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(theSuite.pkiDir, "server.pem"), filepath.Join(theSuite.pkiDir, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	hits := make(chan struct{}, 100)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- struct{}{}
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		if r.URL.Path != "/token" || form.Get("refresh_token") != "rt-audit-good" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_grant"})
			return
		}
		tok := "at-audit-fresh-" + randHex(8)
		theSuite.secrets.add("audit test OAuth2 access token", tok)
		writeJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return ln.Addr().String(), func() int { return len(hits) }
}

// controlPlane: store.installed, store.consented and store.removed (an extra connector),
// credential.set and binding.set, session.created.
func (f *auditFixture) controlPlane(t *testing.T) {
	specs := filepath.Join(theSuite.root, "integration", "testdata", "specs")
	f.d.cli(t, "connector", "install", filepath.Join(specs, "audit.json"))
	f.d.cli(t, "connector", "install", filepath.Join(specs, "audit-extra.json"))
	f.d.cli(t, "connector", "remove", "local://test/audit-extra@0.1.0")
	f.setOAuth(t, "audit-oauth-bad", "rt-audit-bad")
	f.d.cli(t, "credential", "bind", auditFQN, "--credential", "audit-oauth-bad")
	f.s = f.d.newSession(t, "--name", "audit-golden")
}

// setOAuth stores an OAuth2 credential whose access token has expired, so
// the first use refreshes it at the local token endpoint.
func (f *auditFixture) setOAuth(t *testing.T, name, refresh string) {
	t.Helper()
	secret, stale := "cs-audit-"+randHex(8), "at-audit-stale-"+randHex(8)
	for _, s := range []string{secret, stale, refresh} {
		theSuite.secrets.add("audit test credential "+name, s)
	}
	f.secrets = append(f.secrets, secret, stale, refresh)
	raw, err := json.Marshal(map[string]string{"token_url": "https://other.example.com/token", "client_id": "audit-it",
		"client_secret": secret, "refresh_token": refresh, "access_token": stale,
		"expiry": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := f.d.runInput(t.Context(), string(raw), "credential", "set", name, "--kind", "oauth2"); err != nil {
		t.Fatalf("credential set %s: %v\n%s", name, err, stderr)
	}
}

// auditDo sends one request with extra headers and returns the status and
// the audit id (response header, or the denial envelope's).
func auditDo(t *testing.T, c *http.Client, method, target, body string, hdr map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	theSuite.seen.add("audit test: "+method+" "+target, resp.Header, b)
	id := resp.Header.Get("X-Aileron-Audit-Id")
	if id == "" {
		var env envelope
		if json.Unmarshal(b, &env) == nil {
			id = env.Error.AuditID
		}
	}
	if id == "" {
		t.Fatalf("%s %s: status %d with no audit id (header or envelope): %s", method, target, resp.StatusCode, trunc(b))
	}
	return resp.StatusCode, id
}

// requests: an allowed GET with audit fields, an allowed POST with body
// audit fields, a denied request, and an upstream TLS failure.
func (f *auditFixture) requests(t *testing.T) {
	c := goClient(t, f.s)
	hdr := map[string]string{"X-Needle": needleHeader}
	steps := []struct {
		name, method, url, body string
		status                  int
	}{
		{"allowed", http.MethodGet, "https://stream.example.com/audit/search?q=" + needleQuery + "&limit=7", "", 200},
		{"allowed_body", http.MethodPost, "https://stream.example.com/audit/send/inbox?q=" + needleQueryPost,
			`{"to":"` + needleBodyTo + `","subject":"` + auditSubject + `","raw":"` + needleBodyDrop + `","cc":"` + needleBodyOther + `"}`, 200},
		{"denied", http.MethodDelete, "https://stream.example.com/audit/search?q=" + needleQuery, "", 403},
		{"upstream_failure", http.MethodGet, "https://stream.example.com:9441/echo/audit?q=" + needleQuery, "", 502},
	}
	for _, st := range steps {
		status, id := auditDo(t, c, st.method, st.url, st.body, hdr)
		if status != st.status {
			t.Fatalf("%s: %s %s answered %d, want %d", st.name, st.method, st.url, status, st.status)
		}
		f.ids[st.name] = id
	}
}

// passthrough opens a raw tunnel to the passthrough host, does one
// exchange with the upstream's own certificate, and closes it.
func (f *auditFixture) passthrough(t *testing.T) {
	tc := f.openPassthrough(t)
	if _, err := io.WriteString(tc, getReq("/audit/passthrough", "passthrough.example.org")); err != nil {
		t.Fatalf("write through the passthrough tunnel: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("read through the passthrough tunnel: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	_ = tc.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("passthrough exchange: status %d", resp.StatusCode)
	}
}

// openPassthrough opens a passthrough tunnel and completes its TLS
// handshake with the upstream's own certificate.
func (f *auditFixture) openPassthrough(t *testing.T) *tls.Conn {
	t.Helper()
	tun, o := rawConnect(t, f.d.ProxyAddr, "passthrough.example.org:443", f.s.auth(t))
	if tun == nil {
		t.Fatalf("CONNECT passthrough.example.org:443: %s", o)
	}
	tc := tls.Client(tun, &tls.Config{ServerName: "passthrough.example.org", RootCAs: certPoolFrom(t, filepath.Join(theSuite.pkiDir, "root.pem"))})
	_ = tc.SetDeadline(time.Now().Add(60 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("TLS through the passthrough tunnel: %v", err)
	}
	return tc
}

// oauth: a failed refresh refuses the request (credential.refresh_failed),
// then a credential with a good refresh token refreshes
// (credential.refreshed) and the request goes through.
func (f *auditFixture) oauth(t *testing.T) {
	c := goClient(t, f.s)
	const target = "https://stream.example.com/audit/secure"
	status, id := auditDo(t, c, http.MethodGet, target, "", nil)
	if status != http.StatusForbidden {
		t.Fatalf("request needing a credential whose refresh fails: status %d, want 403", status)
	}
	f.ids["credential_unavailable"] = id
	f.setOAuth(t, "audit-oauth-good", "rt-audit-good")
	f.d.cli(t, "credential", "bind", auditFQN, "--credential", "audit-oauth-good")
	if status, _ := auditDo(t, c, http.MethodGet, target, "", nil); status != http.StatusOK {
		t.Fatalf("request after binding a refreshable credential: status %d, want 200", status)
	}
	if n := f.tokenHits(); n < 2 {
		t.Errorf("the token endpoint saw %d requests, want at least 2 (one failed, one good refresh)", n)
	}
}

// tamper edits one byte of the installed audit spec in the store and sends
// SIGHUP: the reload must report store.tamper_detected.
func (f *auditFixture) tamper(t *testing.T) {
	out := f.d.cli(t, "connector", "list", "--json")
	var list []struct{ FQN, Dir string }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		var wrapped struct{ Connectors []struct{ FQN, Dir string } }
		if err2 := json.Unmarshal([]byte(out), &wrapped); err2 != nil {
			t.Fatalf("connector list --json: %v / %v: %s", err, err2, out)
		}
		list = wrapped.Connectors
	}
	var dir string
	for _, c := range list {
		if c.FQN == auditFQN {
			dir = c.Dir
		}
	}
	if dir == "" {
		t.Fatalf("connector list --json shows no store directory for %s: %s", auditFQN, out)
	}
	spec := filepath.Join(dir, "aileron.connector.v1.json")
	raw, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte(`"Search"`))
	if i < 0 {
		t.Fatalf("%s does not hold the summary \"Search\"", spec)
	}
	raw[i+6] = 'x' // "Search" -> "Searcx": still valid JSON, different hash
	if err := os.WriteFile(spec, raw, 0o644); err != nil {
		t.Fatalf("tamper with %s: %v", spec, err)
	}
	if err := syscall.Kill(f.d.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

func findLine(lines []auditLine, ok func(auditLine) bool) *auditLine {
	for i := range lines {
		if ok(lines[i]) {
			return &lines[i]
		}
	}
	return nil
}

// goldenCases maps every golden file to the line it describes.
func (f *auditFixture) goldenCases() []auditCase {
	ev := func(name string, ok func(auditLine) bool) func(auditLine) bool {
		return func(l auditLine) bool { return l.str("event") == name && ok(l) }
	}
	id := func(req string) func(auditLine) bool {
		return func(l auditLine) bool { return l.str("audit_id") == f.ids[req] }
	}
	det := func(k, v string) func(auditLine) bool { return func(l auditLine) bool { return l.detail(k) == v } }
	sess := func(l auditLine) bool { return l.str("session") == f.s.ID }
	return []auditCase{
		{"store.installed", ev("store.installed", det("connector", auditFQN))},
		{"store.consented", ev("store.consented", det("connector", auditFQN))},
		{"store.removed", ev("store.removed", det("ref", "local://test/audit-extra@0.1.0"))},
		{"credential.set", ev("credential.set", det("credential", "audit-oauth-bad"))},
		{"binding.set", ev("binding.set", det("credential", "audit-oauth-bad"))},
		{"credential.deleted", ev("credential.deleted", det("credential", "audit-oauth-bad"))},
		{"binding.removed", ev("binding.removed", det("connector", auditFQN))},
		{"session.created", ev("session.created", det("session", f.s.ID))},
		{"session.deleted", ev("session.deleted", det("session", f.s.ID))},
		{"session.revoked", ev("session.revoked", sess)},
		{"sandbox.proxy.tunnel_cut", ev("sandbox.proxy.tunnel_cut", func(l auditLine) bool {
			return sess(l) && l.str("host") == "passthrough.example.org"
		})},
		{"connector.proxy.proxied", ev("connector.proxy.proxied", id("allowed"))},
		{"connector.proxy.completed", ev("connector.proxy.completed", id("allowed"))},
		{"connector.proxy.proxied.body_fields", ev("connector.proxy.proxied", id("allowed_body"))},
		{"connector.proxy.completed.body_fields", ev("connector.proxy.completed", id("allowed_body"))},
		{"connector.proxy.rejected.denied", ev("connector.proxy.rejected", id("denied"))},
		{"connector.proxy.proxied.upstream_failure", ev("connector.proxy.proxied", id("upstream_failure"))},
		{"connector.proxy.rejected.upstream_failure", ev("connector.proxy.rejected", id("upstream_failure"))},
		{"connector.proxy.rejected.credential_unavailable", ev("connector.proxy.rejected", id("credential_unavailable"))},
		{"sandbox.proxy.passthrough", ev("sandbox.proxy.passthrough", sess)},
		{"sandbox.proxy.closed", ev("sandbox.proxy.closed", sess)},
		{"credential.refresh_failed", ev("credential.refresh_failed", det("credential", "audit-oauth-bad"))},
		{"credential.refreshed", ev("credential.refreshed", det("credential", "audit-oauth-good"))},
		{"store.tamper_detected", ev("store.tamper_detected", func(auditLine) bool { return true })},
	}
}

// volatile are the top-level keys whose values change from run to run;
// the golden files keep the key with a placeholder.
func volatile() map[string]string {
	return map[string]string{"time": "<time>", "seq": "<seq>", "prev_hash": "<sha256 hex>", "audit_id": "<audit id>",
		"session": "<session id>", "client": "<ip:port>", "duration_ms": "<ms>", "upstream_ms": "<ms>",
		"connector_hash": "<sha256 hex>", "bytes_in": "<bytes>", "bytes_out": "<bytes>"}
}

// volatileDetails are the details keys normalised the same way.
func volatileDetails() map[string]string {
	return map[string]string{"session": "<session id>", "expires_at": "<time>", "hash": "<sha256 hex>", "error": "<error text>",
		"by": "<uid N (user)>"}
}

// normalise replaces run-dependent values by placeholders.
func normalise(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	vol, vd := volatile(), volatileDetails()
	for k, v := range m {
		if p, ok := vol[k]; ok {
			out[k] = p
			continue
		}
		if d, ok := v.(map[string]any); ok && k == "details" {
			nd := make(map[string]any, len(d))
			for dk, dv := range d {
				if p, ok := vd[dk]; ok {
					dv = p
				}
				nd[dk] = dv
			}
			v = nd
		}
		out[k] = v
	}
	return out
}

func (f *auditFixture) golden(t *testing.T) {
	update := os.Getenv("AILERON_UPDATE_GOLDEN") == "1"
	dir := filepath.Join(theSuite.root, "integration", "testdata", "audit")
	for _, c := range f.cases {
		t.Run(c.name, func(t *testing.T) {
			l := findLine(f.lines, c.match)
			got := normalise(l.M)
			path := filepath.Join(dir, c.name+".json")
			if update {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				if err := enc.Encode(got); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote %s from %s", path, l.Raw)
				return
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("golden file: %v (regenerate with AILERON_UPDATE_GOLDEN=1 go test ./integration -run TestAudit)", err)
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var want map[string]any
			if err := dec.Decode(&want); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("%s differs from %s (normalised line below; the raw line: %s)\ngot:  %s\nwant: %s\n"+
					"if the change is intended, regenerate with AILERON_UPDATE_GOLDEN=1", c.name, path, l.Raw, gj, raw)
			}
		})
	}
	if tl := findLine(f.lines, f.cases[len(f.cases)-1].match); tl != nil && !strings.Contains(tl.detail("error"), auditFQN+"@1.0.0") {
		t.Errorf("store.tamper_detected does not name %s@1.0.0: %s", auditFQN, tl.Raw)
	}
}

// sha256Field is how a hash-redacted audit value of s is recorded.
func sha256Field(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
