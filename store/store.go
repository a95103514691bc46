package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
	"github.com/rs/zerolog"
)

// Store is the content-addressed connector store under $AILERON_HOME/store.
//
// Layout: Dir/connectors/sha256/<hex>/ holds one package, named by its
// HashPackage hash; Dir/tmp/ stages installs. The index, which maps each
// connector FQN to its installed versions (hash, install time) and the
// active one, is the store_versions table of the control-plane database;
// changes to it run in a write transaction, whose lock (BEGIN IMMEDIATE)
// serialises them across goroutines and processes, package moves included.
// Packages are immutable once placed: the same
// bytes always land in the same directory, and several versions (and
// connectors) may share one.
//
// A Store's methods are safe for concurrent use, also by several processes on
// the same Dir and database. A Store must not be copied after first use.
type Store struct {
	// Dir is the store root, normally $AILERON_HOME/store. Required.
	Dir string
	// DB is the control-plane database holding the index. Required.
	DB *state.DB
	// Log receives one line per install, removal, repair and refused
	// package. Nil discards them.
	Log *zerolog.Logger
	// Now stamps installs, and is the time signatures are judged at. Nil
	// means time.Now.
	Now func() time.Time
	// RequireSignature refuses to install a package that is unsigned or
	// signed by a key not trusted for its authority, unless its authority
	// is local:// (config store.require_signature).
	RequireSignature bool
}

// Installed describes one installed connector version.
type Installed struct {
	FQN     string `json:"fqn"`
	Version string `json:"version"`
	// Hash is the package's HashPackage hash (lower-case hex SHA-256).
	Hash string `json:"hash"`
	// Dir is the package directory in the store.
	Dir string `json:"dir"`
	// Active is true for the version the policy enforces for its FQN.
	Active      bool      `json:"active"`
	InstalledAt time.Time `json:"installed_at"`
	// Grants are what the package may reach: its manifest's grants, or,
	// without a manifest, exactly what its spec reaches. Set by Install and
	// List.
	Grants manifest.Grants `json:"grants"`
	// Signature is the verdict on the package's publisher signature.
	Signature signing.Signature `json:"signature"`
	// Actions are the package's actions and how each pins what it
	// requires. Set by Install and List.
	Actions []ActionPin `json:"actions,omitempty"`
	// Quarantined is true for a version installed but not served: it asks
	// for more than the consent of its FQN's active version (Widening
	// says how) and waits for Approve.
	Quarantined bool     `json:"quarantined,omitempty"`
	Widening    []string `json:"widening,omitempty"`
}

// Ref returns the connector reference FQN@VERSION.
func (i Installed) Ref() string { return i.FQN + "@" + i.Version }

// Problem is one failed check found by Verify.
type Problem struct {
	// Ref is the FQN@VERSION concerned; empty when the index itself failed.
	Ref  string `json:"ref"`
	Hash string `json:"hash,omitempty"`
	Err  string `json:"error"`
}

// Install adds the connector package at path to the store under consent c,
// which must name the hash of the package as staged now (see Offer). path
// is either a spec file (the package is then that file alone, stored as
// aileron.connector.v1.json) or a package directory with
// aileron.connector.v1.json at its root.
//
// The version becomes the active one for its FQN, unless it asks for more
// than the consent of the FQN's active version (Request.Exceeds) and c is
// neither a lock entry recording it nor provider add's: it is then
// installed but quarantined, not served until Approve. Either way c is recorded as the version's consent.
//
// active is the set of specs currently enforced; the new spec is compiled
// together with those of other FQNs and refused if it conflicts with one of
// them. Callers must serialise Install calls that pass active (admin.API does).
//
// The returned Installed carries the package's grants: its manifest's, or,
// without a manifest, exactly what its spec reaches.
//
// Reinstalling identical content is a no-op apart from making that version
// active again (unless quarantined), and repairs a damaged copy in the
// store. Errors: a consent that does not name the staged package's hash, or
// a lock entry that does not cover it, wraps ErrConsentMismatch; a spec that
// does not parse wraps ErrInvalidSpec and keeps the parser's message (file,
// JSON path, rule); a bad path or package content wraps state.ErrInvalidArgument or
// ErrInvalidPackage; a manifest.toml that does not parse wraps
// ErrInvalidManifest, and a spec that reaches beyond its manifest (a
// host:port or credential kind it does not grant, another name or version)
// wraps ErrExceedsManifest, naming every excess; a conflict with another connector, or the same version
// already installed with different content, wraps state.ErrConflict.
//
// A package's actions must pin the connectors they require and stay within
// their grants (see checkActions); a failure wraps ErrActionRequirement.
//
// A package directory may carry its publisher's signature as
// SignatureFileName (see signature.go): one that does not verify wraps
// ErrBadSignature; with RequireSignature, a package that is not signed by
// a key trusted for its authority wraps ErrSignatureRequired. The returned
// Installed carries the verdict. A signature is information: it never
// stands in for the consent.
func (s *Store) Install(ctx context.Context, path string, active []policy.Source, c Consent) (Installed, error) {
	return s.InstallWith(ctx, path, active, InstallOptions{}, c)
}

