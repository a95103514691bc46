package policy

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseSpec returns a fresh valid spec as a generic JSON tree.
func baseSpec() map[string]any {
	return map[string]any{
		"schema_version": "aileron.connector.v1",
		"connector":      map[string]any{"fqn": "github://acme/aileron-connector-test", "version": "1.2.3"},
		"tools": []any{
			map[string]any{
				"name": "test",
				"operations": []any{
					map[string]any{
						"name":   "items.get",
						"method": "GET",
						"path":   "/v1/items/{id}",
						"hosts":  []any{"api.example.com"},
						"inputs": []any{map[string]any{"name": "id", "type": "string", "required": true}},
						"audit":  []any{map[string]any{"name": "item", "source": "path.id", "redact": "keep"}},
					},
					map[string]any{
						"name":   "items.list",
						"method": "GET",
						"path":   "/v1/items",
						"hosts":  []any{"api.example.com"},
					},
				},
			},
		},
	}
}

// tool0 returns tools[0] of a baseSpec tree.
func tool0(s map[string]any) map[string]any { return s["tools"].([]any)[0].(map[string]any) }

// op returns tools[0].operations[i] of a baseSpec tree.
func op(s map[string]any, i int) map[string]any {
	return tool0(s)["operations"].([]any)[i].(map[string]any)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validationErrors flattens err into its *ValidationErrors, failing the
// test on any other kind of error.
func validationErrors(t testing.TB, err error) []*ValidationError {
	t.Helper()
	var out []*ValidationError
	for _, e := range flatten(err) {
		var ve *ValidationError
		if !errors.As(e, &ve) {
			t.Fatalf("error %v (%T) is not a *ValidationError", e, e)
		}
		out = append(out, ve)
	}
	return out
}

// requireProblem asserts err holds a ValidationError with path and rule.
func requireProblem(t testing.TB, err error, path, rule string) *ValidationError {
	t.Helper()
	if err == nil {
		t.Fatalf("want error at %s (%s), got nil", path, rule)
	}
	if !errors.Is(err, ErrInvalidSpec) && !errors.Is(err, ErrConflict) {
		t.Errorf("error does not wrap ErrInvalidSpec or ErrConflict: %v", err)
	}
	var got []string
	for _, ve := range validationErrors(t, err) {
		if ve.Path == path && ve.Rule == rule {
			return ve
		}
		got = append(got, ve.Path+" "+ve.Rule+": "+ve.Message)
	}
	t.Fatalf("want problem at %s rule %s; got:\n%s", path, rule, strings.Join(got, "\n"))
	return nil
}

// loadSpec parses testdata/specs/<name>.
func loadSpec(t testing.TB, name string) *Spec {
	t.Helper()
	file := filepath.Join("testdata", "specs", name)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSpec(name, data)
	if err != nil {
		t.Fatalf("ParseSpec(%s): %v", name, err)
	}
	return s
}

// testPolicy compiles the three testdata specs.
func testPolicy(t testing.TB, rules ...PassthroughRule) *Policy {
	t.Helper()
	var srcs []Source
	for _, n := range []string{"gmail.json", "linear.json", "regional.json"} {
		srcs = append(srcs, Source{Spec: loadSpec(t, n), Hash: "sha256:" + n, Origin: n})
	}
	p, errs := Compile(srcs, rules)
	if len(errs) > 0 {
		t.Fatalf("Compile: %v", errs)
	}
	return p
}

const (
	fqnGoogle   = "github://acme/aileron-connector-google"
	fqnLinear   = "github://acme/aileron-connector-linear"
	fqnRegional = "github://acme/aileron-connector-regional"
)
