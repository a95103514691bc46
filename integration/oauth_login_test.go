package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const (
	oauthLoginFQN   = "local://test/oauth-login"
	oauthGuardedFQN = "local://test/oauth-guarded"
)

// TestOAuthLogin drives `aileron credential login` end to end: a headless
// Chromium opens the authorize URL the CLI prints, consents on the
// stand-in provider's page and follows its redirect to the CLI's loopback
// listener; the daemon redeems the code (PKCE checked by the provider)
// through its SSRF guard with verified TLS, stores and binds the token
// set, and a request through the proxy carries the new access token.
// Then: concurrent requests refresh a rotating refresh token once; logging
// in again while requests run rotates the entry without a refresh token
// ever used twice; a foreign state, a denial, a timeout and a token
// endpoint the guard refuses fail the login and store nothing.
func TestOAuthLogin(t *testing.T) {
	e := startOAuthLoginEnv(t)
	p, d := e.p, e.d

	// Log in: the browser consents, the CLI stores and binds.
	login := startLogin(t, d, oauthLoginFQN, "gmail")
	if page := e.consent(t, login, "allow"); !strings.Contains(page, "You may close this window") {
		t.Errorf("the browser was shown %q", page)
	}
	out := login.wait(t, true)
	if !strings.Contains(out, "logged in: stored gmail (oauth2, expires ") || !strings.Contains(out, "bound it to "+oauthLoginFQN) {
		t.Fatalf("credential login printed:\n%s", out)
	}
	if p.redeemed.Load() != 1 {
		t.Fatalf("the provider redeemed %d codes; want 1", p.redeemed.Load())
	}
	firstUpdate := credentialUpdated(t, d, "gmail")

	// Many requests at once need the login's short-lived token refreshed:
	// one refresh grant, every request carries the refreshed chain's token.
	e.burst(t, "after the login", "1")
	if g := p.grants.Load(); g != 1 {
		t.Errorf("24 concurrent requests made %d refresh grants; want 1", g)
	}

	// Logging in again rotates the entry while requests keep going.
	stop := meLoop(e.client)
	login = startLogin(t, d, oauthLoginFQN, "gmail")
	e.consent(t, login, "allow")
	login.wait(t, true)
	if errs := stop(); len(errs) > 0 {
		t.Fatalf("requests during the second login: %v", errs)
	}
	e.burst(t, "after the second login", "2")
	if n := p.reuses.Load(); n != 0 {
		t.Fatalf("the provider saw %d refresh tokens used twice: it revoked their chains", n)
	}
	if !credentialUpdated(t, d, "gmail").After(firstUpdate) {
		t.Errorf("the second login did not rotate the credential")
	}
	trail := d.cli(t, "audit", "tail", "--event", "credential.set", "--json")
	if n := strings.Count(trail, `"via":"login"`); n != 2 || strings.Count(trail, `"connector":"`+oauthLoginFQN+`"`) != 2 {
		t.Errorf("the audit trail has %d credential.set events of a login; want 2 naming the connector:\n%s", n, trail)
	}

	e.refusals(t)
	if p.redeemed.Load() != 2 {
		t.Errorf("the provider redeemed %d codes; want the 2 logins'", p.redeemed.Load())
	}
	if list := d.cli(t, "credential", "list"); strings.Contains(list, "other") {
		t.Errorf("a failed login stored a credential:\n%s", list)
	}
}

