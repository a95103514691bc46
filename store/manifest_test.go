package store

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/manifest"
)

// gmailManifest grants exactly what policy/testdata/specs/gmail.json reaches.
const gmailManifest = `[connector]
name = "github://acme/aileron-connector-google"
version = "1.2.3"

[capabilities.network]
hosts = ["gmail.googleapis.com:443"]

[capabilities.credential]
kind = "oauth2"
scope = "gmail"
`

func TestInstallWithinManifest(t *testing.T) {
	s, _ := newStore(t)
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	// The manifest may grant more than the spec reaches.
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(strings.Replace(gmailManifest,
		`["gmail.googleapis.com:443"]`, `["gmail.googleapis.com:443", "oauth2.googleapis.com:443"]`, 1)))
	inst := install(t, s, pkg)
	want := manifest.Grants{Hosts: []string{"gmail.googleapis.com:443", "oauth2.googleapis.com:443"},
		CredentialKinds: []string{"oauth2"}, CredentialScope: "gmail", FromManifest: true}
	if !reflect.DeepEqual(inst.Grants, want) {
		t.Errorf("Install grants = %+v, want %+v", inst.Grants, want)
	}
	list, err := s.List(t.Context())
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Grants, want) {
		t.Errorf("List = %+v, %v; want the manifest's grants %+v", list, err, want)
	}
}

// TestInstallWithoutManifest: a package without a manifest asks for exactly
// what its spec reaches, and is shown so.
func TestInstallWithoutManifest(t *testing.T) {
	s, _ := newStore(t)
	spec := testkit.EditJSON(t, testkit.Spec(t, "gmail"), func(m map[string]any) {
		op := m["tools"].([]any)[0].(map[string]any)["operations"].([]any)[1].(map[string]any)
		op["hosts"] = []any{"Upload.Example.com:8443", "gmail.googleapis.com:443"}
		op["credential"] = "bearer"
	})
	inst := install(t, s, testkit.WriteFile(t, t.TempDir(), "gmail.json", spec))
	want := manifest.Grants{Hosts: []string{"gmail.googleapis.com:443", "upload.example.com:8443"},
		CredentialKinds: []string{"bearer", "oauth2"}}
	if !reflect.DeepEqual(inst.Grants, want) {
		t.Errorf("Install grants = %+v, want %+v", inst.Grants, want)
	}
	list, err := s.List(t.Context())
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Grants, want) {
		t.Errorf("List = %+v, %v; want %+v", list, err, want)
	}
}

// TestInstallRefusesExcess: each kind of excess is refused, and every
// excess is named, not only the first.
func TestInstallRefusesExcess(t *testing.T) {
	cases := map[string]struct {
		manifest string
		edit     func(m map[string]any)
		want     []string
	}{
		"host not granted": {
			manifest: strings.Replace(gmailManifest, `"gmail.googleapis.com:443"`, `"www.googleapis.com:443"`, 1),
			want:     []string{`host "gmail.googleapis.com:443" (used by google/gmail.messages.search, google/gmail.messages.get`},
		},
		"another port": {
			manifest: strings.Replace(gmailManifest, `"gmail.googleapis.com:443"`, `"gmail.googleapis.com:8443"`, 1),
			want:     []string{`host "gmail.googleapis.com:443"`},
		},
		"two hosts and a kind": {
			manifest: gmailManifest,
			edit: func(m map[string]any) {
				ops := m["tools"].([]any)[0].(map[string]any)["operations"].([]any)
				ops[0].(map[string]any)["hosts"] = []any{"evil.example.com"}
				ops[1].(map[string]any)["hosts"] = []any{"gmail.googleapis.com:444"}
				ops[2].(map[string]any)["credential"] = "api_key"
			},
			want: []string{`host "evil.example.com:443" (used by google/gmail.messages.search)`,
				`host "gmail.googleapis.com:444" (used by google/gmail.messages.get)`,
				`credential kind "api_key" (used by google/gmail.messages.send)`},
		},
		"credential kind, manifest grants none": {
			manifest: strings.Replace(gmailManifest, "[capabilities.credential]\nkind = \"oauth2\"\nscope = \"gmail\"\n", "", 1),
			want:     []string{`credential kind "oauth2"`},
		},
		"credential kind differs": {
			manifest: strings.Replace(gmailManifest, `kind = "oauth2"`, `kind = "bearer"`, 1),
			want:     []string{`credential kind "oauth2"`},
		},
		"name differs": {
			manifest: strings.Replace(gmailManifest, "aileron-connector-google", "aileron-connector-gmail", 1),
			want:     []string{`connector.name is "github://acme/aileron-connector-gmail" but the spec's connector.fqn is "github://acme/aileron-connector-google"`},
		},
		"version differs": {
			manifest: strings.Replace(gmailManifest, `"1.2.3"`, `"1.2.4"`, 1),
			want:     []string{`connector.version is "1.2.4" but the spec's connector.version is "1.2.3"`},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := newStore(t)
			pkg := t.TempDir()
			spec := testkit.Spec(t, "gmail")
			if c.edit != nil {
				spec = testkit.EditJSON(t, spec, c.edit)
			}
			testkit.WriteFile(t, pkg, SpecFileName, spec)
			testkit.WriteFile(t, pkg, manifest.FileName, []byte(c.manifest))
			_, err := s.Install(t.Context(), pkg, nil, yes(t, s, pkg))
			if !errors.Is(err, ErrExceedsManifest) || !errors.Is(err, manifest.ErrExceedsManifest) || !errors.Is(err, ErrInvalidPackage) {
				t.Fatalf("Install = %v, want ErrExceedsManifest", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not name %s", err, w)
				}
			}
			if n := strings.Count(err.Error(), "manifest.toml:"); n != len(c.want) {
				t.Errorf("error names %d problems, want %d: %v", n, len(c.want), err)
			}
			if list, _ := s.List(t.Context()); len(list) != 0 {
				t.Errorf("refused package is installed: %+v", list)
			}
		})
	}
}

