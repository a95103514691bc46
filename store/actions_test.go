package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/manifest"
)

const (
	linearFQN = "github://acme/aileron-connector-linear"
	googleRef = "github://acme/aileron-connector-google@1.2.3"
)

// triageAction is an action of the Linear test package that also requires
// the Google connector; HASH, GVERSION, GCAPS and SELFCAPS are filled in.
const triageAction = `+++
name = "triage"
version = "1.0.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "self"
capabilities = [SELFCAPS]

[[requires.connectors]]
name = "github://acme/aileron-connector-google"
version = "GVERSION"
hash = "HASH"
capabilities = [GCAPS]

[[execute]]
id = "issue"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"
+++
Looks an issue up.
`

// triage fills triageAction; empty arguments keep the defaults (the
// installed Google version and capabilities within both grants).
func triage(hash, gversion, gcaps, selfcaps string) string {
	if gversion == "" {
		gversion = "1.2.3"
	}
	if gcaps == "" {
		gcaps = `"network:gmail.googleapis.com:443", "credential:oauth2", "scope:gmail"`
	}
	if selfcaps == "" {
		selfcaps = `"network:api.linear.test:443", "credential:api_key"`
	}
	return strings.NewReplacer("HASH", hash, "GVERSION", gversion, "GCAPS", gcaps, "SELFCAPS", selfcaps).Replace(triageAction)
}

// installGoogle installs the gmail test spec with gmailManifest and returns
// its hash.
func installGoogle(t *testing.T, s *Store) string {
	t.Helper()
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(gmailManifest))
	return install(t, s, pkg).Hash
}

// linearPackage writes the Linear test package with actions/triage/action.md
// holding act.
func linearPackage(t *testing.T, act string) string {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join("..", "action", "testdata", "linear", SpecFileName))
	if err != nil {
		t.Fatal(err)
	}
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, spec)
	testkit.WriteFile(t, pkg, "actions/triage/action.md", []byte(act))
	return pkg
}

