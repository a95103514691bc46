package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/aileronhq/aileron/policy"
)

// Verify re-hashes every installed package (every version, active or not)
// and re-parses its spec. It returns one Problem per version that fails: a
// missing package directory, content that no longer matches its hash (a file
// edited, added or removed), a spec that no longer parses, or a spec whose
// FQN@VERSION differs from its index entry. A nil result means all is well.
// An unreadable index is reported as a single Problem with an empty Ref.
func (s *Store) Verify(ctx context.Context) []Problem {
	if err := s.checkDir(); err != nil {
		return []Problem{{Err: err.Error()}}
	}
	ix, err := s.readIndex(ctx)
	if err != nil {
		return []Problem{{Err: err.Error()}}
	}
	var problems []Problem
	for _, fqn := range sortedFQNs(ix) {
		c := ix.Connectors[fqn]
		for _, v := range sortedVersions(c) {
			hash := c.Versions[v].Hash
			if _, err := s.checkPackage(ctx, fqn, v, hash); err != nil {
				problems = append(problems, Problem{Ref: fqn + "@" + v, Hash: hash, Err: err.Error()})
			}
		}
	}
	return problems
}

// Load returns the active version of every installed connector, each
// re-hashed and re-parsed now. A package that fails (tampered, missing,
// unparsable) is refused: it is left out, logged through Log, and its error
// (wrapping ErrTampered or ErrInvalidSpec) is returned alongside the sources
// that did load. Origin is the spec file's path in the store.
func (s *Store) Load(ctx context.Context) ([]policy.Source, []error) {
	if err := s.checkDir(); err != nil {
		return nil, []error{err}
	}
	ix, err := s.readIndex(ctx)
	if err != nil {
		s.log().Error().Str("event", "store.load_failed").Err(err).Msg("cannot load connectors")
		return nil, []error{err}
	}
	var srcs []policy.Source
	var errs []error
	for _, fqn := range sortedFQNs(ix) {
		c := ix.Connectors[fqn]
		src, err := s.checkPackage(ctx, fqn, c.Active, c.Versions[c.Active].Hash)
		if err != nil {
			s.log().Error().Str("event", "store.refused").Str("connector", fqn+"@"+c.Active).Err(err).
				Msg("REFUSING the connector: its package failed its check")
			errs = append(errs, err)
			continue
		}
		srcs = append(srcs, src)
	}
	return srcs, errs
}

// checkPackage verifies the package recorded for fqn@version under hash and
// parses its spec from the very bytes that were hashed. Integrity failures
// wrap ErrTampered; parse failures wrap ErrInvalidSpec.
func (s *Store) checkPackage(ctx context.Context, fqn, version, hash string) (policy.Source, error) {
	ref := fqn + "@" + version
	dir := s.packageDir(hash)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if _, err := s.fetchPackage(ctx, hash); err != nil {
			return policy.Source{}, fmt.Errorf("%s: %w", ref, err)
		}
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return policy.Source{}, fmt.Errorf("%w: %s: package directory %s is missing; reinstall it or `aileron connector remove %s`",
			ErrTampered, ref, dir, ref)
	}
	got, data, err := hashPackageSpec(dir)
	if err != nil {
		return policy.Source{}, fmt.Errorf("%w: %s: %w", ErrTampered, ref, err)
	}
	if got != hash {
		return policy.Source{}, fmt.Errorf("%w: %s: content hash of %s is now %s, want %s: a file was edited, added or removed since install; "+
			"reinstall the package or `aileron connector remove %s`", ErrTampered, ref, dir, got, hash, ref)
	}
	specPath := filepath.Join(dir, SpecFileName)
	if data == nil {
		return policy.Source{}, fmt.Errorf("%w: %s: %s is missing", ErrTampered, ref, specPath)
	}
	spec, err := parseSpec(specPath, data)
	if err != nil {
		return policy.Source{}, fmt.Errorf("%s: %w", ref, err)
	}
	if spec.Connector.FQN != fqn || spec.Connector.Version != version {
		return policy.Source{}, fmt.Errorf("%w: %s: the spec in %s declares %s@%s", ErrTampered, ref, dir,
			spec.Connector.FQN, spec.Connector.Version)
	}
	return policy.Source{Spec: spec, Hash: hash, Origin: specPath}, nil
}

// sortedFQNs returns the index's FQNs in lexical order.
func sortedFQNs(ix *storeIndex) []string {
	fqns := make([]string, 0, len(ix.Connectors))
	for fqn := range ix.Connectors {
		fqns = append(fqns, fqn)
	}
	sort.Strings(fqns)
	return fqns
}
