package admin

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/store"
)

// daemon is an admin API served on a unix socket in a temp dir.
type daemon struct {
	admin   *API
	client  *Client
	reloads atomic.Int32
	home    string

	mu     sync.Mutex
	events []event
}

// event is one OnEvent call.
type event struct {
	name    audit.EventName
	details map[string]string
}

func startDaemon(t *testing.T) *daemon {
	t.Helper()
	return startDaemonWith(t, nil)
}

// startDaemonWith is startDaemon with setup, when not nil, run on the API
// before it serves.
func startDaemonWith(t *testing.T, setup func(d *daemon)) *daemon {
	t.Helper()
	home := t.TempDir()
	d := &daemon{home: home}
	sm := sessionsAt(t, home, testkit.NewClock())
	st := &store.Store{Dir: filepath.Join(home, "store"), DB: sm.DB}
	d.admin = &API{Store: st, Sessions: sm,
		OnStoreChange: func() error { d.reloads.Add(1); return nil },
		OnEvent: func(name audit.EventName, details map[string]string) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.events = append(d.events, event{name, details})
		}}
	if setup != nil {
		setup(d)
	}
	sock := filepath.Join(home, "admin.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: d.admin.Handler(), ConnContext: ConnContext}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	d.client = &Client{Socket: sock}
	return d
}

// install offers the package at path and installs it with the consent
// --yes gives, as the CLI does; an offer refused is install's error.
func (d *daemon) install(ctx context.Context, path string) (store.Installed, error) {
	return d.installWith(ctx, InstallRequest{Path: path})
}

// installWith is install with the rest of req's choices.
func (d *daemon) installWith(ctx context.Context, req InstallRequest) (store.Installed, error) {
	return installYes(ctx, d.client, req)
}

// installYes offers req's package through c and installs it with the
// consent --yes gives.
func installYes(ctx context.Context, c *Client, req InstallRequest) (store.Installed, error) {
	offer, err := c.OfferConnectorWith(ctx, req)
	if err != nil {
		return store.Installed{}, err
	}
	req.Consent = &store.Consent{Hash: offer.Hash, Via: store.ViaYes}
	return c.InstallConnectorWith(ctx, req)
}

// apiError asserts err is an *dataplane.Refusal with the given status and reason.
func apiError(t *testing.T, what string, err error, status int, reason policy.Reason) *dataplane.Refusal {
	t.Helper()
	var ae *dataplane.Refusal
	if !errors.As(err, &ae) || ae.Status != status || ae.Reason != reason {
		t.Fatalf("%s: err = %v, want *dataplane.Refusal %d %s", what, err, status, reason)
	}
	return ae
}

func TestAdminSessionsRoundTrip(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	if err := d.client.Health(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := d.client.CreateSession(ctx, sessions.CreateRequest{Connectors: []string{testkit.GoogleFQN}})
	apiError(t, "scope naming a connector not installed", err, 400, "invalid_argument")
	if _, err := d.install(ctx, testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))); err != nil {
		t.Fatal(err)
	}
	info, err := d.client.CreateSession(ctx, sessions.CreateRequest{Name: "ci", TTL: 90 * time.Minute, Connectors: []string{testkit.GoogleFQN}})
	if err != nil {
		t.Fatal(err)
	}
	if info.ProxyURL == "" || info.Name != "ci" || info.ExpiresAt.Sub(info.CreatedAt) != 90*time.Minute {
		t.Errorf("created %+v", info)
	}
	got, err := d.client.GetSession(ctx, info.ID)
	if err != nil || got.ProxyURL != info.ProxyURL {
		t.Errorf("GetSession = %+v, %v", got, err)
	}
	list, err := d.client.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ProxyURL != "" {
		t.Errorf("ListSessions = %+v, %v", list, err)
	}
	if _, err := d.admin.Sessions.Authenticate(testkit.ProxyCreds(t, info.ProxyURL)); err != nil {
		t.Errorf("token from the API does not authenticate: %v", err)
	}
	if err := d.client.DeleteSession(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
	_, err = d.client.GetSession(ctx, info.ID)
	apiError(t, "get deleted", err, 404, "not_found")
	apiError(t, "delete deleted", d.client.DeleteSession(ctx, info.ID), 404, "not_found")
	_, err = d.client.CreateSession(ctx, sessions.CreateRequest{TTL: -time.Second})
	apiError(t, "negative ttl", err, 400, "invalid_argument")
}

