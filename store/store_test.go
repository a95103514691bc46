package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// newStore returns a Store in a fresh home with its own database.
func newStore(t *testing.T) (*Store, *testkit.Log) {
	t.Helper()
	logs := &testkit.Log{}
	home, db := testkit.HomeDB(t)
	return &Store{Dir: filepath.Join(home, "store"), DB: db, Log: logs.Logger(), Now: testkit.NewClock().Now}, logs
}

// install installs path against the store's own active set, as Admin does.
func install(t *testing.T, s *Store, path string) Installed {
	t.Helper()
	active, _ := s.Load(t.Context())
	inst, err := s.Install(t.Context(), path, active, yes(t, s, path))
	if err != nil {
		t.Fatalf("Install(%s): %v", path, err)
	}
	return inst
}

// yes is a consent to what the package at path asks now (Offer), given
// by "test" with --yes; when Offer fails, a consent naming no hash, so that
// Install fails the way Offer did.
func yes(t *testing.T, s *Store, path string) Consent {
	t.Helper()
	return yesWith(t, s, path, InstallOptions{})
}

// yesWith is yes for an install with opts.
func yesWith(t *testing.T, s *Store, path string, opts InstallOptions) Consent {
	t.Helper()
	o, err := s.OfferWith(t.Context(), path, opts)
	if err != nil {
		return Consent{By: "test", Via: ViaYes}
	}
	return Consent{Hash: o.Hash, By: "test", Via: ViaYes}
}

// refs renders List as "FQN@VERSION[*]" strings, * marking the active one.
func refs(t *testing.T, s *Store) []string {
	t.Helper()
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range list {
		r := in.Ref()
		if in.Active {
			r += "*"
		}
		out = append(out, r)
	}
	return out
}

func TestInstallSpecFile(t *testing.T) {
	s, _ := newStore(t)
	data := testkit.Spec(t, "gmail")
	src := testkit.WriteFile(t, t.TempDir(), "google.json", data)
	inst := install(t, s, src)

	if inst.FQN != testkit.GoogleFQN || inst.Version != "1.2.3" || !inst.Active || inst.InstalledAt.IsZero() {
		t.Errorf("Installed = %+v", inst)
	}
	want := filepath.Join(s.Dir, "connectors", "sha256", inst.Hash)
	if inst.Dir != want {
		t.Errorf("Dir = %s, want %s", inst.Dir, want)
	}
	entries, err := os.ReadDir(inst.Dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != SpecFileName {
		t.Fatalf("package dir holds %v (%v), want just %s", entries, err, SpecFileName)
	}
	got, _ := os.ReadFile(filepath.Join(inst.Dir, SpecFileName))
	if !bytes.Equal(got, data) {
		t.Error("stored spec differs from the installed file")
	}
	if h, err := HashPackage(inst.Dir); err != nil || h != inst.Hash {
		t.Errorf("HashPackage = %s, %v; want %s", h, err, inst.Hash)
	}
	srcs, errs := s.Load(t.Context())
	if len(errs) != 0 || len(srcs) != 1 {
		t.Fatalf("Load = %d sources, errors %v", len(srcs), errs)
	}
	if srcs[0].Hash != inst.Hash || srcs[0].Origin != filepath.Join(inst.Dir, SpecFileName) || srcs[0].Spec.Connector.FQN != testkit.GoogleFQN {
		t.Errorf("Load source = %+v", srcs[0])
	}
	if p := s.Verify(t.Context()); p != nil {
		t.Errorf("Verify = %v", p)
	}
}

func TestInstallPackageDir(t *testing.T) {
	s, _ := newStore(t)
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, "manifest.toml", []byte(gmailManifest))
	testkit.WriteFile(t, pkg, "bin/run.sh", []byte("#!/bin/sh\necho hi\n"))
	testkit.WriteFile(t, pkg, ".DS_Store", []byte("junk"))
	os.Chmod(filepath.Join(pkg, "bin/run.sh"), 0o755)
	inst := install(t, s, pkg)

	for _, name := range []string{SpecFileName, "manifest.toml", "bin/run.sh", ".DS_Store"} {
		want, _ := os.ReadFile(filepath.Join(pkg, name))
		got, err := os.ReadFile(filepath.Join(inst.Dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: stored copy differs (%v)", name, err)
		}
	}
	if info, err := os.Stat(filepath.Join(inst.Dir, "bin/run.sh")); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("executable lost its mode: %v %v", info.Mode(), err)
	}
	// Hidden files are part of the package and of its hash.
	os.Remove(filepath.Join(pkg, ".DS_Store"))
	if h, _ := HashPackage(pkg); h == inst.Hash {
		t.Error("removing .DS_Store did not change the hash")
	}
	// An empty temp dir under tmp/ is all staging leaves behind.
	if left, _ := os.ReadDir(filepath.Join(s.Dir, "tmp")); len(left) != 0 {
		t.Errorf("staging left %v", left)
	}
}

