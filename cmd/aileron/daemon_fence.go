package main

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"

	"github.com/aileronhq/aileron/audit"
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