func TestAdminConnectorsRoundTrip(t *testing.T) {
	d := startDaemon(t)
	ctx := context.Background()
	dir := t.TempDir()
	inst, err := d.install(ctx, testkit.WriteFile(t, dir, "google.json", testkit.Spec(t, "gmail")))
	if err != nil {
		t.Fatal(err)
	}
	if inst.FQN != testkit.GoogleFQN || !inst.Active || d.reloads.Load() != 1 {
		t.Errorf("installed %+v, reloads %d", inst, d.reloads.Load())
	}
	list, err := d.client.ListConnectors(ctx)
	if err != nil || len(list) != 1 || list[0].Hash != inst.Hash {
		t.Errorf("ListConnectors = %+v, %v", list, err)
	}

	// A relative path is made absolute by the client.
	testkit.WriteFile(t, dir, "linear.json", testkit.Spec(t, "linear"))
	gmail, linear := testkit.Spec(t, "gmail"), testkit.Spec(t, "linear")
	t.Chdir(dir)
	if _, err := d.install(ctx, "linear.json"); err != nil {
		t.Errorf("relative install: %v", err)
	}

	clash := testkit.EditJSON(t, linear, func(m map[string]any) {
		m["connector"].(map[string]any)["fqn"] = "github://other/linear-fork"
	})
	_, err = d.install(ctx, testkit.WriteFile(t, dir, "fork.json", clash))
	ae := apiError(t, "conflicting install", err, 409, "conflict")
	if !strings.Contains(ae.Message, testkit.LinearFQN) {
		t.Errorf("conflict message %q does not name the other connector", ae.Message)
	}
	bad := testkit.EditJSON(t, gmail, func(m map[string]any) { m["schema_version"] = "v0" })
	_, err = d.install(ctx, testkit.WriteFile(t, dir, "bad.json", bad))
	if ae := apiError(t, "bad spec", err, 400, "invalid_spec"); !strings.Contains(ae.Message, "bad.json: $.schema_version") {
		t.Errorf("bad spec message %q lacks file and JSON path", ae.Message)
	}

	// A package whose spec reaches beyond its manifest is a bad request
	// naming the excess.
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, store.SpecFileName, testkit.WithVersion(t, gmail, "1.2.4"))
	testkit.WriteFile(t, pkg, "manifest.toml", []byte("[connector]\nname = \""+testkit.GoogleFQN+"\"\nversion = \"1.2.4\"\n"))
	_, err = d.install(ctx, pkg)
	if ae := apiError(t, "manifest excess", err, 400, "invalid_package"); !strings.Contains(ae.Message, `reaches host "gmail.googleapis.com:443"`) {
		t.Errorf("manifest excess message %q does not name the host", ae.Message)
	}

	problems, err := d.client.VerifyConnectors(ctx)
	if err != nil || len(problems) != 0 {
		t.Errorf("VerifyConnectors = %v, %v", problems, err)
	}
	testkit.WriteFile(t, inst.Dir, "evil", []byte("x"))
	problems, err = d.client.VerifyConnectors(ctx)
	if err != nil || len(problems) != 1 || problems[0].Ref != inst.Ref() {
		t.Errorf("VerifyConnectors after tampering = %v, %v", problems, err)
	}

	apiError(t, "malformed ref", d.client.RemoveConnector(ctx, testkit.GoogleFQN), 400, "invalid_argument")
	apiError(t, "missing ref", d.client.RemoveConnector(ctx, testkit.GoogleFQN+"@9.0.0"), 404, "not_found")
	reloads := d.reloads.Load()
	if err := d.client.RemoveConnector(ctx, inst.Ref()); err != nil {
		t.Fatal(err)
	}
	if d.reloads.Load() != reloads+1 {
		t.Error("OnStoreChange not called after remove")
	}
	if list, _ := d.client.ListConnectors(ctx); len(list) != 1 || list[0].FQN != testkit.LinearFQN {
		t.Errorf("after remove: %+v", list)
	}
}