func TestHashPackageCanonicalStream(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFile(t, dir, "a/b", []byte("B"))
	testkit.WriteFile(t, dir, "a.txt", []byte("hello"))
	testkit.WriteFile(t, dir, "Z", nil)
	os.MkdirAll(filepath.Join(dir, "empty"), 0o755)
	// Byte-wise order of slash paths: "Z" < "a.txt" < "a/b" ('.' < '/').
	stream := "Z\x000\x00" + "a.txt\x005\x00hello" + "a/b\x001\x00B"
	sum := sha256.Sum256([]byte(stream))
	got, err := HashPackage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("HashPackage = %s, want %s", got, want)
	}
}

func TestReinstallIsIdempotent(t *testing.T) {
	s, _ := newStore(t)
	clock := testkit.NewClock()
	s.Now = clock.Now
	src := testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))
	first := install(t, s, src)
	clock.Advance(time.Hour)
	second := install(t, s, src)
	if second.Hash != first.Hash || !second.InstalledAt.Equal(first.InstalledAt) {
		t.Errorf("reinstall = %+v, first = %+v", second, first)
	}
	if got := refs(t, s); len(got) != 1 {
		t.Errorf("List = %v", got)
	}
	pkgs, _ := os.ReadDir(filepath.Join(s.Dir, "connectors", "sha256"))
	if len(pkgs) != 1 {
		t.Errorf("store holds %d packages", len(pkgs))
	}
}

func TestReinstallRepairsDamagedPackage(t *testing.T) {
	s, logs := newStore(t)
	src := testkit.WriteFile(t, t.TempDir(), "google.json", testkit.Spec(t, "gmail"))
	inst := install(t, s, src)
	testkit.WriteFile(t, inst.Dir, "extra", []byte("x"))
	install(t, s, src)
	if p := s.Verify(t.Context()); p != nil {
		t.Errorf("Verify after repair = %v", p)
	}
	if !strings.Contains(logs.String(), "damaged") {
		t.Errorf("repair not logged: %s", logs)
	}
}