func TestInstallRefusesInvalidManifest(t *testing.T) {
	s, _ := newStore(t)
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(strings.Replace(gmailManifest, "hosts =", "host =", 1)))
	_, err := s.Install(t.Context(), pkg, nil, yes(t, s, pkg))
	if !errors.Is(err, ErrInvalidManifest) || !errors.Is(err, ErrInvalidPackage) || !strings.Contains(err.Error(), `capabilities.network.host: unknown key "host" in [capabilities.network] (did you mean "hosts"?)`) {
		t.Fatalf("Install = %v, want the manifest's unknown key named", err)
	}
}

// TestListOldManifest: a package installed before manifests were read, whose
// manifest does not hold, is listed with what its spec reaches, not with no
// grants at all.
func TestListOldManifest(t *testing.T) {
	s, _ := newStore(t)
	pkg := t.TempDir()
	testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
	testkit.WriteFile(t, pkg, manifest.FileName, []byte(gmailManifest))
	inst := install(t, s, pkg)
	testkit.WriteFile(t, inst.Dir, manifest.FileName, []byte("name = 'google'\n"))
	list, err := s.List(t.Context())
	want := manifest.Grants{Hosts: []string{"gmail.googleapis.com:443"}, CredentialKinds: []string{"oauth2"}}
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Grants, want) {
		t.Errorf("List = %+v, %v; want the spec's reach %+v", list, err, want)
	}
}

// TestStatementChecksManifest: the statement a publisher signs is refused
// for a package install would refuse (a manifest that does not parse, a
// spec beyond its manifest), so no one signs a package that cannot install.
func TestStatementChecksManifest(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     error
		text     string
	}{
		"within":          {manifest: gmailManifest},
		"invalid":         {manifest: strings.Replace(gmailManifest, "hosts =", "hots =", 1), want: ErrInvalidManifest, text: `did you mean "hosts"?`},
		"beyond manifest": {manifest: strings.Replace(gmailManifest, `kind = "oauth2"`, `kind = "bearer"`, 1), want: ErrExceedsManifest, text: `credential kind "oauth2"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pkg := t.TempDir()
			testkit.WriteFile(t, pkg, SpecFileName, testkit.Spec(t, "gmail"))
			testkit.WriteFile(t, pkg, manifest.FileName, []byte(c.manifest))
			stmt, err := PackageStatement(pkg)
			if c.want == nil {
				if err != nil || !strings.Contains(string(stmt), "fqn github://acme/aileron-connector-google\n") {
					t.Fatalf("PackageStatement = %q, %v", stmt, err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) || stmt != nil {
				t.Fatalf("PackageStatement = %q, %v; want %v naming %s", stmt, err, c.want, c.text)
			}
		})
	}
}
