package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// credFixture is what TestCredentials' scenarios share: the static
// credentials, bound before any scenario runs, and a session created after
// the bindings (so its env holds the LINEAR_API_KEY placeholder).
type credFixture struct {
	*credEnv
	linearKey, bearerTok, queryKey, basicPass string
	s                                         *session
}

const basicUser = "alice"

// TestCredentials drives every credential kind through real clients and a
// real daemon, and checks the credential never goes where it must not.
func TestCredentials(t *testing.T) {
	f := &credFixture{credEnv: theSuite.credDaemon(t)}
	f.linearKey = newSecret("linear api key", "lin_api_", "")
	f.bearerTok = newSecret("bearer token", "bt-", "+/=")
	f.queryKey = newSecret("query api key", "qk-", "+/=&")
	f.basicPass = newSecret("basic password", "pw-", "+/")
	theSuite.secrets.add("basic user:password pair", basicUser+":"+f.basicPass)
	f.setCred(t, f.linearKey, "linear", "--kind", "api_key")
	f.setCred(t, f.bearerTok, "bearer", "--kind", "bearer")
	f.setCred(t, f.queryKey+"\n", "qkey", "--kind", "api_key")
	f.setCred(t, f.basicPass, "basicpw", "--kind", "basic", "--username", basicUser)
	f.d.cli(t, "credential", "bind", linearFQN, "--credential", "linear", "--env", "LINEAR_API_KEY")
	f.d.cli(t, "credential", "bind", bearerFQN, "--credential", "bearer")
	f.d.cli(t, "credential", "bind", queryFQN, "--credential", "qkey")
	f.d.cli(t, "credential", "bind", basicFQN, "--credential", "basicpw")
	f.s = f.d.newSession(t, "--name", "credentials")

	t.Run("linear_api_key", f.linear)
	t.Run("placeholder_elsewhere", f.placeholderElsewhere)
	t.Run("bearer", f.bearer)
	t.Run("query_key", f.query)
	t.Run("basic", f.basic)
	t.Run("reflection_guard", f.reflection)
	t.Run("sigv4", f.sigv4)
	t.Run("never_leaks", f.neverLeaks)
	t.Run("lifecycle", f.lifecycle)
	t.Run("oauth2", f.oauth2)
	t.Run("list_json", f.listJSON)
	if f.up.containsAnywhere("aileron-placeholder-") {
		t.Errorf("a placeholder reached the upstream")
	}
}

func (f *credFixture) linear(t *testing.T) {
	ph := sessionVars(t, f.s)["LINEAR_API_KEY"]
	if !regexp.MustCompile(`^aileron-placeholder-[0-9a-f]{32}$`).MatchString(ph) {
		t.Fatalf("session env LINEAR_API_KEY = %q, want aileron-placeholder-<32 hex>", ph)
	}
	const host, gql = "api.linear.app", `{"query":"{ viewer { id } }"}`
	for _, c := range credClients("curl", "python_requests", "node", "go") {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				header map[string]string
			}{
				{"injected", nil},
				{"client_value_replaced", map[string]string{"Authorization": "junk"}},
				{"placeholder_swapped", map[string]string{"Authorization": "${LINEAR_API_KEY}"}},
			} {
				id := rid(t, tc.name)
				res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodPost, url: "https://" + host + "/graphql", body: gql, header: tc.header})
				assertAllowed(t, res)
				f.expectUpstreamAuth(t, host, id, f.linearKey)
			}
			id := rid(t, "placeholder-other-path")
			res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/v2/other",
				header: map[string]string{"Authorization": "${LINEAR_API_KEY}"}})
			assertDenial(t, "placeholder on a path no operation matches", res.Status, res.Body, http.StatusForbidden, "capability_denied", "placeholder_misuse")
			f.expectNeverReached(t, host, id)
			id = rid(t, "placeholder-query")
			res = c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://other.example.com/landed?api_key=${LINEAR_API_KEY}"})
			assertDenial(t, "placeholder in the query of an operation without a credential", res.Status, res.Body, http.StatusForbidden, "capability_denied", "placeholder_misuse")
			f.expectNeverReached(t, "other.example.com", id)
		})
	}
}

