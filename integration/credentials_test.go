package integration

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
	res, err := goSend(c, expand(t, s, r.method), expand(t, s, r.url), r.body, expandHeader(t, s, r.header))
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
