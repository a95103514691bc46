package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/state"
)

// The trust store maps a publisher authority (scheme://owner: github://acme)
// to its allowed signers, in ssh's allowed_signers format (see
// signing.ParseAllowedSigners), in the trust_signers table: shared by a
// fleet like the index. Only the store reads it, to judge the signatures of
// the packages it installs and lists.

// MaxAllowedSigners bounds one authority's allowed_signers text (256 KiB:
// some thousand keys).
const MaxAllowedSigners = 256 << 10

// TrustedAuthority is one authority's entry in the trust store.
type TrustedAuthority struct {
	Authority string `json:"authority"`
	// Signers are the parsed lines of AllowedSigners.
	Signers []signing.Signer `json:"signers"`
	// AllowedSigners is the allowed_signers text as it was added.
	AllowedSigners string    `json:"allowed_signers"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// Trust sets authority's allowed signers to allowedSigners (an
// allowed_signers file; source names it in errors), replacing any it had.
// An authority that is not scheme://owner, a file over MaxAllowedSigners,
// one that does not parse (every bad line is named) or lists no key wraps
// state.ErrInvalidArgument. Packages are judged against the new signers the
// next time they are installed or listed.
func (s *Store) Trust(ctx context.Context, authority, source string, allowedSigners []byte) (TrustedAuthority, error) {
	db, err := s.database()
	if err != nil {
		return TrustedAuthority{}, err
	}
	if err := policy.CheckAuthority(authority); err != nil {
		return TrustedAuthority{}, fmt.Errorf("%w: %v", state.ErrInvalidArgument, err)
	}
	if len(allowedSigners) > MaxAllowedSigners {
		return TrustedAuthority{}, fmt.Errorf("%w: %s is %d bytes; an allowed_signers file may be at most %d",
			state.ErrInvalidArgument, source, len(allowedSigners), MaxAllowedSigners)
	}
	signers, err := signing.ParseAllowedSigners(source, allowedSigners)
	if err != nil {
		return TrustedAuthority{}, fmt.Errorf("%w: %w", state.ErrInvalidArgument, err)
	}
	if len(signers) == 0 {
		return TrustedAuthority{}, fmt.Errorf("%w: %s lists no key; write one line per key: principals [options] keytype base64-key",
			state.ErrInvalidArgument, source)
	}
	at := s.now().UTC().Round(0)
	err = db.Write(ctx, func(tx *state.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO trust_signers (authority, signers, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (authority) DO UPDATE SET signers = excluded.signers, updated_at = excluded.updated_at`,
			authority, string(allowedSigners), state.FormatTime(at))
		return err
	})
	if err != nil {
		return TrustedAuthority{}, fmt.Errorf("recording the signers of %s in %s: %w", authority, db.Path(), err)
	}
	ev := s.log().Info().Str("event", "store.trusted").Str("authority", authority)
	fps := make([]string, len(signers))
	for i, sg := range signers {
		fps[i] = sg.Fingerprint
	}
	ev.Strs("keys", fps).Msg("publisher signers set")
	return TrustedAuthority{Authority: authority, Signers: signers, AllowedSigners: string(allowedSigners), UpdatedAt: at}, nil
}

// Untrust removes authority from the trust store: its packages are then
// signed by a key not trusted. An authority with no entry wraps
// state.ErrNotFound.
func (s *Store) Untrust(ctx context.Context, authority string) error {
	db, err := s.database()
	if err != nil {
		return err
	}
	var n int64
	err = db.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM trust_signers WHERE authority = ?`, authority)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("removing the signers of %s from %s: %w", authority, db.Path(), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s is not in the trust store (see `aileron trust list`)", state.ErrNotFound, authority)
	}
	s.log().Info().Str("event", "store.untrusted").Str("authority", authority).Msg("publisher signers removed")
	return nil
}

// TrustList returns the trust store, sorted by authority. An entry that
// no longer parses wraps state.ErrCorruptState.
func (s *Store) TrustList(ctx context.Context) ([]TrustedAuthority, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT authority, signers, updated_at FROM trust_signers`)
	if err != nil {
		return nil, fmt.Errorf("reading the trust store from %s: %w", db.Path(), err)
	}
	defer rows.Close()
	var out []TrustedAuthority
	for rows.Next() {
		var a TrustedAuthority
		var at string
		if err := rows.Scan(&a.Authority, &a.AllowedSigners, &at); err != nil {
			return nil, fmt.Errorf("reading the trust store from %s: %w", db.Path(), err)
		}
		if a.UpdatedAt, err = db.ParseTime("trust_signers "+a.Authority+" updated_at", at); err != nil {
			return nil, err
		}
		if a.Signers, err = parseTrusted(db, a.Authority, a.AllowedSigners); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the trust store from %s: %w", db.Path(), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Authority < out[j].Authority })
	return out, nil
}

// trustedSigners returns authority's allowed signers: none when it has no
// entry. An entry that no longer parses wraps state.ErrCorruptState.
func (s *Store) trustedSigners(ctx context.Context, authority string) ([]signing.Signer, error) {
	db, err := s.database()
	if err != nil {
		return nil, err
	}
	var text string
	err = db.QueryRowContext(ctx, `SELECT signers FROM trust_signers WHERE authority = ?`, authority).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, db.Unavailable(fmt.Errorf("reading the signers of %s from %s: %w", authority, db.Path(), err))
	}
	return parseTrusted(db, authority, text)
}

// parseTrusted parses a stored allowed_signers text; a failure wraps
// state.ErrCorruptState.
func parseTrusted(db *state.DB, authority, text string) ([]signing.Signer, error) {
	signers, err := signing.ParseAllowedSigners(authority, []byte(text))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: table trust_signers, authority %q: %v (add the authority's signers again with `aileron trust add`)",
			state.ErrCorruptState, db.Path(), authority, err)
	}
	return signers, nil
}
