package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// newTestApprovals opens an approval store in a temp dir.
func newTestApprovals(t *testing.T) *approvals.Store {
	t.Helper()
	db, err := state.Open(t.Context(), filepath.Join(t.TempDir(), state.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &approvals.Store{DB: db}
}

// seedApproval records a pending approval for p (through the data plane's
// interface, holding nobody) and returns its id.
func seedApproval(t *testing.T, s *approvals.Store, session, body string, p dataplane.Preview) string {
	t.Helper()
	res, err := s.Await(context.Background(), &dataplane.ApprovalRequest{
		Session: session, Method: p.Method, Host: p.Host, Port: 443, Path: p.Path,
		Digest: strings.Repeat("ab", 16) + body, Preview: p,
	}, 0)
	if err != nil || res.ID == "" || res.Outcome != dataplane.ApprovalPending {
		t.Fatalf("seeding an approval: %+v, %v", res, err)
	}
	return res.ID
}

// samplePreview is a send-mail preview with a hostile summary.
func samplePreview() dataplane.Preview {
	return dataplane.Preview{
		Connector: "github://acme/aileron-connector-google", Version: "1.2.3", Tool: "gmail", Operation: "send",
		Summary: `Send mail <script>alert(1)</script>`, Method: "POST", Host: "gmail.googleapis.com",
		Path: "/gmail/v1/users/me/messages/send", BodyBytes: 321,
		Inputs: map[string]any{"to": "bob@example.com", "subject": "Hello", "count": 3},
	}
}

// webFixture is a Web page on an httptest server with a controllable clock.
type webFixture struct {
	web   *Web
	srv   *httptest.Server
	store *approvals.Store
	mu    sync.Mutex
	now   time.Time
}

func newWebFixture(t *testing.T) *webFixture {
	t.Helper()
	f := &webFixture{store: newTestApprovals(t), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f.web = &Web{Approvals: f.store, TokenFile: filepath.Join(t.TempDir(), "keys", "admin.token"),
		Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }}
	f.srv = httptest.NewServer(f.web.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func (f *webFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *webFixture) token(t *testing.T) string {
	t.Helper()
	tok, err := LoadOrCreateToken(f.web.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do sends one request without following redirects; hdr entries with an
// empty value are removed rather than set.
func (f *webFixture) do(t *testing.T, method, path string, form url.Values, cookie *http.Cookie, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", f.srv.URL)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(data)
}

// login logs in and returns the session cookie and the page's CSRF token.
func (f *webFixture) login(t *testing.T) (*http.Cookie, string) {
	t.Helper()
	resp, _ := f.do(t, "POST", "/login", url.Values{"token": {f.token(t)}}, nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d to %q with cookies %v", resp.StatusCode, resp.Header.Get("Location"), resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	resp, page := f.do(t, "GET", "/", nil, cookie, nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET / after login: %d, no CSRF token in\n%s", resp.StatusCode, page)
	}
	return cookie, m[1]
}

func (f *webFixture) state(t *testing.T, id string) approvals.Approval {
	t.Helper()
	ap, err := f.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

func TestWebLoginRequired(t *testing.T) {
	f := newWebFixture(t)
	id := seedApproval(t, f.store, "s_1", "", samplePreview())
	for _, c := range []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/", http.StatusSeeOther, "/login"},
		{"GET", "/nowhere", http.StatusSeeOther, "/login"},
		{"GET", "/api/approvals", http.StatusUnauthorized, ""},
		{"POST", "/approvals/" + id + "/approve", http.StatusSeeOther, "/login"},
		{"POST", "/approvals/" + id + "/deny", http.StatusSeeOther, "/login"},
		{"POST", "/logout", http.StatusSeeOther, "/login"},
		{"GET", "/login", http.StatusOK, ""},
		{"GET", "/static/app.js", http.StatusOK, ""},
		{"GET", "/static/app.css", http.StatusOK, ""},
	} {
		var form url.Values
		if c.method == "POST" {
			form = url.Values{"csrf": {"x"}, "reason": {"r"}}
		}
		resp, _ := f.do(t, c.method, c.path, form, nil, nil)
		if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s without a session: %d to %q, want %d to %q", c.method, c.path,
				resp.StatusCode, resp.Header.Get("Location"), c.status, c.location)
		}
	}
	// A made-up cookie is no session either.
	resp, _ := f.do(t, "GET", "/", nil, &http.Cookie{Name: webCookie, Value: "forged"}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("forged cookie: %d, want 303 to /login", resp.StatusCode)
	}
	if ap := f.state(t, id); ap.State != "pending" {
		t.Errorf("approval is %s after unauthenticated posts, want pending", ap.State)
	}
}

func TestWebLogin(t *testing.T) {
	f := newWebFixture(t)
	info, err := os.Stat(f.web.TokenFile) // Handler created it
	tok := f.token(t)
	if err != nil || info.Mode().Perm() != 0o600 || len(tok) != 43 {
		t.Fatalf("token file: %v %v, token length %d; want mode 0600 and 43 characters", info, err, len(tok))
	}
	for _, bad := range []string{"", "wrong", tok[:42], tok + "x", strings.ToUpper(tok)} {
		resp, page := f.do(t, "POST", "/login", url.Values{"token": {bad}}, nil, nil)
		if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(page, "aileron approvals web-token") {
			t.Errorf("login with %q: %d, cookies %v; want 401, no cookie, a hint", bad, resp.StatusCode, resp.Cookies())
		}
	}
	resp, _ := f.do(t, "POST", "/login", url.Values{"token": {tok}}, nil, nil)
	cookies := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, cookies)
	}
	c := cookies[0]
	if c.Name != webCookie || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" ||
		c.MaxAge != 12*3600 || len(c.Value) != 43 || c.Value == tok {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Max-Age 12h, a fresh 256-bit id", c)
	}
	if resp, _ := f.do(t, "GET", "/login", nil, c, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /login while logged in: %d, want 303 to /", resp.StatusCode)
	}
	// A login from another origin is refused.
	resp, _ = f.do(t, "POST", "/login", url.Values{"token": {tok}}, nil, map[string]string{"Origin": "http://evil.example"})
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("cross-origin login: %d, cookies %v; want 403 and none", resp.StatusCode, resp.Cookies())
	}
}