func TestVersionsSideBySide(t *testing.T) {
	s, _ := newStore(t)
	dir := t.TempDir()
	gmail := testkit.Spec(t, "gmail")
	v123 := testkit.WriteFile(t, dir, "v123.json", gmail)
	v130 := testkit.WriteFile(t, dir, "v130.json", testkit.WithVersion(t, gmail, "1.3.0"))
	v200rc := testkit.WriteFile(t, dir, "v200rc.json", testkit.WithVersion(t, gmail, "2.0.0-rc.1"))
	v1100 := testkit.WriteFile(t, dir, "v1100.json", testkit.WithVersion(t, gmail, "1.10.0"))

	steps := []struct {
		do   func() error
		want []string
	}{
		{func() error { install(t, s, v123); return nil }, []string{testkit.GoogleFQN + "@1.2.3*"}},
		{func() error { install(t, s, v130); return nil }, []string{testkit.GoogleFQN + "@1.2.3", testkit.GoogleFQN + "@1.3.0*"}},
		{func() error { install(t, s, v123); return nil }, []string{testkit.GoogleFQN + "@1.2.3*", testkit.GoogleFQN + "@1.3.0"}},
		{func() error { install(t, s, v1100); install(t, s, v200rc); return nil },
			[]string{testkit.GoogleFQN + "@1.2.3", testkit.GoogleFQN + "@1.3.0", testkit.GoogleFQN + "@1.10.0", testkit.GoogleFQN + "@2.0.0-rc.1*"}},
		// Removing the active version activates the highest remaining one.
		{func() error { return s.Remove(t.Context(), testkit.GoogleFQN+"@2.0.0-rc.1") },
			[]string{testkit.GoogleFQN + "@1.2.3", testkit.GoogleFQN + "@1.3.0", testkit.GoogleFQN + "@1.10.0*"}},
		// Removing an inactive version leaves the active one alone.
		{func() error { return s.Remove(t.Context(), testkit.GoogleFQN+"@1.2.3") }, []string{testkit.GoogleFQN + "@1.3.0", testkit.GoogleFQN + "@1.10.0*"}},
		{func() error {
			s.Remove(t.Context(), testkit.GoogleFQN+"@1.3.0")
			return s.Remove(t.Context(), testkit.GoogleFQN+"@1.10.0")
		}, nil},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := refs(t, s); strings.Join(got, " ") != strings.Join(st.want, " ") {
			t.Fatalf("step %d: List = %v, want %v", i, got, st.want)
		}
		srcs, errs := s.Load(t.Context())
		if wantN := min(len(st.want), 1); len(errs) != 0 || len(srcs) != wantN {
			t.Fatalf("step %d: Load = %d sources (want %d), %v", i, len(srcs), wantN, errs)
		}
		for _, src := range srcs {
			if want := src.Spec.Connector.FQN + "@" + src.Spec.Connector.Version + "*"; !contains(st.want, want) {
				t.Errorf("step %d: Load returned %s, not the active version", i, want)
			}
		}
	}
	if pkgs, _ := os.ReadDir(filepath.Join(s.Dir, "connectors", "sha256")); len(pkgs) != 0 {
		t.Errorf("removed packages left %d directories", len(pkgs))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSameVersionDifferentContentConflicts(t *testing.T) {
	s, _ := newStore(t)
	dir := t.TempDir()
	gmail := testkit.Spec(t, "gmail")
	install(t, s, testkit.WriteFile(t, dir, "a.json", gmail))
	changed := testkit.EditJSON(t, gmail, func(m map[string]any) {
		m["tools"].([]any)[0].(map[string]any)["description"] = "changed"
	})
	b := testkit.WriteFile(t, dir, "b.json", changed)
	_, err := s.Install(t.Context(), b, nil, yes(t, s, b))
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "bump connector.version") {
		t.Fatalf("err = %v, want state.ErrConflict asking for a version bump", err)
	}
	if pkgs, _ := os.ReadDir(filepath.Join(s.Dir, "connectors", "sha256")); len(pkgs) != 1 {
		t.Errorf("refused install left a package behind: %d packages", len(pkgs))
	}
}

func TestRemoveErrors(t *testing.T) {
	s, _ := newStore(t)
	install(t, s, testkit.WriteFile(t, t.TempDir(), "g.json", testkit.Spec(t, "gmail")))
	tests := []struct {
		ref     string
		want    error
		message string
	}{
		{"", state.ErrInvalidArgument, "no @VERSION"},
		{testkit.GoogleFQN, state.ErrInvalidArgument, "no @VERSION"},
		{testkit.GoogleFQN + "@latest", state.ErrInvalidArgument, "SemVer"},
		{testkit.GoogleFQN + "@v1.2.3", state.ErrInvalidArgument, "SemVer"},
		{testkit.GoogleFQN + "@1.2", state.ErrInvalidArgument, "SemVer"},
		{"gmail@1.2.3", state.ErrInvalidArgument, "scheme"},
		{"ftp://acme/x@1.2.3", state.ErrInvalidArgument, "scheme"},
		{"github://acme/other@1.2.3", state.ErrNotFound, "not installed"},
		{testkit.GoogleFQN + "@9.9.9", state.ErrNotFound, "installed versions of " + testkit.GoogleFQN + ": 1.2.3"},
	}
	for _, tt := range tests {
		err := s.Remove(t.Context(), tt.ref)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.message) {
			t.Errorf("Remove(%q) = %v, want %v mentioning %q", tt.ref, err, tt.want, tt.message)
		}
	}
	if got := refs(t, s); len(got) != 1 {
		t.Errorf("failed removals changed the store: %v", got)
	}
}