func TestAdminReloadFailure(t *testing.T) {
	d := startDaemon(t)
	d.admin.OnStoreChange = func() error { return errors.New("compile exploded") }
	_, err := d.install(context.Background(), testkit.WriteFile(t, t.TempDir(), "g.json", testkit.Spec(t, "gmail")))
	ae := apiError(t, "install with failing reload", err, 500, "policy_reload_failed")
	if !strings.Contains(ae.Message, "compile exploded") {
		t.Errorf("message %q", ae.Message)
	}
}

func TestAdminRawRequests(t *testing.T) {
	d := startDaemon(t)
	hc := d.client.unixClient()
	defer hc.CloseIdleConnections()
	tests := []struct {
		method, path, body string
		status             int
		reason             policy.Reason
	}{
		{"POST", "/v1/connectors", `{"path":"relative/spec.json"}`, 400, "invalid_argument"},
		{"POST", "/v1/connectors", `{"path":`, 400, "invalid_argument"},
		{"POST", "/v1/connectors", `{"path":"/x","extra":1}`, 400, "invalid_argument"},
		{"POST", "/v1/connectors/remove", `{"ref":"a"} {"ref":"b"}`, 400, "invalid_argument"},
		{"POST", "/v1/sessions", `{"ttl":"soon"}`, 400, "invalid_argument"},
		{"GET", "/v1/nope", ``, 404, "no_route"},
		{"GET", "/v1/sessions/s_aaaaaaaaaaaaaaaaaaaa", ``, 404, "not_found"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://aileron"+tt.path, strings.NewReader(tt.body))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 4096)
		n, _ := resp.Body.Read(data)
		resp.Body.Close()
		ae := dataplane.ParseRefusal(resp.StatusCode, data[:n])
		if resp.StatusCode != tt.status || ae.Reason != tt.reason || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %s: %d %+v, want %d %s", tt.method, tt.path, tt.body, resp.StatusCode, ae, tt.status, tt.reason)
		}
	}
}

func TestClientDaemonUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	err := (&Client{Socket: sock}).Health(context.Background())
	if !errors.Is(err, ErrDaemonUnreachable) || !strings.Contains(err.Error(), "aileron daemon") || !strings.Contains(err.Error(), sock) {
		t.Errorf("Health = %v, want ErrDaemonUnreachable with a hint naming %s", err, sock)
	}
}

func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "admin.sock")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	if m := testkit.Mode(t, sock); m != 0o600 {
		t.Errorf("socket mode %v, want 0600", m)
	}
	if m := testkit.Mode(t, filepath.Dir(sock)); m != 0o700 {
		t.Errorf("socket dir mode %v, want 0700", m)
	}
	if entries, _ := os.ReadDir(filepath.Dir(sock)); len(entries) != 1 {
		t.Errorf("socket dir holds %v, want only the socket", entries)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	if _, err := ListenUnix(sock); !errors.Is(err, ErrDaemonRunning) {
		t.Errorf("second ListenUnix = %v, want ErrDaemonRunning", err)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("Close left the socket file: %v", err)
	}

	// A stale socket (its daemon gone without cleanup) is replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = ListenUnix(sock)
	if err != nil {
		t.Fatalf("ListenUnix over a stale socket: %v", err)
	}
	ln.Close()

	// A regular file is never removed.
	testkit.WriteFile(t, filepath.Dir(sock), "admin.sock", []byte("keep"))
	if _, err := ListenUnix(sock); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("ListenUnix over a file = %v", err)
	}
	if data, _ := os.ReadFile(sock); string(data) != "keep" {
		t.Error("ListenUnix touched a regular file")
	}
}
