package action

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const otherFQN = "github://acme/aileron-connector-other"

// foreign is a requirement on another connector, appended to a manifest.
const foreign = `
[[requires.connectors]]
name = "` + otherFQN + `"
version = "2.0.0"
hash = "HASH"
capabilities = ["network:api.other.test:443", "scope:read"]
`

func TestLoadPackagePinsAndCapabilities(t *testing.T) {
	spec := loadSpec(t, filepath.Join("testdata", "linear"))
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		doc  string
		key  string // "" when the package loads
		rule string
		msg  string
	}{
		{"self pinned by containment", pinned, "", "", ""},
		{"placeholder on other connector loads (the store decides)", pinned + strings.Replace(foreign, "HASH", "sha256:bound-at-release", 1), "", "", ""},
		{"real hash on other connector loads", pinned + strings.Replace(foreign, "HASH", digest, 1), "", "", ""},
		{"placeholder on own package", strings.Replace(pinned, `hash = "self"`, `hash = "sha256:bound-at-release"`, 1),
			"requires.connectors[0].hash", rulePin, `"` + linearFQN + `" is the package that holds this action, so its hash cannot be written here (it covers this file); write hash = "self"`},
		{"real hash on own package", strings.Replace(pinned, `hash = "self"`, `hash = "`+digest+`"`, 1),
			"requires.connectors[0].hash", rulePin, `write hash = "self"`},
		{"self on another connector", pinned + strings.Replace(foreign, "HASH", "self", 1),
			"requires.connectors[1].hash", rulePin, `hash "self" pins only the package that holds the action ("` + linearFQN + `"), not "` + otherFQN + `"`},
		{"own package at another version", strings.Replace(pinned, "version = \"1.0.0\"\nhash", "version = \"1.0.1\"\nhash", 1),
			"requires.connectors[0].version", rulePin, `version "1.0.1" differs from the version of the package that holds the action ("1.0.0")`},
		{"step needs a credential kind not listed", strings.Replace(pinned, `, "credential:api_key"`, "", 1),
			"execute[0]", ruleCapability, `step "issue" runs linear/get-issue, which needs "credential:api_key", outside the capabilities of its requirement on "` + linearFQN + `" (listed: "network:api.linear.test:443")`},
		{"step needs a host not listed", strings.Replace(pinned, `"network:api.linear.test:443", `, `"network:api.linear.test:8443", `, 1),
			"execute[0]", ruleCapability, `needs "network:api.linear.test:443", outside the capabilities`},
		{"no capabilities at all", minimalSelf(),
			"execute[0]", ruleCapability, `needs "network:api.linear.test:443", "credential:api_key", outside the capabilities of its requirement on "` + linearFQN + `" (listed: (none))`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writePackage(t, map[string]string{"actions/get-issue/action.md": string(doc(tt.doc, ""))})
			ms, err := LoadPackage(dir, spec)
			if tt.key == "" {
				if err != nil || len(ms) != 1 {
					t.Fatalf("LoadPackage: %v", err)
				}
				return
			}
			ves := validationErrors(t, err)
			if len(ves) != 1 {
				t.Fatalf("%d problems, want 1: %v", len(ves), err)
			}
			if ve := ves[0]; ve.Key != tt.key || ve.Rule != tt.rule || !strings.Contains(ve.Message, tt.msg) {
				t.Fatalf("problem %+v,\nwant key %q rule %q message containing %q", ve, tt.key, tt.rule, tt.msg)
			}
			if tt.rule == ruleCapability && !errors.Is(err, ErrExceedsCapabilities) {
				t.Fatalf("%v does not wrap ErrExceedsCapabilities", err)
			}
		})
	}
}

// minimalSelf is minimal pinned by containment, with no capabilities.
func minimalSelf() string {
	return strings.Replace(minimal, `hash = "sha256:bound-at-release"`, `hash = "self"`, 1)
}

func TestCapsAndUnpinned(t *testing.T) {
	m := mustParse(t, doc(pinned+strings.Replace(foreign, "HASH", "sha256:bound-at-release", 1)+
		strings.Replace(strings.Replace(foreign, otherFQN, otherFQN+"-b", 1), "HASH", "sha256:"+strings.Repeat("ab", 32), 1), ""))
	if got, want := m.Unpinned(), []string{otherFQN + "@2.0.0"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Unpinned() = %v, want %v", got, want)
	}
	want := Capabilities{Hosts: []string{"api.linear.test:443"}, CredentialKinds: []string{"api_key"}}
	if got := m.Requires[0].Caps(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Caps() = %+v, want %+v", got, want)
	}
	want = Capabilities{Hosts: []string{"api.other.test:443"}, Scopes: []string{"read"}}
	if got := m.Requires[1].Caps(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Caps() = %+v, want %+v", got, want)
	}
	if m.Requires[1].Pinned() || !m.Requires[0].Pinned() || !m.Requires[2].Pinned() {
		t.Fatalf("Pinned() wrong for %+v", m.Requires)
	}
}