func TestTamperedPackage(t *testing.T) {
	tamper := map[string]func(t *testing.T, dir string){
		"edit a byte": func(t *testing.T, dir string) {
			p := filepath.Join(dir, SpecFileName)
			data, _ := os.ReadFile(p)
			i := bytes.Index(data, []byte("Search"))
			data[i] = 's'
			os.WriteFile(p, data, 0o644)
		},
		"add a file":    func(t *testing.T, dir string) { testkit.WriteFile(t, dir, "actions/evil.sh", []byte("curl evil")) },
		"delete a file": func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "manifest.toml")) },
		"delete the spec": func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, SpecFileName))
		},
		"add a symlink": func(t *testing.T, dir string) {
			os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
		},
		"remove the package": func(t *testing.T, dir string) { os.RemoveAll(dir) },
	}
	for name, fn := range tamper {
		t.Run(name, func(t *testing.T) {
			s, logs := newStore(t)
			pkg := t.TempDir()
			testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
			testkit.WriteFile(t, pkg, "manifest.toml", []byte(gmailManifest))
			google := install(t, s, pkg)
			linear := install(t, s, testkit.WriteFile(t, t.TempDir(), "linear.json", testkit.Spec(t, "linear")))

			fn(t, google.Dir)

			problems := s.Verify(t.Context())
			if len(problems) != 1 || problems[0].Ref != google.Ref() || problems[0].Hash != google.Hash {
				t.Fatalf("Verify = %+v, want one problem for %s", problems, google.Ref())
			}
			srcs, errs := s.Load(t.Context())
			if len(srcs) != 1 || srcs[0].Spec.Connector.FQN != testkit.LinearFQN || srcs[0].Hash != linear.Hash {
				t.Errorf("Load returned %d sources, want only %s", len(srcs), testkit.LinearFQN)
			}
			if len(errs) != 1 || !errors.Is(errs[0], ErrTampered) || !strings.Contains(errs[0].Error(), google.Ref()) {
				t.Errorf("Load errors = %v, want one ErrTampered naming %s", errs, google.Ref())
			}
			if !strings.Contains(logs.String(), `"event":"store.refused","connector":"`+google.Ref()+`"`) {
				t.Errorf("refusal not logged: %s", logs)
			}
		})
	}
}

func TestVerifyFindsUnparsableSpec(t *testing.T) {
	// A package whose hash still matches but whose spec no longer parses (as
	// after an upgrade to a stricter parser), simulated by re-pointing the
	// index at a re-hashed, edited copy.
	s, _ := newStore(t)
	inst := install(t, s, testkit.WriteFile(t, t.TempDir(), "g.json", testkit.Spec(t, "gmail")))
	testkit.WriteFile(t, inst.Dir, SpecFileName, []byte(`{"schema_version": "aileron.connector.v0"}`))
	hash, err := HashPackage(inst.Dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(inst.Dir, s.packageDir(hash))
	err = testkit.Exec(t, s.DB, `UPDATE store_versions SET hash = ? WHERE fqn = ? AND version = '1.2.3'`, hash, testkit.GoogleFQN)
	if err != nil {
		t.Fatal(err)
	}
	problems := s.Verify(t.Context())
	if len(problems) != 1 || !strings.Contains(problems[0].Err, "schema_version") {
		t.Fatalf("Verify = %+v, want the parse error", problems)
	}
	_, errs := s.Load(t.Context())
	if len(errs) != 1 || !errors.Is(errs[0], ErrInvalidSpec) {
		t.Errorf("Load errors = %v, want ErrInvalidSpec", errs)
	}
}

func TestInstallRefusesBadPackages(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"symlink", func(t *testing.T, dir string) {
			os.Symlink(filepath.Join(dir, SpecFileName), filepath.Join(dir, "alias.json"))
		}, "symlink"},
		{"symlinked directory", func(t *testing.T, dir string) {
			os.Symlink(t.TempDir(), filepath.Join(dir, "actions"))
		}, "symlink"},
		{"fifo", func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "special file"},
		{"file over 64 MiB", func(t *testing.T, dir string) {
			sparse(t, filepath.Join(dir, "big.bin"), MaxPackageFileSize+1)
		}, "at most"},
		{"package over 256 MiB", func(t *testing.T, dir string) {
			for i := range 5 {
				sparse(t, filepath.Join(dir, fmt.Sprintf("part%d.bin", i)), 60<<20)
			}
		}, "256 MiB"},
		{"no spec", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, SpecFileName)) }, "needs " + SpecFileName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newStore(t)
			dir := t.TempDir()
			testkit.WriteFile(t, dir, SpecFileName, testkit.Spec(t, "gmail"))
			tt.setup(t, dir)
			_, err := s.Install(t.Context(), dir, nil, yes(t, s, dir))
			if !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Install = %v, want ErrInvalidPackage mentioning %q", err, tt.want)
			}
			if got := refs(t, s); len(got) != 0 {
				t.Errorf("refused package was indexed: %v", got)
			}
		})
	}
}

// sparse creates a file of the given size without writing its bytes.
func sparse(t *testing.T, p string, size int64) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