func TestWebSessionExpiryAndLogout(t *testing.T) {
	f := newWebFixture(t)
	cookie, csrf := f.login(t)
	f.advance(WebSessionTTL - time.Second)
	if resp, _ := f.do(t, "GET", "/api/approvals", nil, cookie, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("just before expiry: %d, want 200", resp.StatusCode)
	}
	f.advance(time.Second)
	if resp, _ := f.do(t, "GET", "/", nil, cookie, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after 12h: %d, want 303 to /login", resp.StatusCode)
	}
	cookie, csrf = f.login(t)
	resp, _ := f.do(t, "POST", "/logout", url.Values{"csrf": {csrf}}, cookie, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := f.do(t, "GET", "/api/approvals", nil, cookie, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", resp.StatusCode)
	}
}

func TestWebCSRF(t *testing.T) {
	f := newWebFixture(t)
	cookie, csrf := f.login(t)
	_, otherCSRF := f.login(t)
	for _, c := range []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"empty token", url.Values{"csrf": {""}}, nil},
		{"wrong token", url.Values{"csrf": {csrf + "x"}}, nil},
		{"another login's token", url.Values{"csrf": {otherCSRF}}, nil},
		{"cross-origin Origin", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "http://evil.example"}},
		{"other port Origin", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "http://127.0.0.1:1"}},
		{"null Origin", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "null"}},
		{"cross-origin Referer", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "", "Referer": "http://evil.example/x"}},
		{"cross-site fetch", url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
	} {
		id := seedApproval(t, f.store, "s_1", c.name, samplePreview())
		for _, act := range []string{"approve", "deny"} {
			form := url.Values{"reason": {"no"}}
			for k, v := range c.form {
				form[k] = v
			}
			resp, _ := f.do(t, "POST", "/approvals/"+id+"/"+act, form, cookie, c.hdr)
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s, %s: %d, want 403", c.name, act, resp.StatusCode)
			}
		}
		if ap := f.state(t, id); ap.State != "pending" {
			t.Errorf("%s: approval is %s, want pending", c.name, ap.State)
		}
	}
	// The header form of the token works, and so does a same-origin Referer
	// without Origin: the refusals above are the checks, not a broken route.
	id := seedApproval(t, f.store, "s_1", "header", samplePreview())
	resp, _ := f.do(t, "POST", "/approvals/"+id+"/approve", url.Values{}, cookie,
		map[string]string{"X-CSRF-Token": csrf, "Origin": "", "Referer": f.srv.URL + "/"})
	if resp.StatusCode != http.StatusSeeOther || f.state(t, id).State != "approved" {
		t.Errorf("approve with X-CSRF-Token: %d, state %s; want 303 and approved", resp.StatusCode, f.state(t, id).State)
	}
}