// refusals: a foreign state, a denial, a timeout and a token endpoint the
// SSRF guard refuses each fail the login, and its listener is closed.
func (e *oauthLoginEnv) refusals(t *testing.T) {
	t.Run("foreign_state", func(t *testing.T) {
		login := startLogin(t, e.d, oauthLoginFQN, "other")
		redirect := login.redirect(t)
		page := browse(t, e.b, "forged answer", chromedp.Navigate(redirect+"?state=not-this-logins&code=code-forged"),
			chromedp.WaitVisible(chromedp.ID("result")))
		if !strings.Contains(page, "state is not this login's") {
			t.Errorf("the browser was shown %q", page)
		}
		if errOut := login.wait(t, false); !strings.Contains(errOut, "state is not this login's") {
			t.Errorf("credential login said:\n%s", errOut)
		}
		login.refused(t, redirect)
	})
	t.Run("access_denied", func(t *testing.T) {
		login := startLogin(t, e.d, oauthLoginFQN, "other")
		if page := e.consent(t, login, "deny"); !strings.Contains(page, "access_denied") {
			t.Errorf("the browser was shown %q", page)
		}
		if errOut := login.wait(t, false); !strings.Contains(errOut, "the provider refused the authorization: access_denied (The user denied access)") {
			t.Errorf("credential login said:\n%s", errOut)
		}
		login.refused(t, login.redirect(t))
	})
	t.Run("timeout", func(t *testing.T) {
		login := startLogin(t, e.d, oauthLoginFQN, "other", "--timeout", "1s")
		if errOut := login.wait(t, false); !strings.Contains(errOut, "no answer on "+login.redirect(t)+" within 1s") {
			t.Errorf("credential login said:\n%s", errOut)
		}
		login.refused(t, login.redirect(t))
	})
	t.Run("token_endpoint_behind_the_guard", func(t *testing.T) {
		login := startLogin(t, e.d, oauthGuardedFQN, "other")
		e.consent(t, login, "allow")
		if errOut := login.wait(t, false); !strings.Contains(errOut, "token endpoint https://other.example.com:8443/oauth/token") ||
			!strings.Contains(errOut, "resolves to 127.0.0.3 (loopback), which the proxy does not dial") {
			t.Errorf("credential login said:\n%s", errOut)
		}
		if e.dialled.Load() {
			t.Error("the code exchange dialled 127.0.0.3, which egress.allow_cidrs does not allow")
		}
	})
}

// oauthLoginEnv is the login tests' provider, daemon, browser and client.
type oauthLoginEnv struct {
	p       *oauthProvider
	d       *daemon
	b       context.Context
	client  *http.Client
	dialled atomic.Bool // something connected to the guarded token endpoint
}

// startOAuthLoginEnv starts the stand-in provider, a daemon that reaches it
// through upstream.resolve and trusts the test PKI, with the login package
// installed and a second one whose token endpoint is on 127.0.0.3, which
// egress.allow_cidrs does not allow; and a browser that reaches the
// provider's authorize page directly.
func startOAuthLoginEnv(t *testing.T) *oauthLoginEnv {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing (%v): run `make test`, which installs chromium via scripts/test-deps.sh", chromiumPath, err)
	}
	e := &oauthLoginEnv{p: startOAuthProvider(t)}
	e.p.LoginExpiresIn.Store(30) // under the 60 s margin: the first use refreshes
	guarded, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { guarded.Close() })
	go func() {
		for {
			c, err := guarded.Accept()
			if err != nil {
				return
			}
			c.Close()
			e.dialled.Store(true)
		}
	}()
	s := theSuite
	e.d = s.startTestDaemon(t, map[string]any{
		"proxy": map[string]any{"listen": "127.0.0.1:0"},
		"upstream": map[string]any{
			"resolve": map[string]string{"other.example.com:" + e.p.Port(): e.p.Addr, "api.eu.example.com:443": e.p.Addr,
				"other.example.com:8443": guarded.Addr().String()},
			"ca_files": []string{filepath.Join(s.pkiDir, "root.pem")},
		},
		"egress": map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
		"log":    map[string]any{"level": "debug"},
	}, nil)
	e.d.install(t, &specFile{Path: writeOAuthPackage(t, e.p, oauthLoginFQN, e.p.Port()), FQN: oauthLoginFQN, Version: "1.0.0"})
	e.d.install(t, &specFile{Path: writeOAuthPackage(t, e.p, oauthGuardedFQN, "8443"), FQN: oauthGuardedFQN, Version: "1.0.0"})
	e.b = newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP other.example.com 127.0.0.2"),
		chromedp.Flag("ignore-certificate-errors-spki-list", spkiHash(t, filepath.Join(s.pkiDir, "server.pem"))))
	e.client = goClient(t, e.d.newSession(t))
	return e
}

