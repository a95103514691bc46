package action

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// ManifestFile is the name of an action's manifest inside
// actions/<name>/ of a connector package.
const ManifestFile = "action.md"

// ResolveStep finds the operation step s runs in spec: s.Connector must
// equal spec.Connector.FQN; s.Op is an exact operation name, looked up in
// tool s.Tool when set, else across all tools, where it must be unique. It
// returns the tool's name and the operation (pointing into spec). Every
// failure wraps ErrUnresolved and says what is available.
func ResolveStep(spec *policy.Spec, s Step) (tool string, op *policy.OperationSpec, err error) {
	fail := func(format string, a ...any) (string, *policy.OperationSpec, error) {
		return "", nil, fmt.Errorf("%w: step %s: %s", ErrUnresolved, quote(s.ID), fmt.Sprintf(format, a...))
	}
	if spec == nil {
		return fail("no connector spec to resolve against")
	}
	if s.Connector != spec.Connector.FQN {
		return fail("connector %s is not this package's connector %s; actions can only run operations of their own package",
			quote(s.Connector), quote(spec.Connector.FQN))
	}
	var matches []int // indexes into spec.Tools (one per tool holding the op)
	var opIdx []int
	var tools []string
	for i := range spec.Tools {
		t := &spec.Tools[i]
		tools = append(tools, t.Name)
		if s.Tool != "" && t.Name != s.Tool {
			continue
		}
		for j := range t.Operations {
			if t.Operations[j].Name == s.Op {
				matches = append(matches, i)
				opIdx = append(opIdx, j)
			}
		}
	}
	if s.Tool != "" && !contains(tools, s.Tool) {
		return fail("connector %s has no tool %s; its tools are %s", quote(spec.Connector.FQN), quote(s.Tool), list(tools))
	}
	switch len(matches) {
	case 1:
		t := &spec.Tools[matches[0]]
		return t.Name, &t.Operations[opIdx[0]], nil
	case 0:
		where := "connector " + quote(spec.Connector.FQN)
		if s.Tool != "" {
			where = "tool " + quote(s.Tool)
		}
		return fail("%s has no operation %s; available operations: %s", where, quote(s.Op), list(operationNames(spec, s.Tool)))
	}
	var holders []string
	for _, i := range matches {
		holders = append(holders, spec.Tools[i].Name)
	}
	return fail("operation %s exists in several tools (%s); add tool = %s (or another of them) to the step",
		quote(s.Op), list(holders), quote(holders[0]))
}

// operationNames lists the operation names of spec (of tool only, when
// set), sorted and de-duplicated.
func operationNames(spec *policy.Spec, tool string) []string {
	seen := map[string]bool{}
	var names []string
	for _, t := range spec.Tools {
		if tool != "" && t.Name != tool {
			continue
		}
		for _, o := range t.Operations {
			if !seen[o.Name] {
				seen[o.Name] = true
				names = append(names, o.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// LoadPackage reads every actions/<name>/action.md of the connector
// package in dir, parses it, checks that <name> equals the manifest's name
// and resolves each step against spec (ResolveStep). A requirement on the
// package itself must name its version and hash "self"; a step whose
// operation needs a host:port or credential kind outside its requirement's
// capabilities is refused (wrapping ErrExceedsCapabilities), and so is a
// step's ${STEP.FIELD…} naming a field that the output_schema of STEP's
// operation does not list (policy.OutputHasField). A package without an
// actions directory has no actions: (nil, nil). Manifests come back sorted
// by name. Problems in all manifests are reported together, joined with
// errors.Join; each is a *ValidationError wrapping ErrInvalidAction (and
// ErrUnresolved for a step that does not resolve). Symbolic links under
// actions/ are refused.
func LoadPackage(dir string, spec *policy.Spec) ([]*Manifest, error) {
	root := filepath.Join(dir, "actions")
	fi, err := os.Lstat(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, pkgError(root, "", fmt.Sprintf("cannot read the actions directory: %v", err))
	}
	if !fi.IsDir() {
		return nil, pkgError(root, "", "actions is not a directory; actions live in actions/<name>/action.md")
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, pkgError(root, "", fmt.Sprintf("cannot list the actions directory: %v", err))
	}
	var out []*Manifest
	var errs []error
	for _, e := range entries {
		m, err := loadEntry(root, e, spec)
		if err != nil {
			errs = append(errs, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// loadEntry loads one entry of actions/: (nil, nil) for entries that are
// not actions (non-Markdown files).
func loadEntry(root string, e fs.DirEntry, spec *policy.Spec) (*Manifest, error) {
	path := filepath.Join(root, e.Name())
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		return nil, pkgError(path, "", "is a symbolic link; actions must be real directories inside the package")
	case !e.IsDir() && strings.HasSuffix(e.Name(), ".md"):
		return nil, pkgError(path, "", fmt.Sprintf("action manifests live in actions/<name>/%s; move it to actions/%s/%s",
			ManifestFile, strings.TrimSuffix(e.Name(), ".md"), ManifestFile))
	case !e.IsDir():
		return nil, nil
	}
	file := filepath.Join(path, ManifestFile)
	data, err := readManifest(file)
	if err != nil {
		return nil, pkgError(file, "", err.Error())
	}
	m, err := Parse(file, data)
	if err != nil {
		return nil, err
	}
	var errs []error
	if m.Name != e.Name() {
		errs = append(errs, &ValidationError{File: file, Key: "name", Rule: ruleName,
			Message: fmt.Sprintf("name %s differs from its directory %s; rename one so they match", quote(m.Name), quote(e.Name()))})
	}
	errs = append(errs, checkPins(file, m, spec)...)
	ops := make([]*policy.OperationSpec, len(m.Steps))
	for i, s := range m.Steps {
		tool, op, err := ResolveStep(spec, s)
		ops[i] = op
		if err != nil {
			errs = append(errs, &ValidationError{File: file, Key: idx("execute", i), Rule: ruleResolve,
				Message: strings.TrimPrefix(err.Error(), ErrUnresolved.Error()+": "), Err: ErrUnresolved})
			continue
		}
		if r, ok := m.Requirement(s.Connector); ok {
			if err := checkStepNeeds(file, i, s, tool, op, r); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, checkOutputRefs(file, m, ops)...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// readManifest reads a regular file of at most MaxManifestSize bytes.
func readManifest(file string) ([]byte, error) {
	fi, err := os.Lstat(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("missing: every directory under actions/ needs an %s", ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file (symbolic links are refused)")
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %v", err)
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("is larger than the %d-byte limit; shorten the description", MaxManifestSize)
	}
	return data, nil
}

func pkgError(file, key, msg string) error {
	return &ValidationError{File: file, Key: key, Rule: ruleDirectory, Message: msg}
}
