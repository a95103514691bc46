package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/oauth2"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
)

// defaultLoginTimeout is how long `credential login` waits for the browser.
const defaultLoginTimeout = 5 * time.Minute

// credentialLogin runs the OAuth authorization code flow with PKCE (S256)
// against the OAuth app of the connector's manifest: it listens on
// 127.0.0.1 at a random port, prints the authorize URL (and opens a
// browser where one is available), accepts one answer whose state is this
// login's, and has the daemon redeem the code, store the token set as
// NAME and bind it. The code and the verifier stay in memory.
func credentialLogin(fs *pflag.FlagSet, c *admin.Client, _ io.Reader, stdout io.Writer) error {
	fqn := str(fs, "connector")
	if fs.NArg() != 1 || fqn == "" {
		return usagef("want one credential NAME and --connector FQN")
	}
	timeout, _ := fs.GetDuration("timeout")
	if timeout <= 0 {
		return usagef("--timeout must be positive, e.g. 5m")
	}
	noBrowser, _ := fs.GetBool("no-browser")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	app, err := c.LoginApp(ctx, fqn, fs.Arg(0))
	if err != nil {
		return err
	}
	cb, err := listenCallback()
	if err != nil {
		return err
	}
	defer cb.close()
	verifier := oauth2.GenerateVerifier()
	cfg := &oauth2.Config{ClientID: app.ClientID, RedirectURL: cb.redirect, Scopes: app.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: app.AuthorizeURL}}
	authURL := cfg.AuthCodeURL(cb.state, oauth2.S256ChallengeOption(verifier))
	fmt.Fprintf(stdout, "Log in to %s@%s: open this URL in a browser:\n\n  %s\n\n", app.Connector, app.Version, printable.Line(authURL))
	if !noBrowser && openBrowser(authURL, os.Getenv) {
		fmt.Fprintln(stdout, "(a browser was opened)")
	}
	fmt.Fprintf(stdout, "Waiting up to %s for the answer on %s …\n", timeout, cb.redirect)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, err := cb.wait(wctx, timeout)
	cb.close()
	if err != nil {
		return err
	}
	res, err := c.Login(ctx, admin.LoginRequest{Name: fs.Arg(0), Connector: app.Connector, Code: code,
		CodeVerifier: verifier, RedirectURI: cb.redirect})
	if err != nil {
		return err
	}
	exp := "no expiry"
	if e := res.Credential.Expiry; e != nil {
		exp = "expires " + e.Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "logged in: stored %s (oauth2, %s) and bound it to %s\n", res.Credential.Name, exp, res.Binding.Connector)
	return nil
}

// callback is the login's loopback redirect listener: it accepts exactly
// one answer, then serves nothing more.
type callback struct {
	state    string
	redirect string
	srv      *http.Server
	served   chan struct{}
	result   chan callbackResult // one answer, buffered
	taken    atomic.Bool         // set by the first answer
}

// callbackResult is the one answer: a code, or why the login failed.
type callbackResult struct {
	code string
	err  error
}

// listenCallback listens on 127.0.0.1 at a random port with a fresh
// single-use state.
func listenCallback() (*callback, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the login's redirect on 127.0.0.1: %w", err)
	}
	cb := &callback{state: base64.RawURLEncoding.EncodeToString(raw[:]),
		redirect: "http://" + ln.Addr().String() + "/callback", served: make(chan struct{}),
		result: make(chan callbackResult, 1)}
	cb.srv = &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(cb.served)
		_ = cb.srv.Serve(ln)
	}()
	return cb, nil
}

// ServeHTTP takes the first GET of /callback as the answer: a code whose
// state is this login's, or the provider's error; a state that is not
// this login's fails the login. Anything after it is told the login ended.
func (cb *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/callback" || r.Method != http.MethodGet {
		http.NotFound(w, r)
		return
	}
	if !cb.taken.CompareAndSwap(false, true) {
		loginPage(w, http.StatusGone, "This login has already ended; start another with `aileron credential login`.")
		return
	}
	res := cb.check(r)
	if res.err != nil {
		loginPage(w, http.StatusBadRequest, "The login failed: "+res.err.Error()+" You may close this window.")
	} else {
		loginPage(w, http.StatusOK, "Aileron received the authorization. You may close this window; the terminal shows the result.")
	}
	cb.result <- res
}

// check reads the answer's query.
func (cb *callback) check(r *http.Request) callbackResult {
	q := r.URL.Query()
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(cb.state)) != 1 || len(q["state"]) != 1 {
		return callbackResult{err: errors.New("the answer's state is not this login's (an answer to another login, or forged); " +
			"nothing was stored: run `aileron credential login` again.")}
	}
	if e := q.Get("error"); e != "" {
		msg := "the provider refused the authorization"
		if policy.IsToken(e) && len(e) <= 64 {
			msg += ": " + e
		}
		if d := q.Get("error_description"); d != "" {
			msg += " (" + printable.Clip(printable.Line(d), 200) + ")"
		}
		return callbackResult{err: errors.New(msg + "; nothing was stored.")}
	}
	code := q.Get("code")
	if code == "" || len(q["code"]) != 1 {
		return callbackResult{err: errors.New("the answer carries no authorization code; nothing was stored.")}
	}
	return callbackResult{code: code}
}

// wait returns the answer's code, or fails when the answer is an error, ctx
// ends, or no answer came within timeout.
func (cb *callback) wait(ctx context.Context, timeout time.Duration) (string, error) {
	select {
	case res := <-cb.result:
		if res.err != nil {
			return "", fmt.Errorf("OAuth login: %w", res.err)
		}
		return res.code, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("OAuth login: no answer on %s within %s; nothing was stored: run the command again "+
				"(with --timeout to wait longer)", cb.redirect, timeout)
		}
		return "", fmt.Errorf("OAuth login interrupted; nothing was stored")
	}
}

// close stops the listener once the page of the answer was sent.
func (cb *callback) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cb.srv.Shutdown(ctx); err != nil {
		_ = cb.srv.Close()
	}
	<-cb.served
}

// loginPage answers the browser with a small page.
func loginPage(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>Aileron login</title><p id=result>%s</p>\n", html.EscapeString(msg))
}

// openBrowser opens url with the desktop's opener when there is a display
// (xdg-open with DISPLAY or WAYLAND_DISPLAY set; open on macOS), and
// reports whether it started one.
func openBrowser(url string, getenv func(string) string) bool {
	name := "xdg-open"
	switch {
	case runtime.GOOS == "darwin":
		name = "open"
	case getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "":
		return false
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return false
	}
	cmd := exec.Command(path, url)
	if err := cmd.Start(); err != nil {
		return false
	}
	go func() { _ = cmd.Wait() }()
	return true
}