// consent opens the login's authorize URL, presses allow or deny on the
// provider's page, and returns what the CLI's listener showed.
func (e *oauthLoginEnv) consent(t *testing.T, login *loginRun, button string) string {
	t.Helper()
	return browse(t, e.b, button, chromedp.Navigate(login.authURL), chromedp.WaitVisible(chromedp.ID(button)),
		chromedp.Click(chromedp.ID(button)), chromedp.WaitVisible(chromedp.ID("result")))
}

// burst sends 24 API calls at once through the proxy: each must succeed
// with a token of chain.
func (e *oauthLoginEnv) burst(t *testing.T, when, chain string) {
	t.Helper()
	from := e.p.apiCalls()
	if errs := meBurst(e.client, 24); len(errs) > 0 {
		t.Fatalf("requests through the proxy %s: %v", when, errs)
	}
	for _, c := range e.p.chainsSeen(from) {
		if c != chain {
			t.Fatalf("%s the API saw tokens of chains %v; want chain %s only", when, e.p.chainsSeen(from), chain)
		}
	}
}

// writeOAuthPackage writes package fqn whose manifest names p's app, its
// token endpoint on tokenPort, with one operation on api.eu.example.com
// that needs the oauth2 credential.
func writeOAuthPackage(t *testing.T, p *oauthProvider, fqn, tokenPort string) string {
	t.Helper()
	dir := t.TempDir()
	tool, path := map[string][2]string{oauthLoginFQN: {"mail", "/v1/me"}, oauthGuardedFQN: {"guarded", "/v1/guarded"}}[fqn][0],
		map[string]string{oauthLoginFQN: "/v1/me", oauthGuardedFQN: "/v1/guarded"}[fqn]
	spec := `{"schema_version": "aileron.connector.v1",
  "connector": {"fqn": "` + fqn + `", "version": "1.0.0"},
  "tools": [{"name": "` + tool + `", "description": "The OAuth login test's API",
    "operations": [{"name": "me.get", "summary": "Who the token is", "method": "GET", "path": "` + path + `",
      "hosts": ["api.eu.example.com"], "idempotency": "idempotent", "credential": "oauth2"}]}]}`
	base := "https://other.example.com:" + p.Port() + "/oauth/"
	manifest := `[connector]
name = "` + fqn + `"
version = "1.0.0"
[capabilities.network]
hosts = ["api.eu.example.com:443"]
[capabilities.credential]
kind = "oauth2"
scope = "read and send mail"
[capabilities.credential.oauth2]
authorize_url = "` + base + `authorize?access_type=offline"
token_url = "https://other.example.com:` + tokenPort + `/oauth/token"
client_id = "` + oauthAppClientID + `"
client_secret = "` + p.Secret + `"
scopes = ["mail.read", "mail.send"]
`
	for name, body := range map[string]string{"aileron.connector.v1.json": spec, "manifest.toml": manifest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// spkiHash is the base64 SHA-256 of the certificate's public key, for
// Chromium's ignore-certificate-errors-spki-list: the browser trusts the
// stand-in's certificate, and no other.
func spkiHash(t *testing.T, certFile string) string {
	t.Helper()
	sum := sha256.Sum256(readCert(t, certFile).RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// browse runs the browser actions and returns the text of #result, if any.
func browse(t *testing.T, b context.Context, what string, actions ...chromedp.Action[chromedp.Void]) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("result") || {innerText: ""}).innerText`))
	if err != nil {
		t.Fatalf("browser: reading the page: %v", err)
	}
	return v
}

// loginRun is one `aileron credential login` running in the background.
type loginRun struct {
	d       *daemon
	args    []string
	cmd     *exec.Cmd
	out     *lockedBuffer
	errb    *lockedBuffer
	done    chan struct{} // closed when the CLI has exited
	err     error         // its exit, once done is closed
	authURL string
}

// lockedBuffer is a bytes.Buffer safe for a writer and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startLogin starts `credential login NAME --connector FQN --no-browser`
// and waits for the authorize URL it prints.
func startLogin(t *testing.T, d *daemon, fqn, name string, extra ...string) *loginRun {
	t.Helper()
	args := append([]string{"credential", "login", name, "--connector", fqn, "--no-browser"}, extra...)
	l := &loginRun{d: d, args: args, out: &lockedBuffer{}, errb: &lockedBuffer{}, done: make(chan struct{})}
	l.cmd = exec.Command(d.s.bin, args...)
	l.cmd.Env = cleanEnv(d.home)
	l.cmd.Stderr = l.errb
	pipe, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(l.out, line)
			if u, ok := strings.CutPrefix(line, "  https://"); ok && len(urls) == 0 {
				urls <- "https://" + u
			}
		}
		l.err = l.cmd.Wait()
		close(l.done)
	}()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill()
		select {
		case <-l.done:
		case <-time.After(10 * time.Second):
		}
	})
	select {
	case l.authURL = <-urls:
	case <-time.After(30 * time.Second):
		t.Fatalf("credential login printed no authorize URL:\n%s\n%s", l.out, l.errb)
	}
	return l
}

// redirect is the loopback redirect URI the authorize URL names.
func (l *loginRun) redirect(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(l.authURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("redirect_uri")
}

// wait waits for the CLI to exit, which must succeed or fail as ok says,
// and returns its stdout (ok) or stderr (failed).
func (l *loginRun) wait(t *testing.T, ok bool) string {
	t.Helper()
	select {
	case <-l.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("credential login did not end:\n%s\n%s", l.out, l.errb)
	}
	err := l.err
	l.d.s.seen.add("output of `aileron "+strings.Join(l.args, " ")+"`", nil, []byte(l.out.String()+l.errb.String()))
	var exit *exec.ExitError
	switch {
	case ok && err != nil:
		t.Fatalf("credential login: %v\nstdout:\n%s\nstderr:\n%s", err, l.out, l.errb)
	case !ok && !errors.As(err, &exit):
		t.Fatalf("credential login exited with %v; want a failure\nstdout:\n%s", err, l.out)
	case ok:
		return l.out.String()
	}
	return l.errb.String()
}

// refused checks that the login's listener is closed: nothing answers on
// its redirect URI.
func (l *loginRun) refused(t *testing.T, redirect string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	if res, err := c.Get(redirect + "?state=x&code=y"); err == nil {
		res.Body.Close()
		t.Errorf("the login's listener still answers (%d) after the CLI ended", res.StatusCode)
	}
}

// credentialUpdated is the updated_at of credential name in `credential
// list --json`.
func credentialUpdated(t *testing.T, d *daemon, name string) time.Time {
	t.Helper()
	var doc struct {
		Credentials []struct {
			Name      string    `json:"name"`
			UpdatedAt time.Time `json:"updated_at"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal([]byte(d.cli(t, "credential", "list", "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Credentials {
		if c.Name == name {
			return c.UpdatedAt
		}
	}
	t.Fatalf("credential %s is not listed", name)
	return time.Time{}
}

const meURL = "https://api.eu.example.com/v1/me"

// meGet sends one API call through the proxy; nil when it got 200.
func meGet(c *http.Client) error {
	res, err := c.Get(meURL)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		return fmt.Errorf("GET %s: %d %s", meURL, res.StatusCode, trunc(buf.Bytes()))
	}
	return nil
}

// meBurst sends n API calls at once and returns their failures.
func meBurst(c *http.Client, n int) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range n {
		wg.Go(func() {
			if err := meGet(c); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errs
}

// meLoop keeps four callers sending API calls, a few each 100 ms, until
// stop, which returns their failures.
func meLoop(c *http.Client) (stop func() []error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 4 {
		wg.Go(func() {
			tick := time.NewTicker(25 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				if err := meGet(c); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	return func() []error {
		close(done)
		wg.Wait()
		return errs
	}
}