// placeholderElsewhere: duplicated client credentials collapse to the one
// injected value, and the Linear placeholder in the path or query of
// operations bound to other credentials is refused.
func (f *credFixture) placeholderElsewhere(t *testing.T) {
	const gql = `{"query":"{ viewer { id } }"}`
	id := rid(t, "two-authorization-headers")
	o := rawExchange(t, f.d.ProxyAddr, f.s.auth(t), "api.linear.app:443", tlsOpts{SNI: "api.linear.app", Roots: f.s.caPool(t)},
		"POST /graphql HTTP/1.1\r\nHost: api.linear.app\r\nAuthorization: junk-1\r\nAuthorization: junk-2\r\nX-Test-Req: "+id+
			"\r\nContent-Type: application/json\r\nContent-Length: "+fmt.Sprint(len(gql))+"\r\nConnection: close\r\n\r\n"+gql)
	if o.Err != nil || o.Status != http.StatusOK {
		t.Errorf("two client Authorization headers: %s", o)
	} else {
		f.expectUpstreamAuth(t, "api.linear.app", id, f.linearKey)
	}
	for _, c := range credClients("curl", "go") {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct{ name, host, path string }{
				{"path_of_op_bound_elsewhere", "bearer.example.com", "/echo/${LINEAR_API_KEY}"},
				{"query_of_op_bound_elsewhere", "query.example.com", "/v1/items?x=${LINEAR_API_KEY}"},
			} {
				id := rid(t, tc.name)
				res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + tc.host + tc.path})
				assertDenial(t, tc.name, res.Status, res.Body, http.StatusForbidden, "capability_denied", "placeholder_misuse")
				f.expectNeverReached(t, tc.host, id)
			}
		})
	}
}

func (f *credFixture) bearer(t *testing.T) {
	const host = "bearer.example.com"
	for _, c := range credClients("curl", "go", "python_requests") {
		t.Run(c.name, func(t *testing.T) {
			id := rid(t, "get")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/echo/a"}))
			f.expectUpstreamAuth(t, host, id, "Bearer "+f.bearerTok)
			id = rid(t, "replaced")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/echo/b",
				header: map[string]string{"Authorization": "Bearer client-junk"}}))
			f.expectUpstreamAuth(t, host, id, "Bearer "+f.bearerTok)
			id = rid(t, "post")
			body := `{"hello":"` + c.name + `"}`
			res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodPost, url: "https://" + host + "/echo/c", body: body})
			assertAllowed(t, res)
			f.expectUpstreamAuth(t, host, id, "Bearer "+f.bearerTok)
			if sum := sha256.Sum256([]byte(body)); !strings.Contains(string(res.Body), hex.EncodeToString(sum[:])) {
				t.Errorf("the upstream received a different body: %s", trunc(res.Body))
			}
		})
	}
}

func (f *credFixture) query(t *testing.T) {
	const host = "query.example.com"
	for _, c := range credClients("python_requests", "go", "curl") {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range []struct{ name, q, x string }{{"replaced", "key=client-junk&x=1", "1"}, {"added", "x=2", "2"}} {
				id := rid(t, tc.name)
				assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/v1/items?" + tc.q}))
				rec, err := f.onlyRecord(host, id)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				q, err := url.ParseQuery(rec.RawQuery)
				if err != nil {
					t.Fatalf("%s: the upstream received an unparsable query (%v)", tc.name, err)
				}
				if k := q["key"]; len(k) != 1 || k[0] != f.queryKey {
					t.Errorf("%s: the upstream received %d key= value(s) %s, want exactly the stored key (URL-encoded once)", tc.name, len(k), describeValues(k))
				}
				if q.Get("x") != tc.x {
					t.Errorf("%s: the client's other parameter x=%s became %q", tc.name, tc.x, q.Get("x"))
				}
				if v := rec.Header.Values("Authorization"); len(v) != 0 {
					t.Errorf("%s: a query-placed key also produced an Authorization header", tc.name)
				}
			}
		})
	}
}