func TestInstallBadPaths(t *testing.T) {
	s, _ := newStore(t)
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "missing.json"), "/dev/null"} {
		if _, err := s.Install(t.Context(), p, nil, yes(t, s, p)); !errors.Is(err, state.ErrInvalidArgument) {
			t.Errorf("Install(%s) = %v, want state.ErrInvalidArgument", p, err)
		}
	}
	// A symlink given as the path itself is followed: it is the user's choice.
	spec := testkit.WriteFile(t, dir, "g.json", testkit.Spec(t, "gmail"))
	link := filepath.Join(dir, "link.json")
	os.Symlink(spec, link)
	if _, err := s.Install(t.Context(), link, nil, yes(t, s, link)); err != nil {
		t.Errorf("Install(symlink to spec) = %v", err)
	}
}

func TestInstallBadSpecKeepsLocation(t *testing.T) {
	s, _ := newStore(t)
	bad := testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
		op := m["tools"].([]any)[0].(map[string]any)["operations"].([]any)[1].(map[string]any)
		op["hosts"] = []any{"https://gmail.googleapis.com"}
	})
	tests := []struct {
		name string
		path func(dir string) string
		file func(dir string) string
	}{
		{"spec file", func(dir string) string { return testkit.WriteFile(t, dir, "google.json", bad) },
			func(dir string) string { return filepath.Join(dir, "google.json") }},
		{"package dir", func(dir string) string { testkit.WriteFile(t, dir, SpecFileName, bad); return dir },
			func(dir string) string { return filepath.Join(dir, SpecFileName) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := s.Install(t.Context(), tt.path(dir), nil, yes(t, s, tt.path(dir)))
			if !errors.Is(err, ErrInvalidSpec) || !errors.Is(err, policy.ErrInvalidSpec) {
				t.Fatalf("Install = %v, want ErrInvalidSpec", err)
			}
			var ve *policy.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Install = %v, want a *policy.ValidationError inside", err)
			}
			if ve.File != tt.file(dir) || ve.Path != "$.tools[0].operations[1].hosts[0]" {
				t.Errorf("error names %s %s, want %s $.tools[0].operations[1].hosts[0]", ve.File, ve.Path, tt.file(dir))
			}
			if !strings.HasPrefix(err.Error(), tt.file(dir)+": $.tools[0].operations[1].hosts[0]: ") {
				t.Errorf("message %q does not start with the file and JSON path", err)
			}
		})
	}
}

func TestInstallConflicts(t *testing.T) {
	s, _ := newStore(t)
	dir := t.TempDir()
	install(t, s, testkit.WriteFile(t, dir, "google.json", testkit.Spec(t, "gmail")))

	// Another connector whose tool is also called "google".
	clash := testkit.EditJSON(t, testkit.Spec(t, "linear"), func(m map[string]any) {
		m["tools"].([]any)[0].(map[string]any)["name"] = "google"
	})
	clashPath := testkit.WriteFile(t, dir, "clash.json", clash)
	active, _ := s.Load(t.Context())
	_, err := s.Install(t.Context(), clashPath, active, yes(t, s, clashPath))
	if !errors.Is(err, state.ErrConflict) || !errors.Is(err, policy.ErrConflict) {
		t.Fatalf("Install = %v, want state.ErrConflict", err)
	}
	for _, want := range []string{testkit.LinearFQN, testkit.GoogleFQN, clashPath} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict error %q does not name %s", err, want)
		}
	}
	if got := refs(t, s); len(got) != 1 {
		t.Errorf("conflicting spec was installed: %v", got)
	}

	// A new version of the same connector replaces it: no conflict with itself.
	install(t, s, testkit.WriteFile(t, dir, "google2.json", testkit.WithVersion(t, testkit.Spec(t, "gmail"), "1.3.0")))

	// Conflicts already among the active specs do not block unrelated installs.
	active, _ = s.Load(t.Context())
	dup := testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
		m["connector"].(map[string]any)["fqn"] = "github://other/google-fork"
	})
	dupSrc, err := readStagedPackageFrom(t, dup)
	if err != nil {
		t.Fatal(err)
	}
	active = append(active, dupSrc) // clashes with the google connector
	lin := testkit.WriteFile(t, dir, "linear.json", testkit.Spec(t, "linear"))
	if _, err := s.Install(t.Context(), lin, active, yes(t, s, lin)); err != nil {
		t.Errorf("unrelated install refused because of an existing conflict: %v", err)
	}
}

