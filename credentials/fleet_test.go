package credentials

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// fleetCreds is one node's credentials over the shared database dsn, with
// the vault key in keyFile.
type fleetCreds struct {
	home string
	v    *Vault
	b    *Bindings
	inj  *Injector
	db   *state.DB
}

func fleetCredsNode(t *testing.T, dsn, keyFile string) *fleetCreds {
	t.Helper()
	db, err := state.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	home := t.TempDir()
	v := &Vault{Dir: filepath.Join(home, "vault"), KeyFile: keyFile, DB: db}
	if err := v.Open(); err != nil {
		t.Fatal(err)
	}
	b := &Bindings{DB: db}
	if err := b.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &fleetCreds{home: home, v: v, b: b, db: db,
		inj: &Injector{Vault: v, Bindings: b, PlaceholderKey: []byte("0123456789abcdef0123456789abcdef")}}
}

// rotatingTokenServer answers refresh grants like a provider that rotates
// refresh tokens: each grant revokes the refresh token it used.
type rotatingTokenServer struct {
	*httptest.Server
	grants  atomic.Int32
	refused atomic.Int32
	mu      sync.Mutex
	refresh string
}

func newRotatingTokenServer(t *testing.T, first string) *rotatingTokenServer {
	ts := &rotatingTokenServer{refresh: first}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.FormValue("refresh_token") != ts.refresh {
			ts.refused.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		n := ts.grants.Add(1)
		ts.refresh = fmt.Sprintf("rotated-REFRESH-%04d-0123456789", n)
		fmt.Fprintf(w, `{"access_token":"fleet-ACCESS-%04d-0123456789","token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, n, ts.refresh)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// The vault and the bindings are one for the fleet: set on node A, they
// are used on node B; an expired OAuth token needed on both nodes at once
// is refreshed by one token call, and both nodes use the new token; a node
// with another vault key is refused.
func TestFleetCredentials(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	a := fleetCredsNode(t, dsn, keyFile)
	b := fleetCredsNode(t, dsn, keyFile)

	ts := newRotatingTokenServer(t, oauthRefresh)
	cred := sampleCredentials(ts.URL + "/token")[4]
	cred.OAuth.Expiry = time.Now().Add(-time.Minute)
	if err := a.v.Set(cred); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Bind(t.Context(), Binding{Connector: testkit.LinearFQN, Credential: cred.Name}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node B sees the credential and binding set on node A", func() bool {
		_, err := b.v.Get(cred.Name)
		_, bound := b.b.Get(testkit.LinearFQN)
		return err == nil && bound
	})
	if _, err := os.Stat(filepath.Join(a.home, "vault", VaultFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a fleet node wrote the vault file: %v", err)
	}
	// The shared state holds no secret in the clear: the vault row is sealed.
	var sealed []byte
	if err := a.db.QueryRowContext(t.Context(), `SELECT sealed FROM vault`).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{oauthClientSec, oauthRefresh, cred.OAuth.AccessToken} {
		if strings.Contains(string(sealed), secret) {
			t.Fatal("the fleet's vault row holds a secret in the clear")
		}
	}

	op := linearOp(t, "oauth2")
	a.inj.HTTPClient, b.inj.HTTPClient = ts.Client(), ts.Client()
	var wg sync.WaitGroup
	got := make(chan string, 16)
	for i := range 16 {
		inj := a.inj
		if i%2 == 1 {
			inj = b.inj
		}
		wg.Go(func() {
			out := outbound(t, "https://api.linear.app/graphql")
			if _, err := inj.Inject(context.Background(), nil, op, out); err != nil {
				t.Error(err)
				return
			}
			got <- out.Header.Get("Authorization")
		})
	}
	wg.Wait()
	close(got)
	for h := range got {
		if h != "Bearer fleet-ACCESS-0001-0123456789" {
			t.Errorf("a node injected %q; want the one refreshed token", h)
		}
	}
	if g, r := ts.grants.Load(), ts.refused.Load(); g != 1 || r != 0 {
		t.Fatalf("the token endpoint granted %d refreshes and refused %d; want exactly one grant, no refusal", g, r)
	}
	stored, err := b.v.Get(cred.Name)
	if err != nil || stored.OAuth.RefreshToken != "rotated-REFRESH-0001-0123456789" {
		t.Fatalf("the rotated refresh token was not stored for the fleet: %v", err)
	}

	// A node without a vault key, or with another, is refused and told to
	// copy the fleet's; no key is made for it.
	for _, tc := range []struct {
		name, want string
		make       bool
	}{{"no vault key", "no vault key at", false}, {"another vault key", "but this node's vault key", true}} {
		key := filepath.Join(t.TempDir(), "vault.key")
		if tc.make {
			if err := createIdentity(key); err != nil {
				t.Fatal(err)
			}
		}
		db, err := state.OpenPostgres(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		v := &Vault{Dir: filepath.Join(t.TempDir(), "vault"), KeyFile: key, DB: db}
		if err := v.Open(); !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: Open = %v; want ErrConflict saying %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(key); tc.make == errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the key file is there: %v; want it as it was", tc.name, err)
		}
	}
}

// A node whose vault file holds entries seeds an empty fleet vault.
func TestFleetVaultSeededFromTheFirstNodesFile(t *testing.T) {
	home := t.TempDir()
	single := vaultAt(t, home, testkit.NewClock())
	setAll(t, single, sampleCredentials("https://auth.example.com/token")[:2])
	pg := testkit.StartPostgres(t)
	db, err := state.OpenPostgres(t.Context(), pg.NewDatabase())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v := &Vault{Dir: filepath.Join(home, "vault"), KeyFile: filepath.Join(home, "keys", "vault.key"), DB: db}
	if err := v.Open(); err != nil {
		t.Fatal(err)
	}
	if list := v.List(); len(list) != 2 {
		t.Fatalf("the fleet vault holds %d entries; want the 2 of the first node's file", len(list))
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A login on one node rotates the entry while both nodes refresh it under
// load: the provider, which revokes a chain when one of its refresh tokens
// is used twice, never sees that, and no request fails for the rotation.
func TestFleetRotationDuringRefreshes(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	a := fleetCredsNode(t, dsn, keyFile)
	b := fleetCredsNode(t, dsn, keyFile)
	p := newChainProvider(t)
	entry := func(chain string) Credential {
		c := sampleCredentials(p.URL + "/token")[4]
		c.OAuth.AccessToken, c.OAuth.RefreshToken, c.OAuth.Expiry = "", p.chain(chain), time.Time{}
		return c
	}
	if err := a.v.Set(entry("chain0")); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Bind(t.Context(), Binding{Connector: testkit.LinearFQN, Credential: "google_mail"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "node B sees the entry and the binding", func() bool {
		_, err := b.v.Get("google_mail")
		_, ok := b.b.Get(testkit.LinearFQN)
		return err == nil && ok
	})
	a.inj.HTTPClient, b.inj.HTTPClient = p.Client(), p.Client()
	op := linearOp(t, "oauth2")
	for round := 1; round <= 4; round++ {
		var wg sync.WaitGroup
		for i := range 16 {
			inj := a.inj
			if i%2 == 1 {
				inj = b.inj
			}
			wg.Go(func() {
				out := outbound(t, "https://api.linear.app/graphql")
				if _, err := inj.Inject(context.Background(), nil, op, out); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Go(func() {
			if err := a.v.Set(entry(fmt.Sprintf("chain%d", round))); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
	}
	if n := p.reuses.Load(); n != 0 {
		t.Fatalf("the provider saw %d refresh tokens used twice (it revokes the chain)", n)
	}
}