// InstallWith is Install with opts.
func (s *Store) InstallWith(ctx context.Context, path string, active []policy.Source, opts InstallOptions, c Consent) (Installed, error) {
	st, err := s.stage(ctx, path, opts)
	if err != nil {
		return Installed{}, err
	}
	defer os.RemoveAll(st.dir)
	if err := c.check(st.req); err != nil {
		return Installed{}, err
	}
	if c.By == "" {
		return Installed{}, fmt.Errorf("%w: the consent does not say who gave it", state.ErrInvalidArgument)
	}
	if err := checkConflicts(st.src, active); err != nil {
		return Installed{}, err
	}
	// Hash a copy already in the store before taking the write lock, which
	// the approval store shares: the common reinstall then holds it briefly.
	got, herr := HashPackage(s.packageDir(st.src.Hash))
	intact := herr == nil && got == st.src.Hash
	var inst Installed
	err = s.update(ctx, func(ctx context.Context, tx *state.Tx, ix *storeIndex) error {
		if inst, err = s.commitInstall(ctx, tx, ix, st, c, intact); err != nil {
			return err
		}
		return s.recordSignature(ctx, tx, st.src.Hash, st.sig)
	})
	if err != nil {
		return Installed{}, err
	}
	inst.Grants, inst.Actions, inst.Signature = st.req.Grants, st.pins, st.req.Signature
	ev := s.log().Info().Str("event", "store.installed").Str("connector", inst.Ref()).Str("hash", inst.Hash).
		Str("from", st.origin).Str("signature", string(st.req.Signature.Status)).Str("authority", st.req.Signature.Authority).
		Str("signer", st.req.Signature.Fingerprint).Str("consent_by", c.By).Str("consent_via", c.Via)
	if inst.Quarantined {
		ev.Strs("widening", inst.Widening).Msg("connector installed but QUARANTINED: it asks for more than the active version; `aileron connector approve " + inst.Ref() + "` to serve it")
		return inst, nil
	}
	ev.Msg("connector installed")
	return inst, nil
}

// staged is a package copied into a private staging directory (dir, to be
// removed by the caller) and checked: its spec, manifest, signature and
// actions read, and what it asks for.
type staged struct {
	dir, pkg, origin string
	src              policy.Source
	sig              []byte // the publisher's signature, taken out of pkg; nil when none
	pins             []ActionPin
	req              Request
}