// readStagedPackageFrom parses spec data into a policy.Source.
func readStagedPackageFrom(t *testing.T, data []byte) (policy.Source, error) {
	spec, err := policy.ParseSpec("fork.json", data)
	if err != nil {
		return policy.Source{}, err
	}
	return policy.Source{Spec: spec, Hash: "fork", Origin: "fork.json"}, nil
}

func TestConcurrentInstalls(t *testing.T) {
	s, _ := newStore(t)
	dir := t.TempDir()
	var paths []string
	for i := range 6 {
		v := fmt.Sprintf("1.%d.0", i)
		paths = append(paths,
			testkit.WriteFile(t, dir, "g"+v+".json", testkit.WithVersion(t, testkit.Spec(t, "gmail"), v)),
			testkit.WriteFile(t, dir, "l"+v+".json", testkit.WithVersion(t, testkit.Spec(t, "linear"), v)))
	}
	paths = append(paths, paths[0], paths[1]) // identical content, concurrently
	var wg sync.WaitGroup
	errs := make(chan error, len(paths))
	for _, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Install(t.Context(), p, nil, yes(t, s, p))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := refs(t, s)
	if len(got) != 12 {
		t.Errorf("List = %v, want 12 versions", got)
	}
	if p := s.Verify(t.Context()); p != nil {
		t.Errorf("Verify = %v", p)
	}
	if srcs, errs := s.Load(t.Context()); len(srcs) != 2 || len(errs) != 0 {
		t.Errorf("Load = %d sources, %v", len(srcs), errs)
	}
}

func TestCorruptIndexRows(t *testing.T) {
	hash := strings.Repeat("a", 64)
	tests := map[string][]string{
		"bad fqn":            {`INSERT INTO store_versions (fqn, version, hash, active, installed_at) VALUES ('gmail', '1.0.0', '` + hash + `', 1, '2026-01-01T00:00:00.000000000Z')`},
		"bad version":        {`INSERT INTO store_versions (fqn, version, hash, active, installed_at) VALUES ('github://a/b', '1.0', '` + hash + `', 1, '2026-01-01T00:00:00.000000000Z')`},
		"no active":          {`INSERT INTO store_versions (fqn, version, hash, active, installed_at) VALUES ('github://a/b', '1.0.0', '` + hash + `', 0, '2026-01-01T00:00:00.000000000Z')`},
		"quarantined active": {`INSERT INTO store_versions (fqn, version, hash, active, quarantined, installed_at) VALUES ('github://a/b', '1.0.0', '` + hash + `', 1, 1, '2026-01-01T00:00:00.000000000Z')`},
		"bad time":           {`INSERT INTO store_versions (fqn, version, hash, active, installed_at) VALUES ('github://a/b', '1.0.0', '` + hash + `', 1, 'yesterday')`},
	}
	for name, stmts := range tests {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			for _, q := range stmts {
				if err := testkit.Exec(t, s.DB, q); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.List(t.Context())
			if !errors.Is(err, state.ErrCorruptState) || !strings.Contains(err.Error(), s.DB.Path()) {
				t.Errorf("List = %v, want state.ErrCorruptState naming %s", err, s.DB.Path())
			}
			if _, errs := s.Load(t.Context()); len(errs) != 1 || !errors.Is(errs[0], state.ErrCorruptState) {
				t.Errorf("Load errors = %v", errs)
			}
			if err := s.Remove(t.Context(), "github://a/b@1.0.0"); !errors.Is(err, state.ErrCorruptState) {
				t.Errorf("Remove = %v, want state.ErrCorruptState", err)
			}
		})
	}
	// The schema itself refuses a hash that could name a path outside the store.
	s, _ := newStore(t)
	err := testkit.Exec(t, s.DB, `INSERT INTO store_versions (fqn, version, hash, active, installed_at) VALUES ('github://a/b', '1.0.0', '../../../etc', 1, '2026-01-01T00:00:00.000000000Z')`)
	if err == nil {
		t.Error("store_versions accepted a hash that is not 64 hex digits")
	}
}

func TestInstallRefusesBrokenActions(t *testing.T) {
	s, _ := newStore(t)
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, "actions/send/action.md", []byte("+++\nname = \"send\"\nversoin = \"1.0.0\"\n+++\nSends.\n"))
	_, err := s.Install(t.Context(), pkg, nil, yes(t, s, pkg))
	if !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), "versoin") {
		t.Fatalf("Install of a package with a misspelt action key: %v", err)
	}
	if list, _ := s.List(t.Context()); len(list) != 0 {
		t.Fatalf("a refused package was installed: %v", list)
	}
}
