package sessions

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// sessionColumns are the sessions table's columns, in scanSession's order.
const sessionColumns = `id, name, token_sha256, connectors, created_at, expires_at, limits, unknown`

// insertSession records rec in the sessions table; an existing row with the
// same id is left as it is.
func insertSession(ctx context.Context, tx *state.Tx, rec sessionRecord) error {
	conns, err := json.Marshal(nonNil(rec.Connectors))
	if err != nil {
		return fmt.Errorf("encoding the connectors of session %s: %w", rec.ID, err)
	}
	limits := ""
	if rec.Limits != nil {
		b, err := json.Marshal(rec.Limits)
		if err != nil {
			return fmt.Errorf("encoding the limits of session %s: %w", rec.ID, err)
		}
		limits = string(b)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`,
		rec.ID, rec.Name, rec.TokenSHA256, string(conns), state.FormatTime(rec.CreatedAt), state.FormatTime(rec.ExpiresAt), limits,
		unknownMode(rec.Unknown))
	if err != nil {
		return fmt.Errorf("recording session %s: %w", rec.ID, err)
	}
	return nil
}

// nonNil returns s, or an empty slice for nil (so it encodes as []).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sessionRows reads every row of the sessions table. A row that cannot be
// decoded comes back with its id and an error wrapping state.ErrCorruptState in
// bad; the others in good.
func sessionRows(ctx context.Context, db *state.DB) (good []sessionRecord, bad map[string]error, err error) {
	rows, err := db.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions ORDER BY id`)
	if err != nil {
		return nil, nil, fmt.Errorf("reading sessions from %s: %w", db.Path(), err)
	}
	defer rows.Close()
	bad = map[string]error{}
	for rows.Next() {
		var rec sessionRecord
		var conns, created, expires, limits string
		if err := rows.Scan(&rec.ID, &rec.Name, &rec.TokenSHA256, &conns, &created, &expires, &limits, &rec.Unknown); err != nil {
			return nil, nil, fmt.Errorf("reading sessions from %s: %w", db.Path(), err)
		}
		if err := decodeSessionRow(db, &rec, conns, created, expires, limits); err != nil {
			bad[rec.ID] = err
			continue
		}
		good = append(good, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading sessions from %s: %w", db.Path(), err)
	}
	return good, bad, nil
}

// sessionRow reads session id's row; a missing one is sql.ErrNoRows.
func sessionRow(ctx context.Context, db *state.DB, id string) (sessionRecord, error) {
	var rec sessionRecord
	var conns, created, expires, limits string
	err := db.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id).
		Scan(&rec.ID, &rec.Name, &rec.TokenSHA256, &conns, &created, &expires, &limits, &rec.Unknown)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return rec, err
		}
		return rec, db.Unavailable(fmt.Errorf("reading session %s from %s: %w", id, db.Path(), err))
	}
	return rec, decodeSessionRow(db, &rec, conns, created, expires, limits)
}

// decodeSessionRow fills rec's connectors, times and limits from their
// stored form.
func decodeSessionRow(db *state.DB, rec *sessionRecord, conns, created, expires, limits string) error {
	var err error
	if rec.CreatedAt, err = db.ParseTime("session "+rec.ID+" created_at", created); err != nil {
		return err
	}
	if rec.ExpiresAt, err = db.ParseTime("session "+rec.ID+" expires_at", expires); err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(conns), &rec.Connectors); err != nil {
		return fmt.Errorf("%w: %s: session %s: connectors %q is not a JSON array of strings", state.ErrCorruptState, db.Path(), rec.ID, conns)
	}
	if len(rec.Connectors) == 0 {
		rec.Connectors = nil
	}
	if limits != "" {
		var l policy.Limits
		if err := json.Unmarshal([]byte(limits), &l); err != nil {
			return fmt.Errorf("%w: %s: session %s: limits %q cannot be read: %v", state.ErrCorruptState, db.Path(), rec.ID, limits, err)
		}
		rec.Limits = &l
	}
	return nil
}

// deleteSessionRow removes session id's row and reports whether there was
// one.
func deleteSessionRow(ctx context.Context, db *state.DB, id string) (bool, error) {
	var n int64
	err := db.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("deleting session %s from %s: %w", id, db.Path(), err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Notify(ctx, state.ChannelSessions, id)
	})
	return n > 0, err
}

// deleteExpiredSessions removes the rows of sessions expired at now and
// returns their ids.
func deleteExpiredSessions(ctx context.Context, db *state.DB, now time.Time) ([]string, error) {
	var ids []string
	err := db.Write(ctx, func(tx *state.Tx) error {
		ids = nil
		rows, err := tx.QueryContext(ctx, `DELETE FROM sessions WHERE expires_at <= ? RETURNING id`, state.FormatTime(now))
		if err != nil {
			return fmt.Errorf("deleting expired sessions from %s: %w", db.Path(), err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// checkRecord verifies a session record against the session key and
// returns its decoded token hash. Failures wrap state.ErrCorruptState.
func checkRecord(key []byte, rec sessionRecord) ([sha256.Size]byte, error) {
	var tokenHash [sha256.Size]byte
	raw, err := hex.DecodeString(rec.TokenSHA256)
	if err != nil || len(raw) != sha256.Size {
		return tokenHash, fmt.Errorf("%w: token_sha256 is not a hex SHA-256", state.ErrCorruptState)
	}
	copy(tokenHash[:], raw)
	if derived := sha256.Sum256([]byte(deriveToken(key, rec.ID))); derived != tokenHash {
		return tokenHash, fmt.Errorf("%w: the session was created with a different session key", state.ErrCorruptState)
	}
	return tokenHash, nil
}
