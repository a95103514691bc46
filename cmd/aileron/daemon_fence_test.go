package main

import (
	"slices"
	"testing"

	"github.com/aileronhq/aileron/config"
)

// TestSandboxHidden: what the daemon tells a launcher to hide is its own
// home, and outside it its audit directory, key files and admin socket
// (the socket file alone in a shared directory).
func TestSandboxHidden(t *testing.T) {
	const home = "/var/lib/aileron"
	inHome := config.Config{Home: home, Admin: config.Admin{Socket: home + "/admin.sock"}, Audit: config.Audit{Dir: home + "/audit", KeyFile: home + "/audit.key"},
		State: config.State{VaultKeyFile: home + "/keys/vault.key", FleetKeyFile: home + "/keys/fleet.key"}}
	for _, c := range []struct {
		name string
		edit func(*config.Config)
		want []string
	}{
		{"all in the home", func(*config.Config) {}, []string{home}},
		{"socket elsewhere", func(c *config.Config) { c.Admin.Socket = "/run/aileron/admin.sock" }, []string{home, "/run/aileron"}},
		{"socket in /tmp, audit elsewhere", func(c *config.Config) { c.Admin.Socket, c.Audit.Dir = "/tmp/admin.sock", "/var/log/aileron" },
			[]string{home, "/var/log/aileron", "/tmp/admin.sock"}},
		{"a home's sibling", func(c *config.Config) { c.Admin.Socket = "/var/lib/aileron-other/admin.sock" }, []string{home, "/var/lib/aileron-other"}},
		{"keys elsewhere", func(c *config.Config) {
			c.Audit.KeyFile, c.State.VaultKeyFile, c.Admin.WebTLSKey = "/etc/aileron/audit.key", "/etc/aileron/vault.key", "/etc/aileron/web.key"
			c.Approval.Webhooks = []config.Webhook{{URL: "https://chat.example/hook", SecretFile: "/etc/aileron/hook.secret"}}
		}, []string{home, "/etc/aileron/audit.key", "/etc/aileron/vault.key", "/etc/aileron/web.key", "/etc/aileron/hook.secret"}},
	} {
		cfg := inHome
		c.edit(&cfg)
		if got := sandboxHidden(&cfg, ""); !slices.Equal(got, c.want) {
			t.Errorf("%s: sandboxHidden = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSandboxHiddenConfigAndPgpass: the daemon's configuration file (which
// may hold state.dsn's password) and a PGPASSFILE are hidden too, unless
// they are in the home already.
func TestSandboxHiddenConfigAndPgpass(t *testing.T) {
	const home = "/var/lib/aileron"
	cfg := config.Config{Home: home, Admin: config.Admin{Socket: home + "/admin.sock"}, Audit: config.Audit{Dir: home + "/audit"}}
	t.Setenv("PGPASSFILE", "/etc/aileron/pgpass")
	want := []string{home, "/etc/aileron/aileron.yaml", "/etc/aileron/pgpass"}
	if got := sandboxHidden(&cfg, "/etc/aileron/aileron.yaml"); !slices.Equal(got, want) {
		t.Errorf("sandboxHidden = %q, want %q", got, want)
	}
	t.Setenv("PGPASSFILE", "")
	if got := sandboxHidden(&cfg, home+"/aileron.yaml"); !slices.Equal(got, []string{home}) {
		t.Errorf("a config file in the home: sandboxHidden = %q, want only the home", got)
	}
}
