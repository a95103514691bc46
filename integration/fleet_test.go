package integration

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
)

// A fleet: two daemons on one real Postgres server (started by the test,
// on a unix socket) and one fleet key file.

// fleetNode starts daemon name of the fleet on dsn; the fleet key and the
// vault key are files in keys, which every node reads.
func fleetNode(t *testing.T, dsn, keys, name string) *daemon {
	t.Helper()
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg["state"] = map[string]any{"backend": "postgres", "dsn": dsn, "node": name,
		"fleet_key_file": filepath.Join(keys, "fleet.key"), "vault_key_file": filepath.Join(keys, "vault.key")}
	cfg["approval"] = map[string]any{"hold": "20s"}
	return theSuite.startTestDaemon(t, cfg, nil)
}

// via returns a client of session s whose proxy is node d (any node).
func (s *session) via(t *testing.T, d *daemon) *http.Client {
	t.Helper()
	u := s.proxyURL(t)
	u.Host = d.ProxyAddr
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: &tls.Config{RootCAs: s.caPool(t)}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// heldOn sends body to gmail's send through c, waits until session sess
// has the pending approval on record, and returns it with the result
// channel.
func heldOn(t *testing.T, d *daemon, c *http.Client, sess *session, body string) (approvalJSON, <-chan heldResult) {
	t.Helper()
	ch := startHeld(c, gmailSendURL, body)
	var found approvalJSON
	waitFor(t, "the held request's approval", 30*time.Second, func() bool {
		for _, ap := range listApprovals(t, d, "pending") {
			if ap.Session == sess.ID {
				found = ap
				return true
			}
		}
		return false
	})
	return found, ch
}

// TestFleetTwoNodes: a session created on node A is served by node B with
// the same CA; a request held on B is released by an approval decided on
// A within a second, also after B's listening connection was killed; 20
// identical held requests over both nodes send one request upstream; with
// Postgres stopped, what needs the shared state is refused, and the nodes
// recover on their own when it is back.
func TestFleetTwoNodes(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	keys := t.TempDir()
	a := fleetNode(t, dsn, keys, "node-a")
	b := fleetNode(t, dsn, keys, "node-b")
	a.install(t, mustSpec(t, "gmail"))
	if err := theSuite.bindTestCredential(a, gmailFQN); err != nil { // set on A, used by B too
		t.Fatal(err)
	}
	sess := a.newSession(t)
	viaA, viaB := sess.via(t, a), sess.via(t, b)

	// B learns of the connector A installed and serves A's session.
	get := urlFor(gmailSendHost, concretePath(gmailMessageGet(t).Path, "m1"))
	waitFor(t, "node B to forward with the connector and credential set on node A", 20*time.Second, func() bool {
		status, _, _ := goDo(t, viaB, http.MethodGet, get, "")
		return status == http.StatusOK
	})
	caA := sess.caCert(t)
	var listB []session
	if out := b.cli(t, "session", "list", "--json"); json.Unmarshal([]byte(out), &listB) != nil || len(listB) != 1 || listB[0].ID != sess.ID {
		t.Fatalf("session list on B = %s; want A's session", out)
	}
	if caB := readCert(t, listB[0].CACertPath); !bytes.Equal(caA.Raw, caB.Raw) {
		t.Fatal("node B presents another CA certificate for the session than node A")
	}
	userinfo := sess.ProxyURL[len("http://"):strings.Index(sess.ProxyURL, "@")]
	if env := b.cli(t, "session", "env", sess.ID); !strings.Contains(env, "http://"+userinfo+"@"+b.ProxyAddr) {
		t.Error("session env on node B does not give A's session id and token at B's proxy address")
	}

	t.Run("held on B, approved on A", func(t *testing.T) {
		releaseWithin(t, pg, a, b, viaB, sess, false)
	})
	t.Run("held on B, approved on A after B's listener was killed", func(t *testing.T) {
		releaseWithin(t, pg, a, b, viaB, sess, true)
	})
	t.Run("20 identical requests over two nodes, one approval", func(t *testing.T) {
		identicalOverNodes(t, a, viaA, viaB, sess)
	})
	t.Run("Postgres down fails closed, then recovers", func(t *testing.T) {
		stateDown(t, pg, a, b, viaA, viaB, sess, get)
	})
	t.Run("each node's trail, verified and merged", func(t *testing.T) {
		fleetAudit(t, a, b)
	})
	t.Run("deleted on A, refused on B", func(t *testing.T) {
		auth := sess.auth(t)
		a.cli(t, "session", "delete", sess.ID)
		waitFor(t, "node B to refuse a CONNECT of the session deleted on node A", 10*time.Second, func() bool {
			conn, o := rawConnect(t, b.ProxyAddr, "gmail.googleapis.com:443", auth)
			if conn != nil {
				conn.Close()
			}
			return o.Status == http.StatusProxyAuthRequired
		})
	})
}

// fleetAudit: each node verifies its own trail against its record in the
// shared state; node A verifies node B's trail (a copy of its directory)
// against B's record, and refuses it as A's; export merges both trails by
// time, every line carrying its node.
func fleetAudit(t *testing.T, a, b *daemon) {
	// The CLI finds the shared state through the node's configuration.
	conf := func(d *daemon) string { return filepath.Join(d.home, "config.yaml") }
	for _, d := range []*daemon{a, b} {
		if out := d.cli(t, "audit", "verify", "--config", conf(d)); !strings.Contains(out, "unchanged") {
			t.Errorf("audit verify on a node does not check its record: %s", out)
		}
	}
	// Without the node's configuration a command that reads the state refuses
	// (it would read a SQLite file of its own).
	if _, stderr, err := b.run(t.Context(), "audit", "key"); err == nil || !strings.Contains(stderr, `is the home of node "node-b" of a fleet`) {
		t.Errorf("audit key on a fleet node's home without its config (err %v): %s", err, stderr)
	}
	if _, stderr, err := a.run(t.Context(), "audit", "verify", "--config", conf(a), "--dir", filepath.Join(b.home, "audit"), "--node", "node-x", "--key", "x"); err == nil || !strings.Contains(stderr, "nodes on record: node-a, node-b") {
		t.Errorf("audit verify --node of an unknown node (err %v): %s", err, stderr)
	}
	var status struct {
		Nodes []struct {
			Node  string `json:"node"`
			Alive bool   `json:"alive"`
		} `json:"nodes"`
	}
	if out := a.cli(t, "fleet", "status", "--config", conf(a), "--json"); json.Unmarshal([]byte(out), &status) != nil ||
		len(status.Nodes) != 2 || !status.Nodes[0].Alive || !status.Nodes[1].Alive || status.Nodes[1].Node != "node-b" {
		t.Errorf("fleet status = %s; want node-a and node-b, alive", out)
	}
	keyB := strings.TrimSpace(b.cli(t, "audit", "key", "--config", conf(b)))
	dirB := filepath.Join(b.home, "audit")
	if out := a.cli(t, "audit", "verify", "--config", conf(a), "--dir", dirB, "--node", "node-b", "--key", keyB); !strings.Contains(out, "unchanged") {
		t.Errorf("node A verifying node B's trail: %s", out)
	}
	if _, stderr, err := a.run(t.Context(), "audit", "verify", "--config", conf(a), "--dir", dirB, "--node", "node-a", "--key", keyB); err == nil || !strings.Contains(stderr, "swapped") {
		t.Errorf("B's trail passed as node A's (err %v): %s", err, stderr)
	}
	out := a.cli(t, "audit", "export", "--dir", filepath.Join(a.home, "audit"), "--dir", dirB)
	var last time.Time
	nodes := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Time time.Time `json:"time"`
			Node string    `json:"node"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("export printed a line that is not JSON: %q", line)
		}
		if ev.Time.Before(last) {
			t.Fatalf("the merged export goes back in time at %q", line)
		}
		last = ev.Time
		nodes[ev.Node]++
	}
	if nodes["node-a"] == 0 || nodes["node-b"] == 0 || len(nodes) != 2 {
		t.Errorf("lines per node in the merged export: %v; want both nodes, every line naming its node", nodes)
	}
}

// releaseWithin holds a request on b, approves it on a, and checks the
// release arrives within a second of the decision (one retry on a slow
// machine: the wake-up is a notification, the backstop poll is 2s).
func releaseWithin(t *testing.T, pg *testkit.Postgres, a, b *daemon, viaB *http.Client, sess *session, kill bool) {
	var took time.Duration
	for try := 1; try <= 2; try++ {
		body := sendBody("fleet-" + randHex(6))
		before := sends()
		ap, ch := heldOn(t, b, viaB, sess, body)
		if kill {
			pg.Exec("postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'aileron-listen'`)
		}
		decided := time.Now() // before the CLI starts: its start-up counts against the second
		a.cli(t, "approvals", "approve", ap.ID)
		r := waitHeld(t, ch)
		took = time.Since(decided)
		sentReply(t, "held on B", r.status, r.body, body)
		if got := sends() - before; got != 1 {
			t.Fatalf("the upstream received %d sends; want 1", got)
		}
		t.Logf("try %d: released on node B %v after the decision on node A", try, took.Round(time.Millisecond))
		if took < time.Second {
			return
		}
	}
	t.Errorf("a request held on B was released %v after the decision on A; want within 1s", took)
}

