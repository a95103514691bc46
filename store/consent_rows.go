package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
)

// Consented is a consent on record: the request granted, who gave it, how
// and when.
type Consented struct {
	Request
	By  string    `json:"by"`
	Via string    `json:"via"`
	At  time.Time `json:"at"`
	// Quarantined is set by ClaimUnaudited for a version not served.
	Quarantined bool `json:"quarantined,omitempty"`
}

// saveConsent records c as the consent of req's version, replacing any
// before it.
func saveConsent(ctx context.Context, tx *state.Tx, req Request, c Consent, at time.Time) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("recording the consent of %s: %w", req.Ref(), err)
	}
	audited := 0
	if c.Audited {
		audited = 1
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO store_consents (fqn, version, hash, request, granted_by, via, granted_at, audited)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fqn, version) DO UPDATE SET hash = excluded.hash, request = excluded.request,
		granted_by = excluded.granted_by, via = excluded.via, granted_at = excluded.granted_at, audited = excluded.audited`,
		req.FQN, req.Version, req.Hash, string(b), c.By, c.Via, state.FormatTime(at), audited)
	if err != nil {
		return fmt.Errorf("recording the consent of %s: %w", req.Ref(), err)
	}
	return nil
}

// loadConsent reads the consent recorded for fqn@version under hash; nil
// when there is none (a version installed before consents were recorded).
func (s *Store) loadConsent(ctx context.Context, q state.Querier, fqn, version, hash string) (*Consented, error) {
	var req, by, via, at string
	err := q.QueryRowContext(ctx, `SELECT request, granted_by, via, granted_at FROM store_consents
		WHERE fqn = ? AND version = ? AND hash = ?`, fqn, version, hash).Scan(&req, &by, &via, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, s.DB.Unavailable(fmt.Errorf("reading the consent of %s@%s: %w", fqn, version, err))
	}
	c := &Consented{By: by, Via: via}
	if c.At, err = s.DB.ParseTime("store_consents "+fqn+"@"+version+" granted_at", at); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(req), &c.Request); err != nil || c.Request.Ref() != fqn+"@"+version || c.Hash != hash {
		return nil, fmt.Errorf("%w: %s: table store_consents, %s@%s: the request does not read back (%v); "+
			"remove and reinstall the version", state.ErrCorruptState, s.DB.Path(), fqn, version, err)
	}
	return c, nil
}

// consentedRequest returns what fqn@version was consented to: its recorded
// consent, or, for a version installed before consents were recorded, what
// its package asks now.
func (s *Store) consentedRequest(ctx context.Context, q state.Querier, fqn, version, hash string) (Request, error) {
	c, err := s.loadConsent(ctx, q, fqn, version, hash)
	if err != nil {
		return Request{}, err
	}
	if c != nil {
		return c.Request, nil
	}
	return requestFromDir(s.packageDir(hash), hash)
}

// requestFromDir rebuilds the request of the installed package in dir
// (whose hash is hash). The signature is not re-read: it shows unsigned.
func requestFromDir(dir, hash string) (Request, error) {
	specPath := filepath.Join(dir, SpecFileName)
	data, err := os.ReadFile(specPath)
	if err != nil {
		return Request{}, fmt.Errorf("%w: reading %s: %v", ErrTampered, specPath, err)
	}
	spec, err := parseSpec(specPath, data)
	if err != nil {
		return Request{}, err
	}
	actions, err := action.LoadPackage(dir, spec)
	if err != nil {
		return Request{}, fmt.Errorf("%w: the actions in %s: %w", ErrInvalidPackage, dir, err)
	}
	return buildRequest(policy.Source{Spec: spec, Hash: hash}, storedGrants(dir), actionNames(actions), signing.Signature{}), nil
}

// actionNames returns the names of a package's actions.
func actionNames(ms []*action.Manifest) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	return names
}

// Consents returns the consent of every installed version that is served
// or may be (not quarantined), sorted by FQN and then by SemVer
// precedence: what `aileron connector lock` prints. A version installed
// before consents were recorded has none until it is installed again.
func (s *Store) Consents(ctx context.Context) ([]Consented, error) {
	ix, err := s.readIndex(ctx)
	if err != nil {
		return nil, err
	}
	var out []Consented
	for _, fqn := range sortedFQNs(ix) {
		c := ix.Connectors[fqn]
		for _, v := range sortedVersions(c) {
			e := c.Versions[v]
			if e.Quarantined {
				continue
			}
			rec, err := s.loadConsent(ctx, s.DB, fqn, v, e.Hash)
			if err != nil {
				return nil, err
			}
			if rec != nil {
				out = append(out, *rec)
			}
		}
	}
	return out, nil
}

// ClaimUnaudited marks every consent whose store.consented line no daemon
// wrote yet (one given with the daemon stopped) as written, and returns
// them for the caller to write. Each is claimed once, also across the
// nodes of a fleet.
func (s *Store) ClaimUnaudited(ctx context.Context) ([]Consented, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	var out []Consented
	err = db.Write(ctx, func(tx *state.Tx) error {
		out = nil // a retried transaction starts afresh
		keys, err := unaudited(ctx, tx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			res, err := tx.ExecContext(ctx, `UPDATE store_consents SET audited = 1 WHERE fqn = ? AND version = ? AND audited = 0`, k.fqn, k.version)
			if err != nil {
				return fmt.Errorf("claiming the consent of %s@%s: %w", k.fqn, k.version, err)
			}
			if n, err := res.RowsAffected(); err != nil || n != 1 {
				continue
			}
			c, err := s.loadConsent(ctx, tx, k.fqn, k.version, k.hash)
			if err != nil || c == nil {
				return err
			}
			c.Quarantined = k.quarantined
			out = append(out, *c)
		}
		return nil
	})
	return out, err
}

// consentKey names one consent row.
type consentKey struct {
	fqn, version, hash string
	quarantined        bool
}

// unaudited lists the consents not yet audited, in a stable order.
func unaudited(ctx context.Context, q state.Querier) ([]consentKey, error) {
	rows, err := q.QueryContext(ctx, `SELECT c.fqn, c.version, c.hash, v.quarantined FROM store_consents c
		JOIN store_versions v ON v.fqn = c.fqn AND v.version = c.version WHERE c.audited = 0 ORDER BY c.fqn, c.version`)
	if err != nil {
		return nil, fmt.Errorf("reading the consents not yet audited: %w", err)
	}
	defer rows.Close()
	var keys []consentKey
	for rows.Next() {
		var k consentKey
		if err := rows.Scan(&k.fqn, &k.version, &k.hash, &k.quarantined); err != nil {
			return nil, fmt.Errorf("reading the consents not yet audited: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
