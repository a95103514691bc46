package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// legacyIndex writes s's index as a pre-SQLite Dir/index.json.
func legacyIndex(t *testing.T, s *Store) []byte {
	t.Helper()
	ix, err := s.readIndex()
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(ix, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.Dir, "index.json", data)
	return data
}

func TestStoreImportsLegacyIndex(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	// Build a store, then turn it into what an older aileron left behind:
	// packages on disk, index.json, no database.
	old := &Store{Dir: filepath.Join(home, "store"), DB: openTestDB(t, filepath.Join(t.TempDir(), DBFileName)), Now: newFakeClock().Now}
	install(t, old, writeFile(t, dir, "g1.json", fixture(t, "gmail")))
	install(t, old, writeFile(t, dir, "g2.json", withVersion(t, fixture(t, "gmail"), "1.3.0")))
	install(t, old, writeFile(t, dir, "g1again.json", fixture(t, "gmail"))) // 1.2.3 active again
	install(t, old, writeFile(t, dir, "l.json", fixture(t, "linear")))
	want, _ := old.List()
	saved := legacyIndex(t, old)

	logs := &logBuffer{}
	s := &Store{Dir: old.Dir, DB: openTestDB(t, filepath.Join(home, DBFileName)), Logf: logs.Logf}
	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List after import = %+v\nwant %+v", got, want)
	}
	if p := s.Verify(); p != nil {
		t.Errorf("Verify after import = %v", p)
	}
	index := filepath.Join(s.Dir, "index.json")
	if _, err := os.Stat(index); !os.IsNotExist(err) {
		t.Errorf("index.json still there after import: %v", err)
	}
	if data, err := os.ReadFile(index + importedSuffix); err != nil || string(data) != string(saved) {
		t.Errorf("index.json.imported = %v; want the old file, unchanged", err)
	}
	if !strings.Contains(logs.String(), "imported "+index) {
		t.Errorf("import not logged: %s", logs)
	}

	// Once imported, never again: a removal stays removed even if the old
	// file comes back, and a fresh Store on the same database agrees.
	if err := s.Remove(linearFQN + "@1.2.3"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s.Dir, "index.json", saved)
	again := &Store{Dir: s.Dir, DB: openTestDB(t, filepath.Join(home, DBFileName)), Logf: logs.Logf}
	if got := refs(t, again); len(got) != 2 || strings.Contains(strings.Join(got, ","), linearFQN) {
		t.Errorf("List after the old file came back = %v, want google only", got)
	}
	if !strings.Contains(logs.String(), "already imported") {
		t.Errorf("ignored file not logged: %s", logs)
	}
}

