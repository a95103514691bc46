package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/policy"
)

// ErrActionRequirement is wrapped when an action of a package requires a
// connector it does not pin (a wrong hash, or a placeholder without
// InstallOptions.AllowUnpinned), one that is not installed, or capabilities
// beyond that connector's grants. It also wraps ErrInvalidPackage.
var ErrActionRequirement = errors.New("action requirement not met")

// InstallOptions are the choices of one install (InstallWith).
type InstallOptions struct {
	// AllowUnpinned accepts an action whose requirement on another
	// connector names a placeholder hash such as "sha256:bound-at-release"
	// instead of that package's installed hash. Such an action is shown as
	// unpinned (ActionPin.Unpinned). For development only.
	AllowUnpinned bool
	// FetchedFrom is the https URL the package was fetched from, or ""
	// for a package from this machine (a directory, a file, a mirror). A
	// fetched package is nobody's own: naming itself local:// does not
	// exempt it from RequireSignature.
	FetchedFrom string
}

// ActionPin is how one action of a package pins the connectors it
// requires.
type ActionPin struct {
	Name string `json:"name"`
	// Unpinned lists, as FQN@VERSION, the requirements that name a
	// placeholder hash: the action may run against whatever bytes are
	// installed under that version.
	Unpinned []string `json:"unpinned,omitempty"`
}

// checkActions loads the staged package's actions (pkg; dir names it in
// messages) and checks each requirement: the package itself is pinned by
// containment; another connector's FQN@VERSION must be its active version,
// installed with the hash the requirement names (a placeholder only with opts.AllowUnpinned);
// and the capabilities listed must lie within that package's grants
// (hosts, credential kinds, and the scopes of its manifest). grants are
// the staged package's own. It returns each action's pins.
func (s *Store) checkActions(ctx context.Context, pkg, dir string, spec *policy.Spec, grants manifest.Grants, opts InstallOptions) ([]ActionPin, error) {
	ms, err := action.LoadPackage(pkg, spec)
	if err != nil {
		return nil, fmt.Errorf("%w: the package's actions: %w", ErrInvalidPackage, stagedAs(err, pkg, dir))
	}
	var ix *storeIndex
	var pins []ActionPin
	var errs []error
	for _, m := range ms {
		where := fmt.Sprintf("action %q (%s)", m.Name, filepath.Join(dir, "actions", m.Name, action.ManifestFile))
		for i, r := range m.Requires {
			req := fmt.Sprintf("%s: requires.connectors[%d] %s@%s", where, i, r.Name, r.Version)
			if r.Name == spec.Connector.FQN { // pinned by containment (LoadPackage checked)
				errs = append(errs, beyondGrants(req, r, grants, manifestScopes(pkg))...)
				continue
			}
			if ix == nil {
				if ix, err = s.readIndex(ctx); err != nil {
					return nil, err
				}
			}
			errs = append(errs, s.checkRequirement(ix, req, r, opts)...)
		}
		pins = append(pins, ActionPin{Name: m.Name, Unpinned: m.Unpinned()})
	}
	if len(errs) > 0 {
		return nil, packageError{ErrActionRequirement, errors.Join(errs...)}
	}
	return pins, nil
}

