package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/fence"
)

// openFence builds the fenced-sandbox manager (aileron sandbox run) and
// removes what a crashed run of this daemon left behind. Its link and
// table names carry a tag of this daemon's home, so daemons sharing a
// network namespace never sweep each other's.
func (d *daemon) openFence() *fence.Manager {
	tag := sha256.Sum256([]byte(d.cfg.Home))
	m := &fence.Manager{Proxy: d.proxy, Session: d.sessions.Session, Log: d.log, Tag: hex.EncodeToString(tag[:2]),
		Links: netip.MustParsePrefix(d.cfg.Sandbox.LinkCIDR), Links6: netip.MustParsePrefix(d.cfg.Sandbox.LinkCIDR6), // checked by Validate
		Synthetic4: netip.MustParsePrefix(d.cfg.Sandbox.SyntheticCIDR), Synthetic6: netip.MustParsePrefix(d.cfg.Sandbox.SyntheticCIDR6),
		Record: func(ev audit.Event) { d.rec.Record(ev) }}
	if err := m.Sweep(); err != nil {
		d.log.Warn().Str("event", "sandbox.sweep_failed").Err(err).Msg("could not remove what an earlier run left behind (fenced sandboxes need root)")
	}
	return m
}

// sandboxHidden is what a fenced command must not see, as the daemon with
// configuration cfg has it (its answer to opening a sandbox): its home;
// outside the home, its audit directory (which a root command could
// rewrite) and key files (the audit signing key, the vault and fleet keys,
// the approvals page's TLS key, webhook secrets); and the admin socket's
// directory when the socket lives elsewhere. A shared directory (/tmp and
// the like) is not hidden whole: the socket file alone is covered, which
// holds until the daemon restarts and makes a new one. Relative paths are
// made absolute against the daemon's working directory. Also hidden: the
// configuration file the daemon was started with (configFile, "" for
// none), which may hold state.dsn's password, and a Postgres password
// file named by PGPASSFILE.
func sandboxHidden(cfg *config.Config, configFile string) []string {
	home := absPath(cfg.Home)
	out := []string{home}
	add := func(p string) {
		if p == "" {
			return
		}
		if p = absPath(p); !within(home, p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(cfg.Audit.Dir)
	for _, p := range []string{cfg.Audit.KeyFile, cfg.State.VaultKeyFile, cfg.State.FleetKeyFile, cfg.Admin.WebTLSKey} {
		add(p)
	}
	for _, w := range cfg.Approval.Webhooks {
		add(w.SecretFile)
	}
	add(configFile)
	add(os.Getenv("PGPASSFILE"))
	switch socket := absPath(cfg.Admin.Socket); filepath.Dir(socket) {
	case "/", "/tmp", "/var/tmp", "/dev/shm", "/var", "/home":
		add(socket)
	default:
		add(filepath.Dir(socket))
	}
	return out
}

// within reports whether path is dir or under it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// absPath is p made absolute against the working directory (p itself when
// that fails).
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