// stage copies the package at path into a new staging directory and reads
// it (see Install for the errors).
func (s *Store) stage(ctx context.Context, path string, opts InstallOptions) (*staged, error) {
	if err := s.checkDir(); err != nil {
		return nil, err
	}
	dir, err := s.newStaging()
	if err != nil {
		return nil, err
	}
	st := &staged{dir: dir, pkg: filepath.Join(dir, "pkg")}
	if err := s.read(ctx, st, path, opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return st, nil
}

// read stages the package at path into st and checks it.
func (s *Store) read(ctx context.Context, st *staged, path string, opts InstallOptions) error {
	var err error
	if st.origin, err = stagePackage(path, st.pkg); err != nil {
		return err
	}
	if st.sig, err = takeSignature(st.pkg); err != nil {
		return err
	}
	if st.src, err = readStagedPackage(st.pkg, st.origin); err != nil {
		return err
	}
	dir := filepath.Dir(st.origin)
	grants, err := checkManifest(st.pkg, dir, st.src.Spec)
	if err != nil {
		return err
	}
	verdict, err := s.judgeSignature(ctx, st.sig, st.src, opts.FetchedFrom)
	if err != nil {
		return err
	}
	if st.pins, err = s.checkActions(ctx, st.pkg, dir, st.src.Spec, grants, opts); err != nil {
		return err
	}
	var names []string
	for _, p := range st.pins {
		names = append(names, p.Name)
	}
	st.req = buildRequest(st.src, grants, names, verdict)
	return nil
}

// newStaging creates a private staging directory under Dir/tmp.
func (s *Store) newStaging() (string, error) {
	tmp := filepath.Join(s.Dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("creating store staging directory: %w", err)
	}
	dir, err := os.MkdirTemp(tmp, "install-")
	if err != nil {
		return "", fmt.Errorf("creating store staging directory: %w", err)
	}
	return dir, nil
}

// stagePackage copies the package at path (spec file or directory) into pkg
// and returns the path to name the spec by in messages. Failures wrap
// state.ErrInvalidArgument (path unusable) or ErrInvalidPackage (content).
func stagePackage(path, pkg string) (origin string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%w: connector package path %q: %v", state.ErrInvalidArgument, path, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("%w: connector package %s: %v", state.ErrInvalidArgument, abs, err)
	}
	info, err := os.Stat(resolved)
	if err != nil {
		return "", fmt.Errorf("%w: connector package %s: %v", state.ErrInvalidArgument, abs, err)
	}
	switch {
	case info.Mode().IsRegular():
		return abs, copyPackageFile(resolved, filepath.Join(pkg, SpecFileName))
	case !info.IsDir():
		return "", fmt.Errorf("%w: %s is neither a spec file nor a package directory", state.ErrInvalidArgument, abs)
	}
	files, err := scanPackage(resolved)
	if err != nil {
		return "", err
	}
	origin = filepath.Join(abs, SpecFileName)
	if !slices.ContainsFunc(files, func(f pkgFile) bool { return f.rel == SpecFileName }) {
		return "", fmt.Errorf("%w: %s not found; a package directory needs %s at its root", ErrInvalidPackage, origin, SpecFileName)
	}
	for _, f := range files {
		src := filepath.Join(resolved, filepath.FromSlash(f.rel))
		if err := copyPackageFile(src, filepath.Join(pkg, filepath.FromSlash(f.rel))); err != nil {
			return "", err
		}
	}
	return origin, nil
}

// readStagedPackage hashes the staged package and parses its spec (the bytes
// that were hashed; stagePackage guarantees the file exists), naming the spec
// origin in parse errors.
func readStagedPackage(pkg, origin string) (policy.Source, error) {
	hash, data, err := hashPackageSpec(pkg)
	if err != nil {
		return policy.Source{}, err
	}
	spec, err := parseSpec(origin, data)
	if err != nil {
		return policy.Source{}, err
	}
	return policy.Source{Spec: spec, Hash: hash, Origin: origin}, nil
}

