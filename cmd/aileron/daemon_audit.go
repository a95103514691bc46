package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"

	"github.com/aileronhq/aileron/audit"
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
	key, err := audit.LoadOrCreateKey(d.cfg.Audit.KeyFile)
	if err != nil {
		return fmt.Errorf("%w (audit.key_file)", err)
	}
	d.audit = newAuditLog(d.cfg.Audit.Dir, key, d.db)
	d.audit.MaxFileBytes, d.audit.SyncInterval = d.cfg.Audit.MaxFileBytes, d.cfg.Audit.SyncInterval
	d.audit.CheckpointEvery, d.audit.CheckpointInterval = uint64(d.cfg.Audit.CheckpointEvery), d.cfg.Audit.CheckpointInterval
	if d.cfg.Audit.Stdout {
		d.audit.Mirror = os.Stdout
	}
	if err := d.openWitnesses(); err != nil {
		return err
	}
	if err := d.audit.Open(); err != nil {
		if errors.Is(err, audit.ErrTrailBroken) {
			return fmt.Errorf("audit: %w\n\nThe daemon forwards nothing over a trail it cannot vouch for. Put the missing or changed files back in %s "+
				"(`aileron audit verify` says what it finds), or, to start a new trail on purpose, stop here and run "+
				"`aileron audit new-trail --reason \"...\"`: it moves the present files aside and records the break as the new trail's first line",
				err, d.cfg.Audit.Dir)
		}
		return fmt.Errorf("audit: %w (audit.dir %s)", err, d.cfg.Audit.Dir)
	}
	d.rec.audit = d.audit
	return nil
}

// newAuditLog is the trail's Log over dir, signed with key, its Mark kept
// in db.
func newAuditLog(dir string, key *audit.Key, db *state.DB) *audit.Log {
	return &audit.Log{Dir: dir, Key: key, Anchor: &markStore{db: db}}
}

// markStore keeps the audit trail's Mark in the state database
// (audit.Anchor).
type markStore struct {
	db *state.DB
}

func (m *markStore) LoadMark() (audit.Mark, error) {
	var mk audit.Mark
	var at string
	var size, seq int64
	err := m.db.QueryRowContext(context.Background(),
		`SELECT origin, size, root, seq, line_hash, file, at, final FROM audit_mark WHERE id = 1`).
		Scan(&mk.Origin, &size, &mk.Root, &seq, &mk.LineHash, &mk.File, &at, &mk.Final)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Mark{}, nil
	}
	if err != nil {
		return audit.Mark{}, err
	}
	mk.Size, mk.Seq = uint64(size), uint64(seq)
	mk.Time, err = m.db.ParseTime("audit_mark.at", at)
	return mk, err
}

func (m *markStore) SaveMark(mk audit.Mark) error {
	return m.db.Write(context.Background(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO audit_mark (id, origin, size, root, seq, line_hash, file, at, final) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET origin = excluded.origin, size = excluded.size, root = excluded.root,
			seq = excluded.seq, line_hash = excluded.line_hash, file = excluded.file, at = excluded.at, final = excluded.final`,
			mk.Origin, int64(mk.Size), mk.Root, int64(mk.Seq), mk.LineHash, mk.File, state.FormatTime(mk.Time), mk.Final)
		return err
	})
}