func (f *credFixture) basic(t *testing.T) {
	const host = "basic.example.com"
	want := basicAuth(basicUser, f.basicPass)
	for _, c := range credClients("curl", "node", "go") {
		t.Run(c.name, func(t *testing.T) {
			id := rid(t, "get")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/echo/a"}))
			f.expectUpstreamAuth(t, host, id, want)
			id = rid(t, "replaced")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/echo/b",
				header: map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}}))
			f.expectUpstreamAuth(t, host, id, want)
		})
	}
}

// reflection: upstreams that echo the credential back (headers and a body
// streamed a few bytes per write) must reach the client masked.
func (f *credFixture) reflection(t *testing.T) {
	cases := []struct {
		name, url string
		secrets   map[string]string
	}{
		{"bearer", "https://bearer.example.com/reflect/x", map[string]string{"bearer token": f.bearerTok}},
		{"basic", "https://basic.example.com/reflect/x", map[string]string{"basic password": f.basicPass, "basic pair": basicUser + ":" + f.basicPass}},
		{"query", "https://query.example.com/reflect/x?key=junk", map[string]string{"query api key": f.queryKey}},
	}
	for _, c := range credClients("curl", "go", "node") {
		t.Run(c.name, func(t *testing.T) {
			for _, tc := range cases {
				res := c.send(t, f.credEnv, f.s, credReq{id: rid(t, tc.name), method: http.MethodGet, url: tc.url})
				assertAllowed(t, res)
				if !strings.Contains(string(res.Body), "[REDACTED]") || !strings.HasSuffix(strings.TrimSpace(string(res.Body)), "end") {
					t.Errorf("%s: the reflected body is not masked with [REDACTED] or was cut short: %q", tc.name, trunc(res.Body))
				}
				if h := res.Header.Get("X-Echo-Credential"); !strings.Contains(h, "[REDACTED]") {
					t.Errorf("%s: the reflected header X-Echo-Credential is not masked (%d bytes)", tc.name, len(h))
				}
				assertNoSecretForms(t, tc.name+" reflection via "+c.name, res, tc.secrets)
			}
		})
	}
}

