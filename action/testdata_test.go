package action

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// loadSpec parses dir/aileron.connector.v1.json with policy.ParseSpec.
func loadSpec(t testing.TB, dir string) *policy.Spec {
	t.Helper()
	file := filepath.Join(dir, "aileron.connector.v1.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := policy.ParseSpec(file, data)
	if err != nil {
		t.Fatalf("testdata spec is invalid: %v", err)
	}
	return s
}

// TestTestdataPackages keeps the example packages valid: their specs pass
// policy.ParseSpec and compile, and every action loads and resolves.
func TestTestdataPackages(t *testing.T) {
	tests := []struct {
		dir     string
		fqn     string
		actions []string
	}{
		{"linear", "github://acme/aileron-connector-linear", []string{"comment-create", "get-issue"}},
		{"google", "github://acme/aileron-connector-google", []string{"send-email"}},
	}
	var srcs []policy.Source
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := filepath.Join("testdata", tt.dir)
			spec := loadSpec(t, dir)
			if spec.Connector.FQN != tt.fqn {
				t.Fatalf("FQN %q, want %q", spec.Connector.FQN, tt.fqn)
			}
			srcs = append(srcs, policy.Source{Spec: spec, Origin: dir})
			ms, err := LoadPackage(dir, spec)
			if err != nil {
				t.Fatalf("LoadPackage: %v", err)
			}
			var names []string
			for _, m := range ms {
				names = append(names, m.Name)
				if m.Description == "" {
					t.Errorf("%s has no description", m.Name)
				}
			}
			if len(names) != len(tt.actions) {
				t.Fatalf("actions %v, want %v", names, tt.actions)
			}
			for i := range names {
				if names[i] != tt.actions[i] {
					t.Fatalf("actions %v, want %v", names, tt.actions)
				}
			}
		})
	}
	if _, errs := policy.Compile(srcs, nil); len(errs) != 0 {
		t.Fatalf("testdata specs do not compile together: %v", errs)
	}
}
