package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/state"
)

// openAudit opens the audit trail: it resumes the hash chain and the
// Merkle tree, and refuses a trail that is not the one the daemon last
// signed (the Mark in the state database), saying what happened to it.
func (d *daemon) openAudit() error {
	d.rec = &recorder{metrics: d.metrics, log: d.log}
	if !d.cfg.Audit.Enabled {
		d.log.Warn().Str("event", "audit.disabled").Msg("audit.enabled is false: no audit trail is written (use only to measure its cost)")
		return nil
	}
	key, err := d.auditKey()
	if err != nil {
		return err
	}
	d.audit = newAuditLog(d.cfg.Audit.Dir, key, d.db, markNode(d.cfg))
	d.audit.MaxFileBytes, d.audit.SyncInterval = d.cfg.Audit.MaxFileBytes, d.cfg.Audit.SyncInterval
	d.audit.CheckpointEvery, d.audit.CheckpointInterval = uint64(d.cfg.Audit.CheckpointEvery), d.cfg.Audit.CheckpointInterval
	if d.cfg.Audit.Stdout {
		d.audit.Mirror = os.Stdout
	}
	d.audit.OnError = func(err error) {
		d.log.Error().Str("event", "audit.checkpoint_failed").Err(err).
			Msg("a checkpoint of the audit trail, or its record in the state database, could not be written; retried at the next tick")
	}
	if err := d.openWitnesses(); err != nil {
		return err
	}
	if err := d.audit.Open(); err != nil {
		var te *audit.TrailError
		if errors.As(err, &te) {
			return fmt.Errorf("audit trail %s: %w\n\nThe daemon forwards nothing over a trail it cannot vouch for. %s "+
				"(`aileron audit verify` says what it finds), or, to start a new trail on purpose, run "+
				"`aileron audit new-trail --reason \"...\"`: it moves the present files aside and records the break as the new trail's first line%s",
				d.cfg.Audit.Dir, err, trailAdvice(te.Kind, d.cfg.Audit.KeyFile), d.fleetTrailHint())
		}
		return fmt.Errorf("audit: %w (audit.dir %s)", err, d.cfg.Audit.Dir)
	}
	if m, _ := d.audit.Anchor.LoadMark(); m.Seq == 0 && d.audit.Stats().Seq > 0 {
		d.log.Warn().Str("event", "audit.no_record").Str("dir", d.cfg.Audit.Dir).
			Msg("the state database holds no record of the trail's last checkpoint (a new or replaced aileron.db): a cut end of the trail could not be checked this time; the record starts again with the next checkpoint")
	}
	d.rec.audit = d.audit
	v := readVersion()
	d.rec.Event(audit.EventDaemonStarted, map[string]string{"version": v.Version, "commit": v.Commit,
		"pid": strconv.Itoa(os.Getpid()), "home": d.cfg.Home})
	return nil
}

// trailAdvice is what to do about a trail that is not the one signed.
func trailAdvice(kind audit.Problem, keyFile string) string {
	switch kind {
	case audit.ProblemBadSignature:
		return "If " + keyFile + " was replaced or restored from elsewhere, put the key that signed this trail back (keep a copy of it off the host)"
	case audit.ProblemAppended:
		return "The lines after the daemon's last one are not its own: keep a copy for the investigation, then remove them"
	}
	return "Put the missing or changed files back"
}

// auditKey loads the trail's signing key, creating it only when no trail
// is signed yet: a new key cannot continue a signed trail, so a missing
// key file is an error naming what to do rather than a silent new key.
func (d *daemon) auditKey() (*audit.Key, error) {
	if _, err := os.Stat(d.cfg.Audit.KeyFile); errors.Is(err, os.ErrNotExist) {
		if m, merr := (&markStore{db: d.db, node: markNode(d.cfg)}).LoadMark(); merr == nil && m.Seq != 0 {
			return nil, fmt.Errorf("audit.key_file %s is missing, but the trail in %s is signed (trail %s, last checkpoint at seq %d): "+
				"put the key that signed it back (a new key cannot continue it), or start a new trail on purpose with `aileron audit new-trail --reason \"...\"`%s",
				d.cfg.Audit.KeyFile, d.cfg.Audit.Dir, m.Origin, m.Seq, d.fleetTrailHint())
		}
	}
	key, err := audit.LoadOrCreateKey(d.cfg.Audit.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w (audit.key_file)", err)
	}
	return key, nil
}

// newAuditLog is the trail's Log over dir, signed with key, its Mark kept
// in db under node ("" on a single node, whose lines carry no node name).
func newAuditLog(dir string, key *audit.Key, db *state.DB, node string) *audit.Log {
	return &audit.Log{Dir: dir, Key: key, Node: node, Anchor: &markStore{db: db, node: node}}
}

// markNode is the name this daemon's Mark is kept under, and its lines
// carry: the node's name in a fleet, "" on a single node.
func markNode(cfg *config.Config) string {
	if cfg.State.Backend == "postgres" {
		return cfg.State.Node
	}
	return ""
}

// markStore keeps the audit trail's Mark of one node in the state
// database (audit.Anchor).
type markStore struct {
	db   *state.DB
	node string
}

func (m *markStore) LoadMark() (audit.Mark, error) {
	var mk audit.Mark
	var at string
	var size, seq, end int64
	err := m.db.QueryRowContext(context.Background(),
		`SELECT origin, size, root, seq, line_hash, file, at, end_seq, end_hash FROM audit_marks WHERE node = ?`, m.node).
		Scan(&mk.Origin, &size, &mk.Root, &seq, &mk.LineHash, &mk.File, &at, &end, &mk.EndHash)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Mark{}, nil
	}
	if err != nil {
		return audit.Mark{}, err
	}
	mk.Size, mk.Seq, mk.EndSeq = uint64(size), uint64(seq), uint64(end)
	mk.Time, err = m.db.ParseTime("audit_mark.at", at)
	return mk, err
}

func (m *markStore) SaveMark(mk audit.Mark) error {
	ctx := context.Background()
	return m.db.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO audit_marks (node, origin, size, root, seq, line_hash, file, at, end_seq, end_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET origin = excluded.origin, size = excluded.size, root = excluded.root,
			seq = excluded.seq, line_hash = excluded.line_hash, file = excluded.file, at = excluded.at,
			end_seq = excluded.end_seq, end_hash = excluded.end_hash`,
			m.node, mk.Origin, int64(mk.Size), mk.Root, int64(mk.Seq), mk.LineHash, mk.File, state.FormatTime(mk.Time), int64(mk.EndSeq), mk.EndHash)
		return err
	})
}