func (f *credFixture) sigv4(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIAIT" + strings.ToUpper(randHex(7)),
		SecretAccessKey: newSecret("aws secret access key", "sak/", "+"), SessionToken: newSecret("aws session token", "IQoJ", "/+=")}
	raw, _ := json.Marshal(map[string]string{"access_key_id": creds.AccessKeyID, "secret_access_key": creds.SecretAccessKey, "session_token": creds.SessionToken})
	f.setCred(t, string(raw), "s3", "--kind", "aws_sigv4", "--service", "s3")
	f.d.cli(t, "credential", "bind", sigv4FQN, "--credential", "s3")
	f.up.mu.Lock()
	f.up.sigv4 = creds
	f.up.mu.Unlock()
	const base = "https://s3.us-east-1.amazonaws.com/my-bucket/dir/"
	for _, c := range credClients("go", "curl") {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range []credReq{
				{id: rid(t, "get"), method: http.MethodGet, url: base + "file.txt?versionId=3"},
				{id: rid(t, "put"), method: http.MethodPut, url: base + "up-" + c.name + ".txt", body: `{"object":"` + strings.Repeat("x", 3000) + `"}`},
				{id: rid(t, "client-signature-replaced"), method: http.MethodGet, url: base + "file.txt",
					header: map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKIAJUNK/20200101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00"}},
			} {
				res := c.send(t, f.credEnv, f.s, r)
				if res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"verified":true`) {
					t.Errorf("%s %s: the fake S3 did not verify the signature: %d %s", r.method, r.url, res.Status, trunc(res.Body))
				}
			}
		})
	}
}

func (f *credFixture) neverLeaks(t *testing.T) {
	const host = "bearer.example.com"
	for _, c := range credClients("curl", "go") {
		t.Run(c.name, func(t *testing.T) {
			id := rid(t, "nomatch")
			res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/nope/x"})
			assertDenial(t, "no matching operation on a bound host", res.Status, res.Body, http.StatusForbidden, "capability_denied", "no_matching_operation")
			f.expectNeverReached(t, host, id)
			id = rid(t, "uncredentialed-op")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/public/x"}))
			f.expectNoCredential(t, host, id)
			id = rid(t, "other-host")
			assertAllowed(t, c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://other.example.com/landed"}))
			f.expectNoCredential(t, "other.example.com", id)
		})
	}
	for _, c := range credClients("curl", "go", "python_requests") {
		t.Run(c.name+"/redirect_followed", func(t *testing.T) {
			id := rid(t, "redirect")
			res := c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/redirect", follow: true})
			assertAllowed(t, res)
			f.expectUpstreamAuth(t, host, id, "Bearer "+f.bearerTok)
			f.expectNoCredential(t, "other.example.com", id)
		})
	}
	t.Run("passthrough_tunnel", func(t *testing.T) {
		id := rid(t, "passthrough")
		o := rawExchange(t, f.d.ProxyAddr, f.s.auth(t), "passthrough.example.org:443", tlsOpts{SNI: "passthrough.example.org", Roots: f.roots},
			"GET /echo/pt HTTP/1.1\r\nHost: passthrough.example.org\r\nX-Test-Req: "+id+"\r\nConnection: close\r\n\r\n")
		if o.Err != nil || o.Status != http.StatusOK {
			t.Fatalf("passthrough exchange: %s", o)
		}
		f.expectNoCredential(t, "passthrough.example.org", id)
	})
}

// lifecycle: missing binding, rotation, deletion, unbinding, a kind
// mismatch and session scope, on a connector of its own.
func (f *credFixture) lifecycle(t *testing.T) {
	const host = "life.example.com"
	curl, gocl := credClients("curl")[0], credClients("go")[0]
	get := func(t *testing.T, c credClient, what string) (clientResult, string) {
		t.Helper()
		id := rid(t, what)
		return c.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: "https://" + host + "/echo/" + what}), id
	}
	unavailable := func(t *testing.T, c credClient, what string) {
		t.Helper()
		res, id := get(t, c, what)
		assertDenial(t, what, res.Status, res.Body, http.StatusForbidden, "capability_denied", "credential_unavailable")
		f.expectNeverReached(t, host, id)
	}
	works := func(t *testing.T, c credClient, what, tok string) {
		t.Helper()
		res, id := get(t, c, what)
		assertAllowed(t, res)
		f.expectUpstreamAuth(t, host, id, "Bearer "+tok)
	}
	unavailable(t, curl, "no-binding")
	v1 := newSecret("life token v1", "life1-", "")
	f.setCred(t, v1, "life", "--kind", "bearer")
	unavailable(t, gocl, "credential-but-no-binding")
	f.d.cli(t, "credential", "bind", lifeFQN, "--credential", "life")
	works(t, curl, "v1", v1)
	v2 := newSecret("life token v2", "life2-", "")
	f.setCred(t, v2, "life", "--kind", "bearer")
	works(t, gocl, "rotated-go", v2)
	works(t, curl, "rotated-curl", v2)
	t.Run("session_scope", func(t *testing.T) {
		scoped := f.d.newSession(t, "--name", "scoped", "--connector", bearerFQN)
		id := rid(t, "out-of-scope")
		// Refused at CONNECT or on the inner request: either way with this reason.
		o := rawExchange(t, f.d.ProxyAddr, scoped.auth(t), host+":443", tlsOpts{SNI: host, Roots: scoped.caPool(t)},
			"GET /echo/scoped HTTP/1.1\r\nHost: "+host+"\r\nX-Test-Req: "+id+"\r\nConnection: close\r\n\r\n")
		assertDenial(t, "connector outside the session: "+o.String(), o.Status, o.Body, http.StatusForbidden, "capability_denied", "connector_not_in_session")
		f.expectNeverReached(t, host, id)
		id = rid(t, "in-scope")
		assertAllowed(t, curl.send(t, f.credEnv, scoped, credReq{id: id, method: http.MethodGet, url: "https://bearer.example.com/echo/scoped"}))
		f.expectUpstreamAuth(t, "bearer.example.com", id, "Bearer "+f.bearerTok)
	})
	f.d.cli(t, "credential", "delete", "life")
	unavailable(t, curl, "deleted")
	unavailable(t, gocl, "deleted-go")
	v3 := newSecret("life token v3", "life3-", "")
	f.setCred(t, v3, "life", "--kind", "bearer")
	if _, stderr, err := f.d.run(context.Background(), "credential", "bind", lifeFQN, "--credential", "life"); err != nil {
		t.Logf("re-binding after delete: %v %s", err, stderr)
	}
	works(t, gocl, "recreated", v3)
	f.d.cli(t, "credential", "unbind", lifeFQN)
	unavailable(t, curl, "unbound")
	if _, stderr, err := f.d.run(context.Background(), "credential", "bind", lifeFQN, "--credential", "basicpw"); err != nil {
		t.Logf("binding a bearer operation to a basic credential was refused at bind time: %s", strings.TrimSpace(stderr))
	} else {
		unavailable(t, gocl, "kind-mismatch")
		f.d.cli(t, "credential", "unbind", lifeFQN)
	}
}

func (f *credFixture) listJSON(t *testing.T) {
	out := f.d.cli(t, "credential", "list", "--json")
	var doc struct {
		Credentials []struct {
			Name, Kind string
			Expiry     *time.Time
		}
		Bindings []struct{ Connector, Credential, Env string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("credential list --json printed invalid JSON (%v): %q", err, out)
	}
	kinds := map[string]string{}
	for _, c := range doc.Credentials {
		kinds[c.Name] = c.Kind
	}
	for name, kind := range map[string]string{"linear": "api_key", "bearer": "bearer", "qkey": "api_key", "basicpw": "basic"} {
		if kinds[name] != kind {
			t.Errorf("credential list --json: %s has kind %q, want %q", name, kinds[name], kind)
		}
	}
	found := false
	for _, b := range doc.Bindings {
		found = found || (b.Connector == linearFQN && b.Credential == "linear" && b.Env == "LINEAR_API_KEY")
	}
	if !found {
		t.Errorf("credential list --json lacks the binding %s → linear (env LINEAR_API_KEY): %s", linearFQN, out)
	}
	assertNoSecretForms(t, "credential list --json", clientResult{Body: []byte(out)}, theSuite.secrets.snapshot())
	if strings.Contains(out, "aileron-placeholder-") {
		t.Errorf("credential list --json shows a placeholder value")
	}
}

// oauth2: a token close to expiry is refreshed once under 20 concurrent
// requests, the new token is what the upstream sees and what `credential
// list` reports; a failing token endpoint fails closed without hammering.
func (f *credFixture) oauth2(t *testing.T) {
	const host = "gmail.googleapis.com"
	te := &f.up.tok
	secret, refresh := newSecret("oauth2 client secret", "cs-", "+/"), newSecret("oauth2 refresh token", "1//rt-", "")
	te.configure("aileron-it", secret, refresh)
	te.expiresIn.Store(3600)
	expiry := time.Now().Add(64 * time.Second).Truncate(time.Second) // no refresh for ≥3 s
	f.setOAuth(t, newSecret("oauth2 initial access token", "ya29.initial-", ""), secret, refresh, expiry)
	f.d.cli(t, "credential", "bind", gmailFQN, "--credential", "gmail")
	msg := "https://" + host + "/gmail/v1/users/me/messages/"
	curl, py := credClients("curl")[0], credClients("python_requests")[0]

	id := rid(t, "before-refresh")
	assertAllowed(t, curl.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: msg + "m0"}))
	if n := te.attempts.Load(); n != 0 {
		t.Errorf("%d token requests for a token valid for another %s", n, time.Until(expiry).Round(time.Second))
	}
	if got := f.listExpiry(t, "gmail"); !got.Equal(expiry) {
		t.Errorf("credential list shows expiry %v, want the stored %v", got, expiry)
	}
	// The daemon refreshes 60 s before expiry: wait for that moment.
	time.Sleep(time.Until(expiry.Add(-60*time.Second + 300*time.Millisecond)))
	ids, errs := f.burst(t, 20, msg+"burst")
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent request %d: %v", i, err)
		}
	}
	if n := te.attempts.Load(); n != 1 {
		t.Errorf("%d token requests for 20 concurrent requests needing a refresh, want exactly 1", n)
	}
	fresh := te.last()
	for _, id := range ids {
		f.expectUpstreamAuth(t, host, id, "Bearer "+fresh)
	}
	id = rid(t, "after-refresh")
	assertAllowed(t, py.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: msg + "m1"}))
	f.expectUpstreamAuth(t, host, id, "Bearer "+fresh)
	if got := f.listExpiry(t, "gmail"); got.Before(time.Now().Add(3500*time.Second)) || got.After(time.Now().Add(3700*time.Second)) {
		t.Errorf("credential list shows expiry %v after a refresh issuing expires_in 3600", got)
	}
	if !logHas(f.d, "credential.refreshed") {
		t.Errorf("the daemon log has no credential.refreshed event")
	}

	t.Run("failing_token_endpoint", func(t *testing.T) {
		te.fail.Store(true)
		defer te.fail.Store(false)
		f.setOAuth(t, newSecret("oauth2 stale access token", "ya29.stale-", ""), secret, refresh, time.Now().Add(-time.Hour).Truncate(time.Second))
		before := te.attempts.Load()
		id := rid(t, "refresh-fails")
		res := curl.send(t, f.credEnv, f.s, credReq{id: id, method: http.MethodGet, url: msg + "m2"})
		assertDenial(t, "failed refresh", res.Status, res.Body, http.StatusForbidden, "capability_denied", "credential_unavailable")
		f.expectNeverReached(t, host, id)
		ids, errs := f.burst(t, 20, msg+"backoff")
		for i, err := range errs {
			if err != nil {
				t.Errorf("request %d during backoff: %v", i, err)
			}
		}
		for _, id := range ids {
			f.expectNeverReached(t, host, id)
		}
		if n := te.attempts.Load() - before; n > 3 {
			t.Errorf("21 requests during a failing refresh made %d token requests; the daemon must back off", n)
		}
		if !logHas(f.d, "credential.refresh_failed") {
			t.Errorf("the daemon log has no credential.refresh_failed event")
		}
	})
}