func TestWebDecisions(t *testing.T) {
	f := newWebFixture(t)
	cookie, csrf := f.login(t)
	a := seedApproval(t, f.store, "s_1", "a", samplePreview())
	d := seedApproval(t, f.store, "s_1", "d", samplePreview())
	post := func(path string, form url.Values) (int, string) {
		form.Set("csrf", csrf)
		resp, page := f.do(t, "POST", path, form, cookie, nil)
		return resp.StatusCode, page
	}
	if code, _ := post("/approvals/"+a+"/approve", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("approve: %d", code)
	}
	if ap := f.state(t, a); ap.State != "approved" || ap.DecidedBy != "web" {
		t.Errorf("after approve: state %s by %q, want approved by web", ap.State, ap.DecidedBy)
	}
	for _, reason := range []string{"", "   ", "bad\x00reason", "bad\u202ereason", "bad\u3164reason", strings.Repeat("x", 1025)} {
		if code, _ := post("/approvals/"+d+"/deny", url.Values{"reason": {reason}}); code != http.StatusBadRequest {
			t.Errorf("deny with reason %q: %d, want 400", reason, code)
		}
	}
	if ap := f.state(t, d); ap.State != "pending" {
		t.Fatalf("after refused denials: %s, want pending", ap.State)
	}
	if code, _ := post("/approvals/"+d+"/deny", url.Values{"reason": {"not this recipient"}}); code != http.StatusSeeOther {
		t.Fatalf("deny: %d", code)
	}
	if ap := f.state(t, d); ap.State != "denied" || ap.DecidedBy != "web" || ap.Reason != "not this recipient" {
		t.Errorf("after deny: %+v", ap)
	}
	for _, c := range []struct {
		path   string
		status int
		want   string
	}{
		{"/approvals/" + a + "/deny", http.StatusConflict, "Already decided"},
		{"/approvals/" + d + "/approve", http.StatusConflict, "Already decided"},
		{"/approvals/ap_nope/approve", http.StatusNotFound, "No such approval"},
	} {
		if code, page := post(c.path, url.Values{"reason": {"late"}}); code != c.status || !strings.Contains(page, c.want) {
			t.Errorf("POST %s: %d, want %d with %q", c.path, code, c.status, c.want)
		}
	}
	if ap := f.state(t, a); ap.State != "approved" {
		t.Errorf("a late denial changed an approved approval to %s", ap.State)
	}
}

