package action

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: manifests come from third-party packages. Parse must never
// panic, must report only *ValidationErrors wrapping ErrInvalidAction, and
// what it accepts must satisfy the documented invariants.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"linear/actions/get-issue", "linear/actions/comment-create", "google/actions/send-email"} {
		data, err := os.ReadFile(filepath.Join("testdata", p, ManifestFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(linearManifest))
	f.Add([]byte(sendEmailManifest))
	f.Add(doc(typesManifest, "body"))
	f.Add(doc(minimal+"[execute.inputs]\na = [\"${args.x}\", { b = \"$${c}${issue\" }]\n", ""))
	f.Add(doc(minimal+"[[execute.inputs.t]]\nd = 1979-05-27T07:32:00Z\n", ""))
	f.Add(withCaps(`"network:api.linear.test:443", "credential:api_key", "scope:read", "network:[2001:db8::1]:8443"`))
	f.Add([]byte("+++\n+++\n"))
	f.Add([]byte("+++\r\n[[inputs]]\r\n+++"))
	f.Add([]byte("+++\nname = \"a\"\n[x\n+++\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("fuzz.md", data)
		if err != nil {
			if m != nil {
				t.Fatal("manifest returned with an error")
			}
			for _, e := range flatten(err) {
				var ve *ValidationError
				if !errors.As(e, &ve) || !errors.Is(e, ErrInvalidAction) || ve.File != "fuzz.md" {
					t.Fatalf("error %v is not a *ValidationError for fuzz.md wrapping ErrInvalidAction", e)
				}
			}
			return
		}
		checkInvariants(t, m)
	})
}

func checkInvariants(t *testing.T, m *Manifest) {
	t.Helper()
	if rule, msg := checkActionName(m.Name); rule != "" {
		t.Fatalf("accepted name %q: %s", m.Name, msg)
	}
	if len(m.Steps) == 0 || strings.Contains(m.ToolName(), "-") {
		t.Fatalf("accepted %d steps, tool name %q", len(m.Steps), m.ToolName())
	}
	if _, err := json.Marshal(m); err != nil {
		t.Fatalf("manifest does not marshal: %v", err)
	}
	// Every accepted capability parses into exactly one form.
	for _, r := range m.Requires {
		c := r.Caps()
		if n := len(c.Hosts) + len(c.CredentialKinds) + len(c.Scopes); n != len(r.Capabilities) {
			t.Fatalf("requirement %s: %d of %d capabilities parsed", r.Name, n, len(r.Capabilities))
		}
	}
	schema, err := json.Marshal(m.InputSchema())
	if err != nil {
		t.Fatalf("schema does not marshal: %v", err)
	}
	// Every declared input, given as a string where a string fits, passes
	// CheckArgs' name checks; an empty call names each required input.
	args := map[string]any{}
	required := 0
	for _, in := range m.Inputs {
		if in.Required {
			required++
		}
		if !strings.Contains(string(schema), `"`+in.Name+`"`) {
			t.Fatalf("input %q missing from schema %s", in.Name, schema)
		}
		args[in.Name] = nil
	}
	if n := len(flatten(m.CheckArgs(map[string]any{}))); n != required {
		t.Fatalf("CheckArgs({}) reported %d problems for %d required inputs", n, required)
	}
	// Parse checked every reference, so with all arguments present and
	// earlier outputs holding everything, expansion fails only on missing
	// fields, never on syntax or unknown roots.
	steps := map[string]map[string]any{}
	for _, s := range m.Steps {
		if _, err := s.Args(args, steps); err != nil && !strings.Contains(err.Error(), "has no field") &&
			!strings.Contains(err.Error(), "which has no field") && !strings.Contains(err.Error(), "not an index") {
			t.Fatalf("step %s: %v", s.ID, err)
		}
		steps[s.ID] = map[string]any{}
	}
	if _, err := m.PreviewText(args); err != nil && !strings.Contains(err.Error(), "no field") {
		t.Fatalf("preview: %v", err)
	}
}