func TestStoreDefaultDB(t *testing.T) {
	home := t.TempDir()
	s := &Store{Dir: filepath.Join(home, "store") + "/"}
	install(t, s, writeFile(t, t.TempDir(), "g.json", fixture(t, "gmail")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The index went to $AILERON_HOME/aileron.db, where the daemon looks.
	shared := &Store{Dir: filepath.Join(home, "store"), DB: openTestDB(t, filepath.Join(home, DBFileName))}
	if got := refs(t, shared); len(got) != 1 || got[0] != googleFQN+"@1.2.3*" {
		t.Errorf("List through %s = %v, want the install", DBFileName, got)
	}
	if err := (&Store{}).Close(); err != nil {
		t.Errorf("Close of an unused Store = %v", err)
	}
}

func TestStoreConcurrentInstallsAcrossHandles(t *testing.T) {
	// Two Stores with their own database handles stand for two processes:
	// SQLite's write lock must serialise their index updates.
	home := t.TempDir()
	dir := t.TempDir()
	stores := [2]*Store{}
	for i := range stores {
		stores[i] = &Store{Dir: filepath.Join(home, "store"), DB: openTestDB(t, filepath.Join(home, DBFileName))}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for i := range 6 {
		v := fmt.Sprintf("2.%d.0", i)
		for j, name := range []string{"gmail", "linear"} {
			p := writeFile(t, dir, name+v+".json", withVersion(t, fixture(t, name), v))
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := stores[(i+j)%2].Install(p, nil)
				errs <- err
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := refs(t, stores[0]); len(got) != 12 {
		t.Errorf("List = %v, want 12 versions", got)
	}
	if p := stores[1].Verify(); p != nil {
		t.Errorf("Verify = %v", p)
	}
}

func TestBindingsImportLegacyFile(t *testing.T) {
	home := t.TempDir()
	linear := Binding{Connector: linearFQN, Credential: "linear", Env: "LINEAR_API_KEY"}
	google := Binding{Connector: googleFQN, Credential: "google_mail", Header: "Authorization", Format: "Bearer {token}"}
	data, _ := json.Marshal(bindingsFile{Version: bindingsFormat, Bindings: []Binding{linear, google}})
	file := writeFile(t, home, "bindings.json", data)

	b := bindingsAt(t, home)
	if got := b.List(); !reflect.DeepEqual(got, []Binding{google, linear}) {
		t.Errorf("List after import = %+v", got)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("bindings.json still there: %v", err)
	}
	if _, err := os.Stat(file + importedSuffix); err != nil {
		t.Errorf("bindings.json.imported missing: %v", err)
	}
	if err := b.Unbind(googleFQN); err != nil {
		t.Fatal(err)
	}
	// The old file coming back does not resurrect the binding.
	writeFile(t, home, "bindings.json", data)
	if got := bindingsAt(t, home).List(); !reflect.DeepEqual(got, []Binding{linear}) {
		t.Errorf("List after reopen = %+v, want only %+v", got, linear)
	}
}

func TestBindingsCorruptRow(t *testing.T) {
	home := t.TempDir()
	b := bindingsAt(t, home)
	_, err := b.DB.sql.Exec(`INSERT INTO bindings (connector, credential, header, updated_at)
		VALUES (?, 'linear', 'Host', '2026-01-01T00:00:00.000000000Z')`, linearFQN)
	if err != nil {
		t.Fatal(err)
	}
	err = (&Bindings{DB: b.DB}).Open()
	if err == nil || !strings.Contains(err.Error(), linearFQN) || !strings.Contains(err.Error(), b.DB.Path()) {
		t.Fatalf("Open = %v, want ErrCorruptState naming the row and the database", err)
	}
}

// legacySession writes the session.json an older aileron kept for info and
// removes its row from db, as if it had never been imported.
func legacySession(t *testing.T, db *DB, dir string, info SessionInfo, token string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(token))
	rec := sessionRecord{ID: info.ID, Name: info.Name, CreatedAt: info.CreatedAt, ExpiresAt: info.ExpiresAt,
		Connectors: info.Connectors, TokenSHA256: hex.EncodeToString(sum[:])}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if _, err := db.sql.Exec(`DELETE FROM sessions WHERE id = ?`, info.ID); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, filepath.Join(dir, info.ID), sessionFile, data)
}

func TestSessionsImportLegacyRecords(t *testing.T) {
	home := t.TempDir()
	clock := newFakeClock()
	s := sessionsAt(t, home, clock)
	keep, _ := s.Create(CreateRequest{Name: "keep", TTL: 3 * time.Hour, Connectors: []string{linearFQN}})
	short, _ := s.Create(CreateRequest{TTL: time.Hour})
	broken, _ := s.Create(CreateRequest{TTL: 3 * time.Hour})
	_, keepToken := proxyCreds(t, keep.ProxyURL)
	_, shortToken := proxyCreds(t, short.ProxyURL)
	keepFile := legacySession(t, s.DB, s.Dir, keep, keepToken)
	legacySession(t, s.DB, s.Dir, short, shortToken)
	brokenFile := legacySession(t, s.DB, s.Dir, broken, "not the token")
	clock.Advance(2 * time.Hour)

	s2 := sessionsAt(t, home, clock)
	got, err := s2.Get(keep.ID)
	if err != nil || got.ProxyURL != keep.ProxyURL || got.Name != "keep" || !got.ExpiresAt.Equal(keep.ExpiresAt) ||
		!reflect.DeepEqual(got.Connectors, []string{linearFQN}) {
		t.Fatalf("Get after import = %+v, %v; want %+v", got, err, keep)
	}
	if _, err := s2.Authenticate(keep.ID, keepToken); err != nil {
		t.Errorf("Authenticate after import: %v", err)
	}
	if _, err := os.Stat(keepFile + importedSuffix); err != nil {
		t.Errorf("session.json not renamed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, short.ID)); !os.IsNotExist(err) {
		t.Errorf("expired legacy session not removed: %v", err)
	}
	// A record that does not match the session key is not imported, and
	// stays for `aileron session delete`.
	if _, err := s2.Get(broken.ID); err == nil {
		t.Error("a record with a wrong token hash was imported")
	}
	if _, err := os.Stat(brokenFile); err != nil {
		t.Errorf("unimportable session.json moved: %v", err)
	}
	if err := s2.Delete(broken.ID); err != nil {
		t.Errorf("Delete(unimported) = %v", err)
	}
	if n := countRows(t, s2.DB, "sessions"); n != 1 {
		t.Errorf("%d session rows, want 1", n)
	}
	// Reopening imports nothing more and keeps the session.
	if _, err := sessionsAt(t, home, clock).Get(keep.ID); err != nil {
		t.Errorf("Get after second reopen: %v", err)
	}
}
