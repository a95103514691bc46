package integration

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The stand-in OAuth provider of the login tests: a publisher's OAuth app
// on other.example.com (an authorize page a browser drives, a token
// endpoint) and its API on api.eu.example.com, served over TLS with the
// committed test PKI on 127.0.0.2. It checks what a real provider checks
// (client, redirect URI, PKCE S256 challenge against the verifier, a code
// redeemed once) and rotates refresh tokens the strict way: a refresh
// token used twice revokes its whole chain, access tokens included.

const (
	oauthAppClientID = "aileron-it-app"
	oauthAppScopes   = "mail.read mail.send"
)

// oauthProvider is the stand-in provider.
type oauthProvider struct {
	Addr   string // 127.0.0.2:PORT
	Secret string // the app's client secret
	srv    *http.Server
	done   chan struct{}

	// LoginExpiresIn is the lifetime of the tokens a code redeems, in
	// seconds; under the daemon's 60 s margin, the first use refreshes.
	LoginExpiresIn atomic.Int32

	mu       sync.Mutex
	pending  map[string]url.Values // consent id → the authorize request
	codes    map[string]url.Values // code → the authorize request
	refresh  map[string]*chainRefresh
	access   map[string]int // access token → chain
	revoked  map[int]bool
	chains   int
	seq      int
	apiSeen  []string // the chain of each API call's token, "-" when refused
	redeemed atomic.Int32
	grants   atomic.Int32 // refresh grants
	reuses   atomic.Int32 // refresh tokens used twice
}

// chainRefresh is one refresh token the provider issued.
type chainRefresh struct {
	chain int
	used  bool
}

// startOAuthProvider starts the stand-in on 127.0.0.2, closed in t's
// cleanup.
func startOAuthProvider(t *testing.T) *oauthProvider {
	t.Helper()
	pki := theSuite.pkiDir
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "server.pem"), filepath.Join(pki, "server-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &oauthProvider{Addr: ln.Addr().String(), Secret: "cs-app-" + randHex(16), done: make(chan struct{}),
		pending: map[string]url.Values{}, codes: map[string]url.Values{}, refresh: map[string]*chainRefresh{},
		access: map[string]int{}, revoked: map[int]bool{}}
	// The client secret is not registered for the secret scan: it is
	// published in the package's manifest (a public client's secret), so
	// the store holds it in the clear.
	p.LoginExpiresIn.Store(3600)
	p.srv = &http.Server{Handler: p, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.srv.ServeTLS(ln, "", "")
	}()
	t.Cleanup(func() { _ = p.srv.Close(); <-p.done })
	return p
}

// Port is the provider's port.
func (p *oauthProvider) Port() string {
	_, port, _ := net.SplitHostPort(p.Addr)
	return port
}

func (p *oauthProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	if host == "" {
		host = r.Host
	}
	switch {
	case host == "other.example.com" && r.URL.Path == "/oauth/authorize" && r.Method == http.MethodGet:
		p.authorize(w, r)
	case host == "other.example.com" && r.URL.Path == "/oauth/decide" && r.Method == http.MethodPost:
		p.decide(w, r)
	case host == "other.example.com" && r.URL.Path == "/oauth/token" && r.Method == http.MethodPost:
		p.token(w, r)
	case host == "api.eu.example.com" && r.URL.Path == "/v1/me":
		p.me(w, r)
	default:
		http.NotFound(w, r)
	}
}

