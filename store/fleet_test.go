package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// fleetStore opens a store on its own directory and its own connection to
// the shared database dsn: another node.
func fleetStore(t *testing.T, dsn string) *Store {
	t.Helper()
	db, err := state.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &Store{Dir: filepath.Join(t.TempDir(), "store"), DB: db, Now: testkit.NewClock().Now}
}

// A package installed on node A loads on node B, rebuilt from the shared
// database with the same hash; removed on A, it is gone for B; a stream
// changed in the database is refused, not loaded.
func TestFleetPackagesReachEveryNode(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := fleetStore(t, dsn), fleetStore(t, dsn)
	spec := testkit.WriteFile(t, t.TempDir(), "pkg/"+SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, filepath.Dir(spec), "docs/README.md", []byte("how to use it\n"))
	inst := install(t, a, filepath.Dir(spec))

	srcs, errs := b.Load(t.Context())
	if len(errs) != 0 || len(srcs) != 1 || srcs[0].Hash != inst.Hash {
		t.Fatalf("node B Load = %v, %v; want the package A installed (%s)", srcs, errs, inst.Hash)
	}
	got, err := HashPackage(b.packageDir(inst.Hash))
	if err != nil || got != inst.Hash {
		t.Fatalf("node B's rebuilt package hashes to %s, %v", got, err)
	}
	if data, err := os.ReadFile(filepath.Join(b.packageDir(inst.Hash), "docs", "README.md")); err != nil || string(data) != "how to use it\n" {
		t.Fatalf("rebuilt package lost a file: %q, %v", data, err)
	}

	// Tampered in the database: refused on a node that has to rebuild it.
	c := fleetStore(t, dsn)
	db := pg.Query(dbNameOf(dsn))
	if _, err := db.ExecContext(t.Context(), `UPDATE store_packages SET stream = stream || '\x00'::bytea`); err != nil {
		t.Fatal(err)
	}
	if srcs, errs := c.Load(t.Context()); len(srcs) != 0 || len(errs) != 1 || !errors.Is(errs[0], ErrTampered) {
		t.Fatalf("Load of a tampered shared package = %v, %v; want ErrTampered", srcs, errs)
	}

	if err := a.Remove(t.Context(), inst.Ref()); err != nil {
		t.Fatal(err)
	}
	if srcs, errs := b.Load(t.Context()); len(srcs) != 0 || len(errs) != 0 {
		t.Fatalf("after A removed it, B Load = %v, %v; want nothing", srcs, errs)
	}
	if n := countShared(t, b); n != 0 {
		t.Fatalf("%d packages left in store_packages after the last version was removed", n)
	}
}

func countShared(t *testing.T, s *Store) int {
	var n int
	if err := s.DB.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM store_packages`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func dbNameOf(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "dbname=")
	name, _, _ := strings.Cut(rest, " ")
	return name
}

func TestParseStreamRefuses(t *testing.T) {
	for _, tc := range []struct{ name, stream string }{
		{"no size", "a.json"},
		{"no bytes end", "a.json\x003\x00ab"},
		{"negative", "a.json\x00-1\x00"},
		{"padded size", "a.json\x0001\x00a"},
		{"absolute", "/etc/passwd\x001\x00a"},
		{"climbs", "../x\x001\x00a"},
		{"climbs inside", "a/../../x\x001\x00a"},
		{"dot", ".\x001\x00a"},
		{"unclean", "a//b\x001\x00a"},
		{"backslash", "a\\b\x001\x00a"},
		{"out of order", "b\x001\x00ba\x001\x00a"},
		{"duplicate", "a\x001\x00aa\x001\x00a"},
	} {
		if _, err := parseStream([]byte(tc.stream)); err == nil {
			t.Errorf("%s: parseStream(%q) accepted", tc.name, tc.stream)
		}
	}
	files, err := parseStream([]byte("a.json\x002\x00{}docs/x\x000\x00"))
	if err != nil || len(files) != 2 || string(files[0].data) != "{}" || files[1].rel != "docs/x" {
		t.Fatalf("parseStream of a good stream = %+v, %v", files, err)
	}
}

func FuzzParseStream(f *testing.F) {
	f.Add([]byte("a.json\x002\x00{}docs/x\x000\x00"))
	f.Add([]byte("../x\x001\x00a"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		files, err := parseStream(stream)
		if err != nil {
			return
		}
		for _, fl := range files {
			if checkStreamPath(fl.rel) != nil || filepath.IsAbs(fl.rel) || strings.HasPrefix(filepath.Clean(fl.rel), "..") {
				t.Fatalf("accepted path %q", fl.rel)
			}
		}
	})
}

// Consent is fleet state: a version consented on node A is in node B's
// lock; one quarantined on A is quarantined on B and, approved on B, is
// served by A.
func TestFleetConsentReachesEveryNode(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := fleetStore(t, dsn), fleetStore(t, dsn)
	v1 := install(t, a, gmailAt(t, "1.0.0", nil))
	c, err := b.Consents(t.Context())
	if err != nil || len(c) != 1 || c[0].Hash != v1.Hash || c[0].By != "test" {
		t.Fatalf("node B Consents = %+v, %v; want A's consent to %s", c, err, v1.Hash)
	}
	wide := install(t, a, gmailAt(t, "1.1.0", func(ops []any) { op(ops, 0)["hosts"] = []any{"evil.example.com"} }))
	list, err := b.List(t.Context())
	if err != nil || len(list) != 2 || !list[1].Quarantined || list[1].Widening == nil {
		t.Fatalf("node B List = %+v, %v; want 1.1.0 quarantined", list, err)
	}
	if _, err := b.Approve(t.Context(), wide.Ref(), nil, Consent{Hash: wide.Hash, By: "bob", Via: ViaApprove}); err != nil {
		t.Fatal(err)
	}
	srcs, errs := a.Load(t.Context())
	if len(errs) != 0 || len(srcs) != 1 || srcs[0].Hash != wide.Hash {
		t.Fatalf("node A Load after B approved = %v, %v; want %s", srcs, errs, wide.Hash)
	}
	if c, _ := a.Consents(t.Context()); len(c) != 2 || c[1].By != "bob" {
		t.Errorf("node A Consents = %+v, want 1.1.0 approved by bob", c)
	}
}

// The consents given without a daemon are claimed once across the fleet:
// two nodes claiming at once get each one exactly once between them.
func TestFleetClaimUnauditedOnce(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	a, b := fleetStore(t, dsn), fleetStore(t, dsn)
	install(t, a, gmailAt(t, "1.0.0", nil))
	install(t, a, testkit.WriteFile(t, t.TempDir(), "linear.json", testkit.Spec(t, "linear")))
	got := make(chan []Consented, 2)
	for _, s := range []*Store{a, b} {
		go func() {
			c, err := s.ClaimUnaudited(t.Context())
			if err != nil {
				t.Error(err)
			}
			got <- c
		}()
	}
	seen := map[string]int{}
	for range 2 {
		for _, c := range <-got {
			seen[c.Ref()]++
		}
	}
	if len(seen) != 2 || seen[testkit.GoogleFQN+"@1.0.0"] != 1 {
		t.Errorf("claimed %v, want each of the two consents once", seen)
	}
}