func TestInstallActionPins(t *testing.T) {
	s, _ := newStore(t)
	ghash := installGoogle(t, s)
	wrong := strings.Repeat("0", 64)
	tests := []struct {
		name  string
		act   string
		opts  InstallOptions
		want  []ActionPin // when installed
		errIs error
		msg   []string // substrings of the refusal
	}{
		{"pinned to the installed hash", triage("sha256:"+ghash, "", "", ""), InstallOptions{},
			[]ActionPin{{Name: "triage"}}, nil, nil},
		{"wrong hash", triage("sha256:"+wrong, "", "", ""), InstallOptions{}, nil, ErrActionRequirement,
			[]string{`action "triage"`, "requires.connectors[1] " + googleRef, "the hash is sha256:" + wrong,
				"the installed package's hash is sha256:" + ghash}},
		{"wrong hash is refused even with --allow-unpinned", triage("sha256:"+wrong, "", "", ""), InstallOptions{AllowUnpinned: true}, nil,
			ErrActionRequirement, []string{"the hash is sha256:" + wrong}},
		{"placeholder without the flag", triage("sha256:bound-at-release", "", "", ""), InstallOptions{}, nil, ErrActionRequirement,
			[]string{"requires.connectors[1] " + googleRef, `hash "sha256:bound-at-release" is a placeholder`, `write the installed hash "sha256:` + ghash, "--allow-unpinned"}},
		{"placeholder with the flag", triage("sha256:bound-at-release", "", "", ""), InstallOptions{AllowUnpinned: true},
			[]ActionPin{{Name: "triage", Unpinned: []string{googleRef}}}, nil, nil},
		{"version not installed", triage("sha256:"+ghash, "1.2.4", "", ""), InstallOptions{AllowUnpinned: true}, nil, ErrActionRequirement,
			[]string{"github://acme/aileron-connector-google@1.2.4 is not installed (installed versions: 1.2.3)"}},
		{"host beyond the required connector's grants", triage("sha256:"+ghash, "", `"network:www.googleapis.com:443"`, ""), InstallOptions{}, nil,
			ErrActionRequirement, []string{`capability "network:www.googleapis.com:443" is beyond the connector's grants (its hosts: gmail.googleapis.com:443)`}},
		{"scope beyond the manifest's", triage("sha256:"+ghash, "", `"scope:gmail.admin"`, ""), InstallOptions{}, nil,
			ErrActionRequirement, []string{`capability "scope:gmail.admin" is beyond the connector's grants (its scopes: gmail)`}},
		{"credential kind beyond the package's own grants", triage("sha256:"+ghash, "", "",
			`"network:api.linear.test:443", "credential:api_key", "credential:oauth2"`), InstallOptions{}, nil,
			ErrActionRequirement, []string{"requires.connectors[0] " + linearFQN + "@1.0.0", `capability "credential:oauth2" is beyond the connector's grants (its credential kinds: api_key)`}},
		{"scope without a manifest", triage("sha256:"+ghash, "", "", `"network:api.linear.test:443", "credential:api_key", "scope:read"`), InstallOptions{}, nil,
			ErrActionRequirement, []string{`capability "scope:read" is beyond the connector's grants (its scopes: none)`}},
		{"step beyond its capabilities", triage("sha256:"+ghash, "", "", `"network:api.linear.test:443"`), InstallOptions{}, nil,
			action.ErrExceedsCapabilities, []string{`step "issue" runs linear/get-issue, which needs "credential:api_key", outside the capabilities of its requirement`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active, _ := s.Load(t.Context())
			pkg := linearPackage(t, tt.act)
			inst, err := s.InstallWith(t.Context(), pkg, active, tt.opts, yesWith(t, s, pkg, tt.opts))
			if tt.errIs == nil {
				if err != nil {
					t.Fatalf("InstallWith: %v", err)
				}
				if !reflect.DeepEqual(inst.Actions, tt.want) {
					t.Fatalf("Installed.Actions = %+v, want %+v", inst.Actions, tt.want)
				}
				if got := listedActions(t, s, linearFQN); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("List's actions = %+v, want %+v", got, tt.want)
				}
				if err := s.Remove(t.Context(), linearFQN+"@1.0.0"); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.errIs) || !errors.Is(err, ErrInvalidPackage) {
				t.Fatalf("InstallWith: %v; want it to wrap %v and ErrInvalidPackage", err, tt.errIs)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("refusal %q does not contain %q", err, m)
				}
			}
			if file := filepath.Join(pkg, "actions", "triage", "action.md"); !strings.Contains(err.Error(), file) ||
				strings.Contains(err.Error(), filepath.Join(s.Dir, "tmp")) {
				t.Errorf("refusal %q does not name the action's file %s, or names where it was staged", err, file)
			}
			if got := listedActions(t, s, linearFQN); got != nil {
				t.Fatalf("a refused package was installed: %+v", got)
			}
		})
	}
}

// listedActions returns List's actions of fqn's installed version; nil if
// it is not installed.
func listedActions(t *testing.T, s *Store, fqn string) []ActionPin {
	t.Helper()
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if in.FQN == fqn {
			return in.Actions
		}
	}
	return nil
}

// TestInstallActionPinsTheActiveVersion: a requirement on a version that is
// installed but not active is refused (the action could never run), and
// accepted once that version is active again.
func TestInstallActionPinsTheActiveVersion(t *testing.T) {
	s, _ := newStore(t)
	ghash := installGoogle(t, s)
	next := t.TempDir()
	testkit.WriteFile(t, next, SpecFileName, testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
		m["connector"].(map[string]any)["version"] = "1.2.4"
	}))
	testkit.WriteFile(t, next, manifest.FileName, []byte(strings.Replace(gmailManifest, `version = "1.2.3"`, `version = "1.2.4"`, 1)))
	install(t, s, next)
	active, _ := s.Load(t.Context())
	lin := linearPackage(t, triage("sha256:"+ghash, "", "", ""))
	_, err := s.InstallWith(t.Context(), lin, active, InstallOptions{}, yes(t, s, lin))
	if !errors.Is(err, ErrActionRequirement) || !strings.Contains(err.Error(),
		googleRef+" is installed but github://acme/aileron-connector-google@1.2.4 is the active version, so the action could never run") {
		t.Fatalf("InstallWith: %v", err)
	}
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(gmailManifest))
	install(t, s, pkg) // 1.2.3 active again
	active, _ = s.Load(t.Context())
	if _, err := s.InstallWith(t.Context(), lin, active, InstallOptions{}, yes(t, s, lin)); err != nil {
		t.Fatalf("InstallWith with the pinned version active: %v", err)
	}
}