// identicalOverNodes sends 20 identical requests, half through each node,
// approves once, and checks one send reached the upstream.
func identicalOverNodes(t *testing.T, a *daemon, viaA, viaB *http.Client, sess *session) {
	body := sendBody("fleet-same-" + randHex(6))
	before := sends()
	var results [20]heldResult
	var wg sync.WaitGroup
	for i := range results {
		c := viaA
		if i%2 == 1 {
			c = viaB
		}
		wg.Go(func() { results[i] = <-startHeld(c, gmailSendURL, body) })
	}
	ap := waitPendingFor(t, a, sess.ID)
	time.Sleep(500 * time.Millisecond) // let every request join the approval
	a.cli(t, "approvals", "approve", ap.ID)
	wg.Wait()
	ok, outcomes := 0, map[string]int{}
	for _, r := range results {
		outcomes[fmt.Sprintf("%d %s", r.status, reasonOf(r.status, r.body))]++
		if r.status == http.StatusOK {
			ok++
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if ok != 1 || sends()-before != 1 {
		t.Fatalf("%d clients released, %d sends upstream; want exactly 1 of each", ok, sends()-before)
	}
}

// stateDown stops Postgres: a request needing approval is refused at once
// (503 approval_unavailable) on both nodes while allowed requests, decided
// from memory, keep flowing; readiness says why; after Postgres is back,
// both nodes hold and release requests again on their own.
func stateDown(t *testing.T, pg *testkit.Postgres, a, b *daemon, viaA, viaB *http.Client, sess *session, get string) {
	t.Helper()
	pg.Stop()
	defer pg.Start() // when the subtest fails half-way (Start does nothing on a running server)
	for _, c := range []*http.Client{viaA, viaB} {
		status, _, body := goDo(t, c, http.MethodPost, gmailSendURL, sendBody("down-"+randHex(6)))
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"reason":"approval_unavailable"`) {
			t.Errorf("a request needing approval with the state down = %d %s; want 503 approval_unavailable", status, trunc(body))
		}
		if status, _, body := goDo(t, c, http.MethodGet, get, ""); status != http.StatusOK {
			t.Errorf("an allowed request with the state down = %d %s; want 200 (decided from memory)", status, trunc(body))
		}
	}
	if out, stderr, err := a.run(t.Context(), "health", "--ready"); err != nil || !strings.Contains(out, "degraded: state: unreachable") {
		t.Errorf("readiness with the state down: want ready (within the sessions' lease) and degraded: %v %s %s", err, out, stderr)
	}
	pg.Start()
	for _, d := range []*daemon{a, b} {
		waitFor(t, "the node to be ready again", 30*time.Second, func() bool {
			_, _, err := d.run(t.Context(), "health", "--ready")
			return err == nil
		})
	}
	releaseWithin(t, pg, a, b, viaB, sess, false) // held on B, released by A: the whole path works again
}

// TestFleetOAuthRefreshOnce: an expired OAuth token needed at once through
// both nodes of a fleet is refreshed with one call to the token endpoint,
// and both nodes put the new token on the wire.
func TestFleetOAuthRefreshOnce(t *testing.T) {
	dir := t.TempDir()
	cert, rootPath, _, err := newRuntimePKI(dir, credHostNames())
	if err != nil {
		t.Fatal(err)
	}
	up, err := startCredUpstream(cert, &theSuite.secrets)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	pg := testkit.StartPostgres(t)
	dsn, keys := pg.NewDatabase(), t.TempDir()
	res := map[string]string{}
	for _, h := range credHostNames() {
		res[h+":443"] = up.Addr
	}
	node := func(name string) *daemon {
		cfg := map[string]any{
			"proxy":    map[string]any{"listen": "127.0.0.1:0"},
			"upstream": map[string]any{"resolve": res, "ca_files": []string{rootPath}},
			"egress":   map[string]any{"allow_cidrs": []string{"127.0.0.2/32"}},
			"state": map[string]any{"backend": "postgres", "dsn": dsn, "node": name,
				"fleet_key_file": filepath.Join(keys, "fleet.key"), "vault_key_file": filepath.Join(keys, "vault.key")},
		}
		return theSuite.startTestDaemon(t, cfg, nil)
	}
	a, b := node("node-a"), node("node-b")
	a.install(t, mustSpec(t, "gmail"))
	te := &up.tok
	secret, refresh := newSecret("fleet oauth2 client secret", "cs-", "+/"), newSecret("fleet oauth2 refresh token", "1//rt-", "")
	te.configure("aileron-it", secret, refresh)
	raw, _ := json.Marshal(map[string]any{"token_url": "https://oauth2.example.com/token", "client_id": "aileron-it",
		"client_secret": secret, "refresh_token": refresh, "access_token": newSecret("fleet expired access token", "ya29.old-", ""),
		"expiry": time.Now().Add(-time.Minute).Format(time.RFC3339)})
	if _, stderr, err := a.runInput(t.Context(), string(raw), "credential", "set", "gmail", "--kind", "oauth2"); err != nil {
		t.Fatalf("credential set: %v: %s", err, stderr)
	}
	a.cli(t, "credential", "bind", gmailFQN, "--credential", "gmail")
	waitFor(t, "node B to see the credential set on node A", 20*time.Second, func() bool {
		return strings.Contains(b.cli(t, "credential", "list"), "gmail")
	})
	sess := a.newSession(t)
	msg := "https://gmail.googleapis.com/gmail/v1/users/me/messages/m"
	var wg sync.WaitGroup
	got := make([]int, 20)
	for i := range got {
		via := a
		if i%2 == 1 {
			via = b
		}
		c := sess.via(t, via)
		wg.Go(func() { got[i], _, _ = goDo(t, c, http.MethodGet, msg+fmt.Sprint(i), "") })
	}
	wg.Wait()
	for i, status := range got {
		if status != http.StatusOK {
			t.Errorf("request %d: %d; want 200 with the refreshed token", i, status)
		}
	}
	if n := te.attempts.Load(); n != 1 {
		t.Fatalf("the token endpoint was called %d times for an expired token needed on both nodes; want once", n)
	}
	fresh := te.last()
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, r := range up.reqs {
		if r.Host == "gmail.googleapis.com" && r.Header.Get("Authorization") != "Bearer "+fresh {
			t.Fatalf("a node sent another token than the one refreshed (request %s)", r.Path)
		}
	}
}
