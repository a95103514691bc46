package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"

	"github.com/aileronhq/aileron/notify"
)

// hookReceiver is a webhook endpoint on loopback that checks each
// delivery's signature with the shared secret and keeps the events.
type hookReceiver struct {
	mu     sync.Mutex
	events []notify.Event
	bad    []string
}

func (h *hookReceiver) handler(secret []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if got, want := r.Header.Get(notify.HeaderSignature), notify.Sign(secret, r.Header.Get(notify.HeaderTimestamp), body); got != want {
			h.bad = append(h.bad, "signature "+got)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev notify.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			h.bad = append(h.bad, string(body))
		}
		h.events = append(h.events, ev)
	}
}

// wait returns the first event named name, within 10 s.
func (h *hookReceiver) wait(t *testing.T, name string) notify.Event {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		for _, ev := range h.events {
			if ev.Event == name {
				h.mu.Unlock()
				return ev
			}
		}
		bad := h.bad
		h.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("deliveries that did not verify: %q", bad)
		}
	}
	t.Fatalf("no %s delivery within 10 s", name)
	return notify.Event{}
}

// TestApprovalWebhooks: a held request is announced to the configured
// webhook at once, signed, with its review URL; the decision follows; and
// `approvals test-webhooks` checks the hook by hand.
func TestApprovalWebhooks(t *testing.T) {
	secret := []byte("hook-secret-" + randHex(8))
	secretFile := filepath.Join(t.TempDir(), "hook.secret")
	if err := os.WriteFile(secretFile, append(secret, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := &hookReceiver{}
	srv := httptest.NewServer(rcv.handler(secret))
	t.Cleanup(srv.Close)
	e := startApprovalEnv(t, map[string]any{"hold": "30s",
		"webhooks": []any{map[string]any{"url": srv.URL + "/hook", "secret_file": secretFile}}}, nil)
	body := sendBody("hook-" + randHex(6))
	held := startHeld(e.c, gmailSendURL, body)
	req := rcv.wait(t, "approval.requested")
	if req.ApprovalID == "" || req.Method != "POST" || !strings.HasPrefix(req.Host, gmailSendHost) || !strings.Contains(req.ReviewURL, req.ApprovalID) {
		t.Fatalf("approval.requested delivery %+v", req)
	}
	e.d.cli(t, "approvals", "approve", req.ApprovalID)
	if r := <-held; r.status != http.StatusOK {
		t.Fatalf("the held request after approval: %d %s", r.status, trunc(r.body))
	}
	if ev := rcv.wait(t, "approval.approved"); ev.ApprovalID != req.ApprovalID || !strings.HasPrefix(ev.DecidedBy, "cli:") {
		t.Fatalf("approval.approved delivery %+v", ev)
	}
	if cfg := e.d.cli(t, "config", "print"); !strings.Contains(cfg, "# the running daemon's configuration (pid ") ||
		!strings.Contains(cfg, "hold: 30s") || !strings.Contains(cfg, srv.URL+"/hook") {
		t.Fatalf("config print does not show the running daemon's settings:\n%s", cfg)
	}
	out := e.d.cli(t, "approvals", "test-webhooks")
	if !strings.Contains(out, "ok   "+srv.URL+"/…: HTTP 200") || strings.Contains(out, "/hook") { // the path may be a secret
		t.Fatalf("approvals test-webhooks: %s", out)
	}
	rcv.wait(t, notify.EventTest)
}

// TestTestWebhooksWithoutHooks: asking a daemon with no webhooks to test
// them says so, and how to add one.
func TestTestWebhooksWithoutHooks(t *testing.T) {
	d := theSuite.mainDaemon(t)
	_, errOut, err := d.run(t.Context(), "approvals", "test-webhooks")
	if err == nil || !strings.Contains(errOut, "no approval.webhooks are configured") {
		t.Fatalf("approvals test-webhooks without hooks: %v %s", err, errOut)
	}
}

// TestApprovalsPageOverHTTPS: published under a name with a certificate
// (admin.web_tls_cert, admin.web_tls_key, admin.web_hosts), the approvals
// page answers over HTTPS for that name only, review URLs name it, and
// its session cookie is Secure.
func TestApprovalsPageOverHTTPS(t *testing.T) {
	root, err := ca.New(ca.Options{CommonName: "approvals test root"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := root.Leaf("approvals.test")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "web.pem"), filepath.Join(dir, "web.key")
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o600),
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)); err != nil {
		t.Fatal(err)
	}
	secret := []byte("hook-" + randHex(8))
	secretFile := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(secretFile, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	rcv := &hookReceiver{}
	hook := httptest.NewServer(rcv.handler(secret))
	t.Cleanup(hook.Close)
	e := startApprovalEnv(t, map[string]any{"hold": "30s",
		"webhooks": []any{map[string]any{"url": hook.URL, "secret_file": secretFile}}}, func(cfg map[string]any) {
		cfg["admin"] = map[string]any{"web_listen": "127.0.0.1:0", "web_tls_cert": certFile, "web_tls_key": keyFile,
			"web_hosts": []any{"approvals.test"}}
	})
	addr := webAddr(t, e.d)
	roots := x509.NewCertPool()
	roots.AddCert(root.Certificate())
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr) // approvals.test is this daemon
			}}}
	_, port, _ := net.SplitHostPort(addr)
	base := "https://approvals.test:" + port
	resp, err := c.Get(base + "/login")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/login: %v %v", base, err, resp)
	}
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, base+"/login", nil)
	req.Host = "evil.test:" + port
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("another host name: %v %v", err, resp)
	}
	if resp, err := http.Get("http://" + addr + "/login"); err == nil && resp.StatusCode < 400 {
		t.Fatalf("the page answers plain HTTP too: %d", resp.StatusCode)
	}
	token := strings.TrimSpace(e.d.cli(t, "approvals", "web-token"))
	resp, err = c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil || resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("login over HTTPS: %v %v (the cookie must be Secure)", err, resp)
	}
	held := startHeld(e.c, gmailSendURL, sendBody("https-"+randHex(6)))
	req2 := rcv.wait(t, "approval.requested")
	if want := base + "/approvals/" + req2.ApprovalID; req2.ReviewURL != want {
		t.Fatalf("review URL %q, want %q", req2.ReviewURL, want)
	}
	e.d.cli(t, "approvals", "approve", req2.ApprovalID)
	<-held
}
