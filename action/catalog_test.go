package action

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func manifestNamed(t *testing.T, name, version string) *Manifest {
	t.Helper()
	front := strings.Replace(strings.Replace(minimal, `"get-issue"`, `"`+name+`"`, 1), `version = "1.0.0"`, `version = "`+version+`"`, 1)
	m := mustParse(t, doc(front, "Does "+name+"."))
	m.File = "pkg/actions/" + name + "/action.md"
	return m
}

func TestCatalog(t *testing.T) {
	send := Installed{Manifest: manifestNamed(t, "send-email", "1.0.0"), Connector: googleFQN, ConnectorVersion: "1.0.0", Hash: "sha256:a"}
	get := Installed{Manifest: manifestNamed(t, "get-issue", "1.0.0"), Connector: linearFQN, ConnectorVersion: "1.0.0", Hash: "sha256:b"}
	c, err := NewCatalog([]Installed{send, get})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.List(); len(got) != 2 || got[0].Name != "get-issue" || got[1].Name != "send-email" {
		t.Fatalf("List = %v, want sorted by name", got)
	}
	c.List()[0] = Installed{}
	if c.List()[0].Name != "get-issue" {
		t.Fatal("List exposes the catalog's slice")
	}
	for _, name := range []string{"send-email", "send_email"} {
		if a, ok := c.Lookup(name); !ok || a.Connector != googleFQN {
			t.Errorf("Lookup(%q) = %v, %v", name, a, ok)
		}
	}
	if _, ok := c.Lookup("send"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}

	v := c.Version()
	if len(v) != 64 {
		t.Fatalf("Version %q is not hex SHA-256", v)
	}
	same, _ := NewCatalog([]Installed{get, send})
	if same.Version() != v {
		t.Error("Version depends on input order")
	}
	for name, changed := range map[string]Installed{
		"action version":    {Manifest: manifestNamed(t, "get-issue", "1.0.1"), Connector: linearFQN, ConnectorVersion: "1.0.0", Hash: "sha256:b"},
		"package hash":      {Manifest: get.Manifest, Connector: linearFQN, ConnectorVersion: "1.0.0", Hash: "sha256:c"},
		"connector version": {Manifest: get.Manifest, Connector: linearFQN, ConnectorVersion: "1.0.1", Hash: "sha256:b"},
		"description":       {Manifest: withDescription(get.Manifest, "new"), Connector: linearFQN, ConnectorVersion: "1.0.0", Hash: "sha256:b"},
	} {
		c2, err := NewCatalog([]Installed{send, changed})
		if err != nil {
			t.Fatal(err)
		}
		if c2.Version() == v {
			t.Errorf("Version unchanged after a change of %s", name)
		}
	}
	moved := *get.Manifest
	moved.File = "elsewhere/action.md"
	c3, _ := NewCatalog([]Installed{send, {Manifest: &moved, Connector: linearFQN, ConnectorVersion: "1.0.0", Hash: "sha256:b"}})
	if c3.Version() != v {
		t.Error("Version depends on the manifest's file path")
	}
}

func withDescription(m *Manifest, d string) *Manifest {
	cp := *m
	cp.Description = d
	return &cp
}

func TestNilCatalog(t *testing.T) {
	var c *Catalog
	empty, err := NewCatalog(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.List() != nil || c.Version() != empty.Version() || len(empty.List()) != 0 {
		t.Fatal("nil catalog is not the empty catalog")
	}
	if _, ok := c.Lookup("x"); ok {
		t.Fatal("Lookup on a nil catalog succeeded")
	}
}

func TestCatalogConflicts(t *testing.T) {
	a := Installed{Manifest: manifestNamed(t, "send-email", "1.0.0"), Connector: googleFQN}
	b := Installed{Manifest: manifestNamed(t, "send-email", "2.0.0"), Connector: "github://other/mail"}
	snake := &Manifest{Name: "send_email", Version: "1.0.0", File: "x/action.md"} // built by hand: Parse refuses "_"
	tests := []struct {
		name string
		acts []Installed
		msg  []string
	}{
		{"same name", []Installed{a, b}, []string{`action "send-email" from "` + googleFQN + `"`, `"github://other/mail"`, `installed as "send-email"`, "uninstall one"}},
		{"same tool name", []Installed{a, {Manifest: snake, Connector: "github://x/y"}}, []string{`"send_email"`, `"send-email"`, `installed as "send_email"`}},
		{"no manifest", []Installed{a, {Connector: "github://x/y"}}, []string{`entry 1 (connector "github://x/y") has no manifest`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewCatalog(tt.acts)
			if c != nil || !errors.Is(err, ErrConflict) {
				t.Fatalf("NewCatalog = %v, %v; want an ErrConflict", c, err)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestCatalogListKeepsManifests(t *testing.T) {
	m := manifestNamed(t, "get-issue", "1.0.0")
	c, err := NewCatalog([]Installed{{Manifest: m, Connector: linearFQN}})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.Lookup("get-issue")
	if !ok || got.Manifest != m || !reflect.DeepEqual(c.List(), []Installed{got}) {
		t.Fatalf("Lookup = %v, %v", got, ok)
	}
}