// checkRequirement checks requirement r (req names it) on another
// connector against the index ix.
func (s *Store) checkRequirement(ix *storeIndex, req string, r action.Requirement, opts InstallOptions) []error {
	c := ix.Connectors[r.Name]
	var e indexVersion
	ok := c != nil
	if ok {
		e, ok = c.Versions[r.Version]
	}
	if !ok {
		have := "none"
		if c != nil {
			have = strings.Join(sortedVersions(c), ", ")
		}
		return []error{fmt.Errorf("%s is not installed (installed versions: %s); install it first, then this package", req, have)}
	}
	switch {
	case c.Active != r.Version:
		return []error{fmt.Errorf("%s is installed but %s@%s is the active version, so the action could never run; require the active version, or activate %s@%s by installing it again",
			req, r.Name, c.Active, r.Name, r.Version)}
	case r.Bound() && strings.TrimPrefix(r.Hash, "sha256:") != e.Hash:
		return []error{fmt.Errorf("%s: the hash is %s but the installed package's hash is sha256:%s; pin the installed package (hash = \"sha256:%s\") or install the package the action was written for",
			req, r.Hash, e.Hash, e.Hash)}
	case !r.Pinned() && !opts.AllowUnpinned:
		return []error{fmt.Errorf("%s: hash %q is a placeholder, not a pin; write the installed hash \"sha256:%s\", or install with --allow-unpinned (development only: the action is then shown as unpinned)",
			req, r.Hash, e.Hash)}
	}
	dir := s.packageDir(e.Hash)
	return beyondGrants(req, r, storedGrants(dir), manifestScopes(dir))
}

// beyondGrants reports each capability of r that grants and scopes (the
// required package's) do not cover.
func beyondGrants(req string, r action.Requirement, grants manifest.Grants, scopes []string) []error {
	caps := r.Caps()
	var errs []error
	add := func(capability, what string, granted []string) {
		have := "none"
		if len(granted) > 0 {
			have = strings.Join(granted, ", ")
		}
		errs = append(errs, fmt.Errorf("%s: capability %q is beyond the connector's grants (its %s: %s); remove it, or ask the publisher to grant it in the connector's manifest",
			req, capability, what, have))
	}
	for _, h := range caps.Hosts {
		if !slices.Contains(grants.Hosts, h) {
			add("network:"+h, "hosts", grants.Hosts)
		}
	}
	for _, k := range caps.CredentialKinds {
		if !slices.Contains(grants.CredentialKinds, k) {
			add("credential:"+k, "credential kinds", grants.CredentialKinds)
		}
	}
	for _, sc := range caps.Scopes {
		if !slices.Contains(scopes, sc) {
			add("scope:"+sc, "scopes", scopes)
		}
	}
	return errs
}

// manifestScopes returns the scopes the manifest.toml in dir grants: its
// [capabilities.credential] scope and its OAuth app's scopes. None without
// a manifest (or with one that does not read: install refuses those).
func manifestScopes(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, manifest.FileName))
	if err != nil {
		return nil
	}
	m, err := manifest.Parse(filepath.Join(dir, manifest.FileName), data)
	if err != nil || m.Credential == nil {
		return nil
	}
	var out []string
	if m.Credential.Scope != "" {
		out = append(out, m.Credential.Scope)
	}
	if m.Credential.OAuth2 != nil {
		out = append(out, m.Credential.OAuth2.Scopes...)
	}
	return out
}

// storedActions returns the pins of the actions of the installed package
// in dir; nil when it has none or they no longer load (Load reports why).
func storedActions(dir string) []ActionPin {
	data, err := os.ReadFile(filepath.Join(dir, SpecFileName))
	if err != nil {
		return nil
	}
	spec, err := policy.ParseSpec(filepath.Join(dir, SpecFileName), data)
	if err != nil {
		return nil
	}
	ms, err := action.LoadPackage(dir, spec)
	if err != nil {
		return nil
	}
	var pins []ActionPin
	for _, m := range ms {
		pins = append(pins, ActionPin{Name: m.Name, Unpinned: m.Unpinned()})
	}
	return pins
}

// renamedError is an error whose message names files by where the package
// was installed from rather than where it was staged.
type renamedError struct {
	msg string
	err error
}

func (e renamedError) Error() string { return e.msg }
func (e renamedError) Unwrap() error { return e.err }

// stagedAs returns err with each path under the staged package pkg in its
// message written under dir, the directory it was installed from, so an
// error names the file the publisher edits.
func stagedAs(err error, pkg, dir string) error {
	sep := string(filepath.Separator)
	return renamedError{msg: strings.ReplaceAll(err.Error(), pkg+sep, dir+sep), err: err}
}