// authorize checks the authorization request and shows a consent page
// with Allow and Deny.
func (p *oauthProvider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	switch {
	case q.Get("response_type") != "code", q.Get("client_id") != oauthAppClientID, q.Get("scope") != oauthAppScopes,
		q.Get("code_challenge_method") != "S256", len(q.Get("code_challenge")) != 43, len(q.Get("state")) < 32,
		q.Get("access_type") != "offline", err != nil, redirect.Scheme != "http", redirect.Hostname() != "127.0.0.1",
		redirect.Path != "/callback":
		http.Error(w, "invalid_request: "+q.Encode(), http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	p.seq++
	id := fmt.Sprintf("consent-%d", p.seq)
	p.pending[id] = q
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><title>Stand-in provider</title><p>Allow %s to read and send mail?</p>
<form method=post action=/oauth/decide><input type=hidden name=id value=%q>
<button id=allow name=decision value=allow>Allow</button><button id=deny name=decision value=deny>Deny</button></form>`,
		html.EscapeString(oauthAppClientID), id)
}

// decide sends the browser back to the redirect URI with a code, or with
// access_denied.
func (p *oauthProvider) decide(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	q, ok := p.pending[r.PostFormValue("id")]
	delete(p.pending, r.PostFormValue("id"))
	back := url.Values{"state": {q.Get("state")}}
	if ok && r.PostFormValue("decision") == "allow" {
		code := "code-" + randHex(16)
		p.seq++
		theSuite.secrets.add(fmt.Sprintf("OAuth login test authorization code #%d", p.seq), code)
		p.codes[code] = q
		back.Set("code", code)
	} else {
		back.Set("error", "access_denied")
		back.Set("error_description", "The user denied access")
	}
	p.mu.Unlock()
	if !ok {
		http.Error(w, "unknown consent", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
}

// token redeems a code (authorization_code) or rotates a refresh token
// (refresh_token).
func (p *oauthProvider) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	if id != oauthAppClientID || secret != p.Secret {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.PostFormValue("grant_type") {
	case "authorization_code":
		q, ok := p.codes[r.PostFormValue("code")]
		delete(p.codes, r.PostFormValue("code"))
		verifier := r.PostFormValue("code_verifier")
		sum := sha256.Sum256([]byte(verifier))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != q.Get("code_challenge") ||
			r.PostFormValue("redirect_uri") != q.Get("redirect_uri") {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		p.seq++
		theSuite.secrets.add(fmt.Sprintf("OAuth login test PKCE verifier #%d", p.seq), verifier)
		p.redeemed.Add(1)
		p.chains++
		p.issue(w, p.chains, int(p.LoginExpiresIn.Load()))
	case "refresh_token":
		tok := p.refresh[r.PostFormValue("refresh_token")]
		if tok != nil && tok.used {
			p.reuses.Add(1)
			p.revoked[tok.chain] = true
		}
		if tok == nil || tok.used || p.revoked[tok.chain] {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		tok.used = true
		p.grants.Add(1)
		p.issue(w, tok.chain, 3600)
	default:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
	}
}

// issue answers with a new access and refresh token of chain. p.mu is held.
func (p *oauthProvider) issue(w http.ResponseWriter, chain, expiresIn int) {
	access := fmt.Sprintf("ya29.chain%d-%s", chain, randHex(12))
	refresh := fmt.Sprintf("1//rt-chain%d-%s", chain, randHex(12))
	p.seq++
	theSuite.secrets.add(fmt.Sprintf("OAuth login test access token #%d", p.seq), access)
	theSuite.secrets.add(fmt.Sprintf("OAuth login test refresh token #%d", p.seq), refresh)
	p.access[access] = chain
	p.refresh[refresh] = &chainRefresh{chain: chain}
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d,"refresh_token":%q,"scope":%q}`,
		access, expiresIn, refresh, oauthAppScopes)
}

// me answers 200 with the token's chain to a live chain's access token.
func (p *oauthProvider) me(w http.ResponseWriter, r *http.Request) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	chain, ok := p.access[tok]
	ok = ok && !p.revoked[chain]
	seen := "-"
	if ok {
		seen = fmt.Sprint(chain)
	}
	p.apiSeen = append(p.apiSeen, seen)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_token"}`)
		return
	}
	fmt.Fprintf(w, `{"chain":%d}`, chain)
}

// chainsSeen returns the chains of the API calls since the n-th.
func (p *oauthProvider) chainsSeen(from int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.apiSeen[from:]...)
}

// apiCalls counts the API calls so far.
func (p *oauthProvider) apiCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.apiSeen)
}