func (f *credFixture) setOAuth(t *testing.T, access, secret, refresh string, expiry time.Time) {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"token_url": "https://oauth2.example.com/token", "client_id": "aileron-it",
		"client_secret": secret, "refresh_token": refresh, "access_token": access, "expiry": expiry.Format(time.RFC3339),
		"scopes": []string{"https://www.googleapis.com/auth/gmail.readonly"}})
	f.setCred(t, string(raw), "gmail", "--kind", "oauth2")
}

// burst sends n concurrent Go requests, each on its own connection, and
// returns their request ids and per-request failures: while the token
// endpoint works each response must be 200, while it fails each must be the
// credential_unavailable denial.
func (f *credFixture) burst(t *testing.T, n int, target string) ([]string, []error) {
	t.Helper()
	clients := make([]*http.Client, n)
	ids := make([]string, n)
	for i := range clients {
		clients[i], ids[i] = goClient(t, f.s), rid(t, fmt.Sprint("burst", i))
	}
	wantOK := !f.up.tok.fail.Load()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := goSend(clients[i], http.MethodGet, target, "", map[string]string{"X-Test-Req": ids[i]})
			theSuite.seen.add("go burst: GET "+target, res.Header, res.Body)
			switch {
			case err != nil:
				errs[i] = err
			case wantOK && res.Status != http.StatusOK:
				errs[i] = fmt.Errorf("status %d: %s", res.Status, trunc(res.Body))
			case !wantOK && (res.Status != http.StatusForbidden || !strings.Contains(string(res.Body), `"credential_unavailable"`)):
				errs[i] = fmt.Errorf("status %d, want 403 credential_unavailable: %s", res.Status, trunc(res.Body))
			}
		}()
	}
	wg.Wait()
	return ids, errs
}

// listExpiry returns the expiry `credential list --json` shows for name.
func (f *credFixture) listExpiry(t *testing.T, name string) time.Time {
	t.Helper()
	var doc struct {
		Credentials []struct {
			Name   string
			Expiry *time.Time
		}
	}
	out := f.d.cli(t, "credential", "list", "--json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("credential list --json printed invalid JSON (%v): %q", err, out)
	}
	for _, c := range doc.Credentials {
		if c.Name == name && c.Expiry != nil {
			return *c.Expiry
		}
	}
	t.Fatalf("credential list --json shows no expiry for %s: %s", name, out)
	return time.Time{}
}