func TestWebPageShowsPreview(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	resp, page := f.do(t, "GET", "/", nil, cookie, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="empty"`) || strings.Contains(page, `class="card approval"`) {
		t.Errorf("empty list: %d, want the empty state\n%s", resp.StatusCode, page)
	}
	id := seedApproval(t, f.store, "s_42", "", samplePreview())
	_, page = f.do(t, "GET", "/", nil, cookie, nil)
	page = strings.ReplaceAll(page, "<wbr>", "") // line-break hints after each / ? & =
	for _, want := range []string{
		id, "s_42", "github://acme/aileron-connector-google", "1.2.3", "gmail", "send", "POST", "gmail.googleapis.com",
		"/gmail/v1/users/me/messages/send", "321 bytes", "Send mail &lt;script&gt;alert(1)&lt;/script&gt;",
		"<th scope=\"row\">count</th><td>3</td>", "<th scope=\"row\">subject</th><td>Hello</td>",
		"<th scope=\"row\">to</th><td>bob@example.com</td>", `data-fp="` + id + `"`,
		`action="/approvals/` + id + `/approve"`, `action="/approvals/` + id + `/deny"`, `src="/static/app.js"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.Contains(page, `id="empty"`) {
		t.Errorf("page has an unescaped summary or the empty state:\n%s", page)
	}
	resp, body := f.do(t, "GET", "/api/approvals", nil, cookie, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(body, `"id": "`+id+`"`) || !strings.Contains(body, `"body_bytes": 321`) {
		t.Errorf("GET /api/approvals: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if _, body := f.do(t, "GET", "/api/approvals?state=denied", nil, cookie, nil); strings.Contains(body, id) {
		t.Errorf("state=denied lists a pending approval:\n%s", body)
	}
	if resp, body := f.do(t, "GET", "/api/approvals?state=bogus", nil, cookie, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("state=bogus: %d, want 400\n%s", resp.StatusCode, body)
	}
}

// TestWebPageShowsTheWholeRequest: the page shows the full target, the
// forwarded headers, every field with the undeclared ones marked, and the
// body, all with control characters escaped; a long body says how much is
// left out and the raw view has all of it, escaped, for a logged-in user.
func TestWebPageShowsTheWholeRequest(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	longPath := "/v1/" + strings.Repeat("p", 700)
	body := "{\"to\":\"bob\",\"bcc\":\"eve\u202e\"}\x1b[2J" + strings.Repeat("x", 80<<10) + "TAIL"
	id := seedApproval(t, f.store, "s_7", "", dataplane.Preview{Connector: "local://t/mail", Version: "1.0.0", Tool: "mail",
		Operation: "send", Method: "POST", Host: "mail.example:443", Path: longPath, Query: "cc=eve%40x",
		Headers: []dataplane.PreviewHeader{{Name: "X-Note", Value: "a\x1bb"}},
		Fields:  []dataplane.PreviewField{{Source: "query", Name: "cc", Value: "eve@x"}, {Source: "body", Name: "to", Value: `"bob"`, Declared: true}},
		Body:    &dataplane.PreviewBody{Kind: dataplane.BodyText, ContentType: "text/plain", Raw: []byte(body)}, BodyBytes: len(body)})
	_, page := f.do(t, "GET", "/", nil, cookie, nil)
	page = strings.ReplaceAll(page, "<wbr>", "") // line-break hints after each / ? & =
	for _, want := range []string{longPath + "?cc=eve%40x", "Not declared by the connector", "query cc", `<span class="badge">not declared</span>`,
		`X-Note</th><td>a\x1bb</td>`, `\u202e`, `\x1b[2J`, "more bytes not shown here", `href="/approvals/` + id + `/raw"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.ContainsAny(page, "\x1b\u202e") || strings.Contains(page, "TAIL") {
		t.Errorf("page has a raw control character, or the body's tail it said it left out")
	}
	resp, raw := f.do(t, "GET", "/approvals/"+id+"/raw", nil, cookie, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") ||
		!strings.HasPrefix(raw, "POST "+longPath+"?cc=eve%40x HTTP/1.1\n") || !strings.HasSuffix(raw, "TAIL\n") || strings.ContainsAny(raw, "\x1b\u202e") {
		t.Errorf("raw view: %d %s, want the whole request escaped:\n%.200q", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	if resp, _ := f.do(t, "GET", "/approvals/"+id+"/raw", nil, nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("raw view without a login: %d, want a redirect to the login", resp.StatusCode)
	}
}

func TestWebHeadersAndHost(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	for _, path := range []string{"/login", "/", "/api/approvals", "/static/app.js", "/nowhere"} {
		resp, _ := f.do(t, "GET", path, nil, cookie, nil)
		for k, v := range webHeaders() {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, v)
			}
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("GET %s: CSP %q", path, resp.Header.Get("Content-Security-Policy"))
		}
	}
	for host, want := range map[string]int{
		"evil.example:80": http.StatusMisdirectedRequest, "10.0.0.1": http.StatusMisdirectedRequest,
		"localhost:9091": http.StatusOK, "127.0.0.2:1": http.StatusOK, "[::1]:9091": http.StatusOK,
	} {
		if resp, _ := f.do(t, "GET", "/login", nil, nil, map[string]string{"Host": host}); resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

func TestLoadOrCreateAdminToken(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys", "admin.token")
	a, err := LoadOrCreateToken(p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreateToken(p)
	if err != nil || a != b {
		t.Fatalf("second load: %q, %v; want the same token %q", b, err, a)
	}
	if info, err := os.Stat(filepath.Dir(p)); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("keys dir: %v %v, want 0700", info, err)
	}
	short := filepath.Join(dir, "short.token")
	loose := filepath.Join(dir, "loose.token")
	os.WriteFile(short, []byte("tooshort\n"), 0o600)
	os.WriteFile(loose, []byte(a+"\n"), 0o644)
	os.Chmod(loose, 0o644)
	for path, want := range map[string]error{short: state.ErrCorruptState, loose: state.ErrInsecureFile} {
		if _, err := LoadOrCreateToken(path); !errors.Is(err, want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want %v naming the file", path, err, want)
		}
	}
}

// approvalsAPI serves approvalRoutes on a unix socket and returns a client.
func approvalsAPI(t *testing.T, store *approvals.Store) *Client {
	t.Helper()
	a := &API{}
	mux := http.NewServeMux()
	a.approvalRoutes(mux, store)
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return &Client{Socket: sock}
}

func TestAdminApprovalsRoundTrip(t *testing.T) {
	store := newTestApprovals(t)
	c := approvalsAPI(t, store)
	ctx := context.Background()
	a := seedApproval(t, store, "s_1", "a", samplePreview())
	d := seedApproval(t, store, "s_2", "d", samplePreview())
	list, err := c.ListApprovals(ctx, approvals.Filter{State: "pending"})
	if err != nil || len(list) != 2 {
		t.Fatalf("list pending: %v, %v", list, err)
	}
	if list, err = c.ListApprovals(ctx, approvals.Filter{Session: "s_2"}); err != nil || len(list) != 1 || list[0].ID != d {
		t.Fatalf("list session s_2: %v, %v", list, err)
	}
	got, err := c.GetApproval(ctx, a)
	if err != nil || got.Preview.Tool != "gmail" || got.Preview.Inputs["to"] != "bob@example.com" || got.State != "pending" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if got, err = c.ApproveApproval(ctx, a, "cli:alice"); err != nil || got.State != "approved" || got.DecidedBy != "cli:alice" || got.DecidedAt == nil {
		t.Fatalf("approve: %+v, %v", got, err)
	}
	if got, err = c.DenyApproval(ctx, d, "cli:alice", "wrong recipient"); err != nil || got.State != "denied" || got.Reason != "wrong recipient" {
		t.Fatalf("deny: %+v, %v", got, err)
	}
	p := seedApproval(t, store, "s_1", "p", samplePreview())
	for _, c2 := range []struct {
		what   string
		call   func() error
		status int
		reason policy.Reason
	}{
		{"approve again", func() error { _, err := c.ApproveApproval(ctx, a, "cli:bob"); return err }, 409, "conflict"},
		{"deny approved", func() error { _, err := c.DenyApproval(ctx, a, "cli:bob", "late"); return err }, 409, "conflict"},
		{"unknown id", func() error { _, err := c.GetApproval(ctx, "ap_nope"); return err }, 404, "not_found"},
		{"approve unknown", func() error { _, err := c.ApproveApproval(ctx, "ap_nope", "cli:bob"); return err }, 404, "not_found"},
		{"deny without reason", func() error { _, err := c.DenyApproval(ctx, p, "cli:bob", " "); return err }, 400, "invalid_argument"},
		{"no decider", func() error { _, err := c.ApproveApproval(ctx, p, ""); return err }, 400, "invalid_argument"},
		{"decider with newline", func() error { _, err := c.ApproveApproval(ctx, p, "cli:a\nb"); return err }, 400, "invalid_argument"},
		{"approve with reason", func() error {
			return c.do(ctx, http.MethodPost, "/v1/approvals/"+p+"/approve", DecideRequest{By: "x", Reason: "y"}, nil)
		}, 400, "invalid_argument"},
	} {
		apiError(t, c2.what, c2.call(), c2.status, c2.reason)
	}
	if got, _ := c.GetApproval(ctx, p); got.State != "pending" {
		t.Errorf("refused decisions changed %s to %s", p, got.State)
	}
}

func TestAdminApprovalsOff(t *testing.T) {
	c := approvalsAPI(t, nil)
	_, err := c.ListApprovals(context.Background(), approvals.Filter{})
	apiError(t, "list without a store", err, http.StatusServiceUnavailable, "not_ready")
}

// TestWebDetailHistoryAndNames: a login may give a name, recorded with its
// decisions; a decision lands on the approval's own page, which confirms
// it; the history lists decided approvals, newest first, with who, when
// and why; sessions show their names and limits; and a hostile path stays
// text.
func TestWebDetailHistoryAndNames(t *testing.T) {
	f := newWebFixture(t)
	f.web.SessionName = func(id string) string { return map[string]string{"s_1": "ci-bot <b>"}[id] }
	f.web.SessionLimits = func(id string) string { return map[string]string{"s_1": "tokens 1200/1000; EXHAUSTED: tokens"}[id] }
	resp, _ := f.do(t, "POST", "/login", url.Values{"token": {f.token(t)}, "name": {"  Ada\x00 Lovelace  "}}, nil, nil)
	cookie := resp.Cookies()[0]
	_, page := f.do(t, "GET", "/", nil, cookie, nil)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	p := samplePreview()
	p.Path = "/v1/<script>alert(1)</script>/x"
	a := seedApproval(t, f.store, "s_1", "a", p)
	d := seedApproval(t, f.store, "s_2", "d", samplePreview())

	_, page = f.do(t, "GET", "/approvals/"+a, nil, cookie, nil)
	if !strings.Contains(page, `action="/approvals/`+a+`/approve"`) || !strings.Contains(page, "ci-bot &lt;b&gt;") ||
		!strings.Contains(page, "<dt>Limits (used/max)</dt><dd>tokens 1200/1000; EXHAUSTED: tokens</dd>") ||
		strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;") || !strings.Contains(page, "/<wbr>") {
		t.Fatalf("the pending approval's page:\n%s", page)
	}
	resp, _ = f.do(t, "POST", "/approvals/"+a+"/approve", url.Values{"csrf": {csrf}}, cookie, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/approvals/"+a+"?decided=approved" {
		t.Fatalf("approve: %d to %q", resp.StatusCode, loc)
	}
	if ap := f.state(t, a); ap.DecidedBy != "web:Ada Lovelace" {
		t.Fatalf("decided_by %q, want the login's name", ap.DecidedBy)
	}
	_, page = f.do(t, "GET", "/approvals/"+a+"?decided=approved", nil, cookie, nil)
	if !strings.Contains(page, `id="confirm"`) || !strings.Contains(page, "Approved.") || strings.Contains(page, "/approve\"") ||
		!strings.Contains(page, "web:Ada Lovelace") {
		t.Fatalf("the page after approving:\n%s", page)
	}
	f.advance(time.Minute)
	_, _ = f.do(t, "POST", "/approvals/"+d+"/deny", url.Values{"csrf": {csrf}, "reason": {"wrong thread"}}, cookie, nil)
	_, page = f.do(t, "GET", "/history", nil, cookie, nil)
	rows := regexp.MustCompile(`<tr class="state-(\w+)">`).FindAllStringSubmatch(page, -1)
	if len(rows) != 2 || rows[0][1] != "denied" || rows[1][1] != "approved" || !strings.Contains(page, "wrong thread") {
		t.Fatalf("history (newest first, want denied then approved):\n%s", page)
	}
	if resp, page := f.do(t, "GET", "/approvals/ap_nope", nil, cookie, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "No such approval") {
		t.Fatalf("an unknown approval: %d", resp.StatusCode)
	}
}

// TestWebDetailConfirmsOnlyARealDecision: a link an agent hands the
// approver (its review_url with ?decided=denied appended) confirms nothing
// the approval's state does not bear out.
func TestWebDetailConfirmsOnlyARealDecision(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	id := seedApproval(t, f.store, "s_1", "a", samplePreview())
	for _, said := range []string{"denied", "approved"} {
		if _, page := f.do(t, "GET", "/approvals/"+id+"?decided="+said, nil, cookie, nil); strings.Contains(page, `id="confirm"`) {
			t.Fatalf("a pending approval's page confirms %q, which nobody decided:\n%s", said, page)
		}
	}
}

// TestWebHistoryCostIsBounded: the history reads only what it shows, so
// its cost does not grow with the bodies held for approval (100 decided
// approvals of 256 KiB each).
func TestWebHistoryCostIsBounded(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	body := strings.Repeat("x", 256<<10)
	for i := range 100 {
		p := samplePreview()
		p.Body = &dataplane.PreviewBody{Kind: "text", ContentType: "text/plain", Raw: []byte(body)}
		p.BodyBytes = len(body)
		id := seedApproval(t, f.store, "s_1", strconv.Itoa(i), p)
		if err := f.store.Deny(t.Context(), id, "cli:x", "no"); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, page := f.do(t, "GET", "/history", nil, cookie, nil)
	runtime.ReadMemStats(&after)
	if resp.StatusCode != 200 || strings.Count(page, "state-denied") != 100 {
		t.Fatalf("history: %d", resp.StatusCode)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("one GET /history of 100 one-line rows allocated %d MiB (page %d KiB)", got>>20, len(page)>>10)
	}
}

// TestWebShowsWaitingClients: a pending approval says how many clients are
// held on it (identical requests share it) and until when, or that none
// is and what approving then does.
func TestWebShowsWaitingClients(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	p := samplePreview()
	id := seedApproval(t, f.store, "s_1", "w", p)
	_, page := f.do(t, "GET", "/approvals/"+id, nil, cookie, nil)
	if !strings.Contains(page, "no client now") {
		t.Fatalf("nobody waits, yet:\n%s", page)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go func() {
			_, _ = f.store.Await(ctx, &dataplane.ApprovalRequest{Session: "s_1", Method: p.Method, Host: p.Host, Port: 443,
				Path: p.Path, Digest: strings.Repeat("ab", 16) + "w", Preview: p}, time.Minute)
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := f.store.Waiting(id); n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two identical requests are not held")
		}
	}
	_, page = f.do(t, "GET", "/approvals/"+id, nil, cookie, nil)
	if !strings.Contains(page, "2 clients (identical requests) held, giving up at") {
		t.Fatalf("two clients wait, yet:\n%s", page)
	}
	cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, _ := f.store.Waiting(id); n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("clients that left are still counted")
		}
	}
}

// TestWebNamedHosts: a page published under a name (admin.web_hosts)
// answers to that name, and still to nothing else.
func TestWebNamedHosts(t *testing.T) {
	f := newWebFixture(t)
	f.web.Hosts = []string{"approvals.example.com"}
	for host, want := range map[string]int{
		"approvals.example.com":      http.StatusOK,
		"Approvals.Example.com:9443": http.StatusOK,
		"evil.example.com":           http.StatusMisdirectedRequest,
		"approvals.example.com.evil": http.StatusMisdirectedRequest,
	} {
		if resp, _ := f.do(t, "GET", "/login", nil, nil, map[string]string{"Host": host}); resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
