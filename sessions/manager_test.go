package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// sessionsAt returns an opened Manager rooted at home, with its own handle
// on home's database, a fake system roots file and the given clock.
func sessionsAt(t *testing.T, home string, clock *testkit.Clock) *Manager {
	t.Helper()
	roots := testkit.WriteFile(t, home, "roots.pem", []byte("-----BEGIN CERTIFICATE-----\nSYSTEM\n-----END CERTIFICATE-----\n"))
	s := &Manager{
		DB:           testkit.OpenDB(t, filepath.Join(home, state.FileName)),
		Dir:          filepath.Join(home, "sessions"),
		KeyFile:      filepath.Join(home, "keys", "session.key"),
		ProxyURLHost: "127.0.0.1:9080",
		Now:          clock.Now,
		SystemRoots:  []string{filepath.Join(home, "absent.pem"), roots},
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessionLifecycle(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	info, err := s.Create(t.Context(), CreateRequest{Name: "agent 1", TTL: 2 * time.Hour, Connectors: []string{testkit.GoogleFQN, testkit.GoogleFQN}})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^s_[a-z2-7]{20}$`).MatchString(info.ID) {
		t.Errorf("id %q", info.ID)
	}
	id, token := testkit.ProxyCreds(t, info.ProxyURL)
	if id != info.ID || !regexp.MustCompile(`^[A-Za-z0-9_-]{32}$`).MatchString(token) {
		t.Errorf("ProxyURL credentials %q:%q", id, token)
	}
	if !info.CreatedAt.Equal(clock.Now()) || !info.ExpiresAt.Equal(clock.Now().Add(2*time.Hour)) ||
		info.Name != "agent 1" || len(info.Connectors) != 1 {
		t.Errorf("info = %+v", info)
	}

	dir := filepath.Join(home, "sessions", info.ID)
	modes := map[string]os.FileMode{
		dir: 0o700, filepath.Join(home, "keys", "session.key"): 0o600,
		filepath.Join(dir, ca.KeyFile): 0o600,
	}
	for p, want := range modes {
		if got := testkit.Mode(t, p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "session.json")); !os.IsNotExist(err) {
		t.Errorf("session.json written; session metadata belongs in the database (%v)", err)
	}
	var row string
	err = s.DB.QueryRowContext(context.Background(), `SELECT id || ' ' || name || ' ' || token_sha256 || ' ' || connectors || ' ' || expires_at
		FROM sessions WHERE id = ?`, info.ID).Scan(&row)
	if err != nil || strings.Contains(row, token) || !strings.Contains(row, `["`+testkit.GoogleFQN+`"]`) || !strings.Contains(row, "agent 1") {
		t.Errorf("sessions row = %q, %v; want the metadata without the token", row, err)
	}
	certPEM, _ := os.ReadFile(info.CACertPath)
	bundle, _ := os.ReadFile(info.CABundlePath)
	if !bytes.HasPrefix(bundle, certPEM) || !bytes.HasSuffix(bundle, []byte("SYSTEM\n-----END CERTIFICATE-----\n")) {
		t.Errorf("ca-bundle.pem is not the session CA followed by the system roots:\n%s", bundle)
	}

	got, err := s.Get(info.ID)
	if err != nil || got.ProxyURL != info.ProxyURL {
		t.Errorf("Get = %+v, %v", got, err)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].ID != info.ID || list[0].ProxyURL != "" {
		t.Errorf("List = %+v, %v (want one entry without proxy_url)", list, err)
	}

	if err := s.Delete(t.Context(), info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("session dir still there: %v", err)
	}
	if n := testkit.CountRows(t, s.DB, "sessions"); n != 0 {
		t.Errorf("%d session rows after Delete, want 0", n)
	}
	for _, err := range []error{s.Delete(t.Context(), info.ID), s.Delete(t.Context(), "../../etc"), func() error { _, err := s.Get(info.ID); return err }()} {
		if !errors.Is(err, state.ErrNotFound) {
			t.Errorf("after delete: %v, want state.ErrNotFound", err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	clock := testkit.NewClock()
	s := sessionsAt(t, t.TempDir(), clock)
	live, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour, Connectors: []string{testkit.LinearFQN}})
	liveID, liveToken := testkit.ProxyCreds(t, live.ProxyURL)
	gone, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	goneID, goneToken := testkit.ProxyCreds(t, gone.ProxyURL)
	if err := s.Delete(t.Context(), goneID); err != nil {
		t.Fatal(err)
	}
	short, _ := s.Create(t.Context(), CreateRequest{TTL: time.Minute})
	shortID, shortToken := testkit.ProxyCreds(t, short.ProxyURL)
	clock.Advance(time.Minute)

	sess, err := s.Authenticate(liveID, liveToken)
	if err != nil {
		t.Fatal(err)
	}
	if sess.ID != liveID || sess.CA == nil || len(sess.Connectors) != 1 || sess.Connectors[0] != testkit.LinearFQN {
		t.Errorf("session = %+v", sess)
	}
	tests := []struct{ name, id, token string }{
		{"wrong token", liveID, shortToken},
		{"token with extra byte", liveID, liveToken + "A"},
		{"empty token", liveID, ""},
		{"unknown session", "s_aaaaaaaaaaaaaaaaaaaa", liveToken},
		{"deleted session", goneID, goneToken},
		{"expired session", shortID, shortToken},
	}
	for _, tt := range tests {
		sess, err := s.Authenticate(tt.id, tt.token)
		if sess != nil || !errors.Is(err, dataplane.ErrProxyAuth) {
			t.Errorf("%s: Authenticate = %v, %v; want ErrProxyAuth", tt.name, sess, err)
		}
		if tt.token != "" && strings.Contains(err.Error(), tt.token) {
			t.Errorf("%s: error %q contains the token", tt.name, err)
		}
	}
}

func TestSessionsSurviveReopen(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	first := sessionsAt(t, home, clock)
	info, err := first.Create(t.Context(), CreateRequest{Name: "keep", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := first.Authenticate(testkit.ProxyCreds(t, info.ProxyURL))

	second := sessionsAt(t, home, clock)
	got, err := second.Get(info.ID)
	if err != nil || got.ProxyURL != info.ProxyURL || got.Name != "keep" || !got.ExpiresAt.Equal(info.ExpiresAt) {
		t.Fatalf("Get after reopen = %+v, %v; want the same session and token", got, err)
	}
	after, err := second.Authenticate(testkit.ProxyCreds(t, info.ProxyURL))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.CA.CertPEM(), before.CA.CertPEM()) {
		t.Error("the session CA changed across reopen")
	}
}

func TestOpenSkipsUnusableSessions(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	keep, _ := s.Create(t.Context(), CreateRequest{TTL: 3 * time.Hour})
	badCA, _ := s.Create(t.Context(), CreateRequest{TTL: 3 * time.Hour})
	badRow, _ := s.Create(t.Context(), CreateRequest{TTL: 3 * time.Hour})
	expired, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	testkit.WriteFile(t, filepath.Join(home, "sessions", badCA.ID), ca.CertFile, []byte("{"))
	if err := testkit.Exec(t, s.DB, `UPDATE sessions SET connectors = '{' WHERE id = ?`, badRow.ID); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(home, "sessions", creatingPrefix+"s_x"), 0o700)
	clock.Advance(2 * time.Hour)

	s2 := sessionsAt(t, home, clock)
	list, _ := s2.List()
	if len(list) != 1 || list[0].ID != keep.ID {
		t.Fatalf("List after reopen = %+v, want only %s", list, keep.ID)
	}
	for _, gone := range []string{expired.ID, creatingPrefix + "s_x"} {
		if _, err := os.Stat(filepath.Join(home, "sessions", gone)); !os.IsNotExist(err) {
			t.Errorf("%s not cleaned up: %v", gone, err)
		}
	}
	// Sessions Open could not load can still be deleted, row and directory.
	for _, id := range []string{badCA.ID, badRow.ID} {
		if err := s2.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%s) = %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(home, "sessions", id)); !os.IsNotExist(err) {
			t.Errorf("unloadable session dir still there: %v", err)
		}
	}
	if n := testkit.CountRows(t, s2.DB, "sessions"); n != 1 {
		t.Errorf("%d session rows left, want 1 (%s)", n, keep.ID)
	}
}

func TestReplacedKeyInvalidatesSessions(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	info, _ := s.Create(t.Context(), CreateRequest{})
	os.Remove(s.KeyFile)
	s2 := sessionsAt(t, home, clock)
	if _, err := s2.Get(info.ID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get = %v; a session whose token cannot be derived must not load", err)
	}
}

func TestSweep(t *testing.T) {
	clock := testkit.NewClock()
	s := sessionsAt(t, t.TempDir(), clock)
	short, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	long, _ := s.Create(t.Context(), CreateRequest{TTL: 3 * time.Hour})
	clock.Advance(2 * time.Hour)
	if _, err := s.Get(short.ID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(expired) = %v, want state.ErrNotFound", err)
	}
	if n := s.Sweep(t.Context()); n != 1 {
		t.Errorf("Sweep = %d, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, short.ID)); !os.IsNotExist(err) {
		t.Errorf("expired session dir still there: %v", err)
	}
	if n := testkit.CountRows(t, s.DB, "sessions"); n != 1 {
		t.Errorf("%d session rows after Sweep, want 1", n)
	}
	if _, err := s.Authenticate(testkit.ProxyCreds(t, long.ProxyURL)); err != nil {
		t.Errorf("live session after Sweep: %v", err)
	}
}

func TestOpenKeyFileChecks(t *testing.T) {
	tests := []struct {
		name  string
		key   []byte
		perm  os.FileMode
		want  error
		fixed string
	}{
		{"readable by others", make([]byte, 32), 0o644, state.ErrInsecureFile, "chmod 600"},
		{"wrong size", []byte("short"), 0o600, state.ErrCorruptState, "want 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			key := testkit.WriteFile(t, home, "keys/session.key", tt.key)
			os.Chmod(key, tt.perm)
			s := &Manager{Dir: filepath.Join(home, "sessions"), DB: testkit.OpenDB(t, filepath.Join(home, state.FileName)), KeyFile: key, ProxyURLHost: "127.0.0.1:9080"}
			if err := s.Open(t.Context()); !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.fixed) {
				t.Errorf("Open = %v, want %v mentioning %q", err, tt.want, tt.fixed)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	clock := testkit.NewClock()
	s := sessionsAt(t, t.TempDir(), clock)
	bad := []CreateRequest{
		{Name: strings.Repeat("n", MaxNameLen+1)},
		{Name: "line\nbreak"},
		{Name: "bad\xffutf8"},
		{TTL: -time.Hour},
		{TTL: time.Millisecond},
		{TTL: MaxTTL + time.Hour},
		{Connectors: []string{"gmail"}},
		{Connectors: []string{testkit.GoogleFQN + "@1.2.3"}},
	}
	for _, req := range bad {
		if _, err := s.Create(t.Context(), req); !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("Create(%+v) = %v, want state.ErrInvalidArgument", req, err)
		}
	}
	info, err := s.Create(t.Context(), CreateRequest{})
	if err != nil || !info.ExpiresAt.Equal(clock.Now().Add(DefaultTTL)) || info.Connectors != nil {
		t.Errorf("Create(default) = %+v, %v", info, err)
	}
	s.DefaultTTL = 30 * time.Minute
	if info, _ := s.Create(t.Context(), CreateRequest{}); !info.ExpiresAt.Equal(clock.Now().Add(30 * time.Minute)) {
		t.Errorf("DefaultTTL ignored: %+v", info)
	}
}

func TestSessionsBeforeOpen(t *testing.T) {
	s := &Manager{Dir: t.TempDir(), KeyFile: filepath.Join(t.TempDir(), "k"), ProxyURLHost: "h:1"}
	if _, err := s.Create(t.Context(), CreateRequest{}); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("Create = %v", err)
	}
	if _, err := s.List(); !errors.Is(err, state.ErrNotOpen) {
		t.Errorf("List = %v", err)
	}
	if _, err := s.Authenticate("s_aaaaaaaaaaaaaaaaaaaa", "x"); !errors.Is(err, dataplane.ErrProxyAuth) {
		t.Errorf("Authenticate = %v", err)
	}
	if err := (&Manager{}).Open(t.Context()); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("Open without fields = %v", err)
	}
}

func TestTokenDerivationIsStable(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	a, b := deriveToken(key, "s_aaaaaaaaaaaaaaaaaaaa"), deriveToken(key, "s_aaaaaaaaaaaaaaaaaaaa")
	c := deriveToken(key, "s_baaaaaaaaaaaaaaaaaaa")
	d := deriveToken(bytes.Repeat([]byte{8}, 32), "s_aaaaaaaaaaaaaaaaaaaa")
	if a != b || a == c || a == d || len(a) != 32 {
		t.Errorf("tokens %q %q %q %q", a, b, c, d)
	}
}

func TestSessionCAIsUsable(t *testing.T) {
	s := sessionsAt(t, t.TempDir(), testkit.NewClock())
	info, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	a, err := ca.LoadDir(filepath.Dir(info.CACertPath), ca.Options{Now: testkit.NewClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Certificate().NotAfter.After(info.ExpiresAt) {
		t.Errorf("CA expires %v, before the session (%v)", a.Certificate().NotAfter, info.ExpiresAt)
	}
	if !strings.Contains(a.Certificate().Subject.CommonName, info.ID) {
		t.Errorf("CA subject %q does not name the session", a.Certificate().Subject.CommonName)
	}
}

func TestCreateRequestJSON(t *testing.T) {
	var req CreateRequest
	if err := json.Unmarshal([]byte(`{"name":"n","ttl":"90m","connectors":["github://a/b"]}`), &req); err != nil {
		t.Fatal(err)
	}
	if req.Name != "n" || req.TTL != 90*time.Minute || len(req.Connectors) != 1 {
		t.Errorf("decoded %+v", req)
	}
	out, _ := json.Marshal(req)
	if string(out) != `{"name":"n","ttl":"1h30m0s","connectors":["github://a/b"]}` {
		t.Errorf("encoded %s", out)
	}
	for _, bad := range []string{`{"ttl":"forever"}`, `{"ttl":3600}`, `{"nmae":"typo"}`} {
		if err := json.Unmarshal([]byte(bad), &req); !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("Unmarshal(%s) = %v, want state.ErrInvalidArgument", bad, err)
		}
	}
}

func FuzzCreateRequestJSON(f *testing.F) {
	for _, s := range []string{`{"name":"n","ttl":"90m","connectors":["github://a/b"]}`, `{}`, `{"ttl":"-1h"}`, `[]`, `{"ttl":null}`} {
		f.Add([]byte(s))
	}
	s := &Manager{}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req CreateRequest
		if err := req.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, state.ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap state.ErrInvalidArgument", err)
			}
			return
		}
		ttl, err := s.validate(&req)
		if err == nil && (ttl < time.Second || ttl > MaxTTL) {
			t.Fatalf("validate accepted ttl %v", ttl)
		}
	})
}

func BenchmarkAuthenticate(b *testing.B) {
	home, db := testkit.HomeDB(b)
	s := &Manager{Dir: filepath.Join(home, "sessions"), DB: db, KeyFile: filepath.Join(home, "session.key"),
		ProxyURLHost: "127.0.0.1:9080", SystemRoots: []string{}}
	if err := s.Open(b.Context()); err != nil {
		b.Fatal(err)
	}
	for range 100 {
		if _, err := s.Create(b.Context(), CreateRequest{}); err != nil {
			b.Fatal(err)
		}
	}
	info, _ := s.Create(b.Context(), CreateRequest{})
	u, _ := url.Parse(info.ProxyURL)
	id := u.User.Username()
	token, _ := u.User.Password()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Authenticate(id, token); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDeleteSurvivesACancelledRequest: a revocation whose request is cut off
// still removes the row, or the session would come back at the next start.
func TestDeleteSurvivesACancelledRequest(t *testing.T) {
	home := t.TempDir()
	clock := testkit.NewClock()
	s := sessionsAt(t, home, clock)
	info, err := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Delete(ctx, info.ID); err != nil {
		t.Fatalf("Delete with a cancelled context: %v", err)
	}
	if n := testkit.CountRows(t, s.DB, "sessions"); n != 0 {
		t.Fatalf("%d session rows left", n)
	}
	again := sessionsAt(t, home, clock)
	if _, err := again.Authenticate(testkit.ProxyCreds(t, info.ProxyURL)); err == nil {
		t.Fatal("the deleted session came back after a restart")
	}
}

// TestLive: a session is live until it is deleted or expires; Live says
// which, wrapping dataplane.ErrProxyAuth.
func TestLive(t *testing.T) {
	clock := testkit.NewClock()
	s := sessionsAt(t, t.TempDir(), clock)
	a, _ := s.Create(t.Context(), CreateRequest{TTL: time.Hour})
	b, _ := s.Create(t.Context(), CreateRequest{TTL: 2 * time.Hour})
	if err := s.Live(a.ID); err != nil {
		t.Fatalf("Live(new session) = %v", err)
	}
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Live(a.ID); !errors.Is(err, dataplane.ErrProxyAuth) || !strings.Contains(err.Error(), "deleted") {
		t.Errorf("Live(deleted) = %v", err)
	}
	clock.Advance(2*time.Hour + time.Second)
	if err := s.Live(b.ID); !errors.Is(err, dataplane.ErrProxyAuth) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Live(expired) = %v", err)
	}
}