// checkManifest reads the staged package's manifest.toml, if any (dir
// names it in messages), and checks that spec stays within it. It returns
// the package's grants: the manifest's, or without one what spec reaches.
// A manifest that does not parse wraps ErrInvalidManifest; a spec that
// reaches beyond it wraps ErrExceedsManifest, naming every excess.
func checkManifest(pkg, dir string, spec *policy.Spec) (manifest.Grants, error) {
	data, err := os.ReadFile(filepath.Join(pkg, manifest.FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return manifest.Reach(spec), nil
	}
	if err != nil {
		return manifest.Grants{}, fmt.Errorf("%w: reading %s: %v", ErrInvalidPackage, manifest.FileName, err)
	}
	m, err := manifest.Parse(filepath.Join(dir, manifest.FileName), data)
	if err != nil {
		return manifest.Grants{}, packageError{ErrInvalidManifest, err}
	}
	if err := m.Check(spec); err != nil {
		return manifest.Grants{}, packageError{ErrExceedsManifest,
			fmt.Errorf("%s@%s is refused: %w", spec.Connector.FQN, spec.Connector.Version, err)}
	}
	return m.Grants(), nil
}

// storedGrants returns the grants of the installed package in dir: its
// manifest's, or what its spec reaches when it has no manifest or one that
// does not hold (a package installed before manifests were read); none when
// the spec no longer reads (Verify and Load report why).
func storedGrants(dir string) manifest.Grants {
	data, err := os.ReadFile(filepath.Join(dir, SpecFileName))
	if err != nil {
		return manifest.Grants{}
	}
	spec, err := policy.ParseSpec(filepath.Join(dir, SpecFileName), data)
	if err != nil {
		return manifest.Grants{}
	}
	g, err := checkManifest(dir, dir, spec)
	if err != nil {
		return manifest.Reach(spec)
	}
	return g
}

// packageError is a manifest failure: its message is the sentinel's and
// err's; it wraps the sentinel, ErrInvalidPackage (so the admin API answers
// 400 invalid_package) and err.
type packageError struct{ sentinel, err error }

func (e packageError) Error() string   { return e.sentinel.Error() + ": " + e.err.Error() }
func (e packageError) Unwrap() []error { return []error{e.sentinel, ErrInvalidPackage, e.err} }

// parseSpec parses a spec with policy.ParseSpec, which also checks that the
// version is strict SemVer. Failures wrap ErrInvalidSpec and keep the parser's error
// (and its message) intact.
func parseSpec(file string, data []byte) (*policy.Spec, error) {
	spec, err := policy.ParseSpec(file, data)
	if err != nil {
		return nil, specError{err}
	}
	return spec, nil // ParseSpec validated the version as strict SemVer
}

// specError marks a spec parse failure with ErrInvalidSpec while keeping the
// underlying error's message and chain.
type specError struct{ err error }

func (e specError) Error() string   { return e.err.Error() }
func (e specError) Unwrap() []error { return []error{ErrInvalidSpec, e.err} }

// checkConflicts compiles src together with the active specs of other FQNs
// and reports the conflicts that src adds (conflicts already present among
// the active specs are not src's fault). The error wraps state.ErrConflict and the
// compiler's errors, which name both sides.
func checkConflicts(src policy.Source, active []policy.Source) error {
	fqn := src.Spec.Connector.FQN
	others := make([]policy.Source, 0, len(active)+1)
	for _, a := range active {
		if a.Spec != nil && a.Spec.Connector.FQN != fqn {
			others = append(others, a)
		}
	}
	_, before := policy.Compile(others, nil)
	_, after := policy.Compile(append(others, src), nil)
	if len(after) <= len(before) {
		return nil
	}
	seen := map[string]int{}
	for _, e := range before {
		seen[e.Error()]++
	}
	var added []error
	for _, e := range after {
		if seen[e.Error()] > 0 {
			seen[e.Error()]--
			continue
		}
		added = append(added, e)
	}
	return fmt.Errorf("%w: %s@%s cannot be installed next to the active connectors: %w",
		state.ErrConflict, fqn, src.Spec.Connector.Version, errors.Join(added...))
}

// commitInstall places the staged package and records it in the index ix
// read in tx, the store's write transaction, with its consent c: active,
// or quarantined when it asks for more than the active version's consent
// and c is not a lock entry. intact says the package directory was found
// intact just before.
func (s *Store) commitInstall(ctx context.Context, tx *state.Tx, ix *storeIndex, st *staged, c Consent, intact bool) (Installed, error) {
	src := st.src
	fqn, version := src.Spec.Connector.FQN, src.Spec.Connector.Version
	e, ok := indexVersion{}, false
	if ic := ix.Connectors[fqn]; ic != nil {
		e, ok = ic.Versions[version]
	}
	if ok && e.Hash != src.Hash {
		return Installed{}, fmt.Errorf("%w: %s@%s is already installed with different content (sha256 %s, new %s); "+
			"a version's content never changes: bump connector.version, or `aileron connector remove %s@%s` first",
			state.ErrConflict, fqn, version, e.Hash, src.Hash, fqn, version)
	}
	widening, err := s.widening(ctx, tx, ix, st.req)
	if err != nil {
		return Installed{}, err
	}
	// A lock records a consent given before; provider add's command, and
	// proposals accept's, is the consent to the package it writes.
	quarantine := len(widening) > 0 && c.Via != ViaLock && c.Via != ViaProvider && c.Via != ViaProposal
	if err := s.sharePackage(ctx, tx, st.pkg, src.Hash); err != nil {
		return Installed{}, err
	}
	if err := s.place(st.pkg, src.Hash, st.dir, intact); err != nil {
		return Installed{}, err
	}
	now := s.now().UTC().Round(0)
	if !ok {
		e = indexVersion{Hash: src.Hash, InstalledAt: now}
	}
	if quarantine {
		err = quarantineVersion(ctx, tx, fqn, version, e.Hash, e.InstalledAt)
	} else {
		err = activateVersion(ctx, tx, fqn, version, e.Hash, e.InstalledAt)
	}
	if err != nil {
		return Installed{}, err
	}
	if err := saveConsent(ctx, tx, st.req, c, now); err != nil {
		return Installed{}, err
	}
	return Installed{FQN: fqn, Version: version, Hash: src.Hash, Dir: s.packageDir(src.Hash), Active: !quarantine,
		Quarantined: quarantine, Widening: widening, InstalledAt: e.InstalledAt}, nil
}

// place renames the staged package into Dir/connectors/sha256/<hash>. If a
// directory is already there and intact (known to be when intact is true,
// else hashed now), the staged copy is dropped; if it is damaged, it is
// replaced. It runs inside the store's write transaction.
func (s *Store) place(pkg, hash, staging string, intact bool) error {
	final := s.packageDir(hash)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return fmt.Errorf("creating store directory: %w", err)
	}
	if _, err := os.Lstat(final); err == nil {
		if intact {
			return nil
		}
		got, herr := HashPackage(final)
		if herr == nil && got == hash {
			return nil
		}
		s.log().Warn().Str("event", "store.repaired").Str("dir", final).Str("damage", describeMismatch(got, herr)).
			Msg("package was damaged; replacing it with the package being installed")
		if err := os.Rename(final, filepath.Join(staging, "damaged")); err != nil {
			return fmt.Errorf("moving damaged package %s aside: %w", final, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspecting %s: %w", final, err)
	}
	if err := os.Rename(pkg, final); err != nil {
		return fmt.Errorf("moving package into the store: %w", err)
	}
	return nil
}

// describeMismatch explains why a package directory failed its hash check.
func describeMismatch(got string, err error) string {
	if err != nil {
		return err.Error()
	}
	return "its content hash is now " + got
}

// List returns every installed connector version, sorted by FQN and then by
// SemVer precedence, each with its grants and the verdict on its recorded
// signature against the trust store as it stands now. Failures reading the index wrap state.ErrCorruptState or are
// I/O errors.
func (s *Store) List(ctx context.Context) ([]Installed, error) {
	if err := s.checkDir(); err != nil {
		return nil, err
	}
	ix, err := s.readIndex(ctx)
	if err != nil {
		return nil, err
	}
	judge, err := s.signatureJudge(ctx)
	if err != nil {
		return nil, err
	}
	var out []Installed
	for fqn, c := range ix.Connectors {
		for v, e := range c.Versions {
			dir := s.packageDir(e.Hash)
			i := Installed{FQN: fqn, Version: v, Hash: e.Hash, Dir: dir, Active: v == c.Active,
				InstalledAt: e.InstalledAt, Grants: storedGrants(dir), Actions: storedActions(dir),
				Signature: judge(fqn, v, e.Hash), Quarantined: e.Quarantined}
			if e.Quarantined {
				req, err := s.consentedRequest(ctx, s.DB, fqn, v, e.Hash)
				if err != nil {
					return nil, err
				}
				if i.Widening, err = s.widening(ctx, s.DB, ix, req); err != nil {
					return nil, err
				}
			}
			out = append(out, i)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].FQN != out[j].FQN {
			return out[i].FQN < out[j].FQN
		}
		return policy.CompareVersions(out[i].Version, out[j].Version) < 0
	})
	return out, nil
}

// Remove uninstalls the connector version ref (FQN@VERSION, strict SemVer).
// If it was the active version, the highest remaining version not
// quarantined becomes active; when only quarantined versions would remain,
// the removal is refused (state.ErrConflict). The package directory is deleted unless another version still
// refers to the same hash. A malformed ref wraps state.ErrInvalidArgument; a
// version that is not installed wraps state.ErrNotFound.
func (s *Store) Remove(ctx context.Context, ref string) error {
	if err := s.checkDir(); err != nil {
		return err
	}
	fqn, version, err := policy.ParseRef(ref)
	if err != nil {
		return fmt.Errorf("%w: %v", state.ErrInvalidArgument, err)
	}
	var newActive, moved, hash string
	err = s.update(ctx, func(ctx context.Context, tx *state.Tx, ix *storeIndex) error {
		newActive, hash = "", "" // a retried transaction starts afresh (moved carries over)
		c := ix.Connectors[fqn]
		if c == nil {
			return fmt.Errorf("%w: connector %s is not installed (see `aileron connector list`)", state.ErrNotFound, fqn)
		}
		e, ok := c.Versions[version]
		if !ok {
			return fmt.Errorf("%w: %s is not installed; installed versions of %s: %s",
				state.ErrNotFound, ref, fqn, strings.Join(sortedVersions(c), ", "))
		}
		delete(c.Versions, version)
		switch {
		case len(c.Versions) == 0:
			delete(ix.Connectors, fqn)
		case c.Active == version:
			if newActive = servable(c); newActive == "" {
				return fmt.Errorf("%w: %s is the only version of %s not quarantined; approve another version "+
					"(`aileron connector approve`) or remove the quarantined ones (%s) first",
					state.ErrConflict, ref, fqn, strings.Join(sortedVersions(c), ", "))
			}
			c.Active = newActive
		}
		if err := deleteVersion(ctx, tx, fqn, version, newActive); err != nil {
			return err
		}
		if hashInUse(ix, e.Hash) {
			return nil
		}
		hash = e.Hash
		if err := s.unsharePackage(ctx, tx, hash); err != nil {
			return err
		}
		if err := forgetSignature(ctx, tx, hash); err != nil {
			return err
		}
		if moved == "" {
			moved, err = s.movePackageAside(hash)
		}
		return err
	})
	if moved != "" {
		if err != nil {
			s.restorePackage(moved, hash)
		}
		os.RemoveAll(moved)
	}
	if err != nil {
		return err
	}
	ev := s.log().Info().Str("event", "store.removed").Str("connector", ref)
	if newActive != "" {
		ev = ev.Str("active", fqn+"@"+newActive)
	}
	ev.Msg("connector version removed")
	return nil
}

// sortedVersions returns c's versions in ascending SemVer order.
func sortedVersions(c *indexConnector) []string {
	vs := make([]string, 0, len(c.Versions))
	for v := range c.Versions {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return policy.CompareVersions(vs[i], vs[j]) < 0 })
	return vs
}

// servable returns the highest version of c that is not quarantined, or
// "" when there is none.
func servable(c *indexConnector) string {
	vs := sortedVersions(c)
	for i := len(vs) - 1; i >= 0; i-- {
		if !c.Versions[vs[i]].Quarantined {
			return vs[i]
		}
	}
	return ""
}

// hashInUse reports whether any index entry refers to hash.
func hashInUse(ix *storeIndex, hash string) bool {
	for _, c := range ix.Connectors {
		for _, e := range c.Versions {
			if e.Hash == hash {
				return true
			}
		}
	}
	return false
}

// checkDir refuses a Store without a Dir.
func (s *Store) checkDir() error {
	if s.Dir == "" {
		return fmt.Errorf("%w: Store.Dir is empty; set it to $AILERON_HOME/store", state.ErrInvalidArgument)
	}
	return nil
}

// packageDir is Dir/connectors/sha256/<hash>.
func (s *Store) packageDir(hash string) string {
	return filepath.Join(s.Dir, "connectors", "sha256", hash)
}

// now returns the install clock's time.
func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// log returns Log, or a logger that discards.
func (s *Store) log() *zerolog.Logger {
	if s.Log != nil {
		return s.Log
	}
	nop := zerolog.Nop()
	return &nop
}
