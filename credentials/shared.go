package credentials

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"filippo.io/age"
	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/state"
)

// sharedTimeout bounds one read or write of the shared vault.
const sharedTimeout = 10 * time.Second

// where names the shared vault in messages.
func (v *Vault) where() string { return "the fleet's vault (the vault table of " + v.DB.Path() + ")" }

// openShared loads the shared vault. The first node of a fleet records
// the vault, sealed to its key's recipient, seeding it with the entries of
// its own file if any; every later node must hold the same key (it is
// refused otherwise), and the database is the vault from then on (the file
// is left as it is). Changes other nodes make arrive through notifications
// (and Refresh). writeMu is held.
func (v *Vault) openShared(local map[string]Credential) error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	v.mu.RLock()
	id := v.id
	v.mu.RUnlock()
	mine := id.Recipient().String()
	err := v.DB.Write(ctx, func(tx *state.Tx) error {
		var have string
		err := tx.QueryRowContext(ctx, `SELECT recipient FROM vault WHERE id = 1`).Scan(&have)
		switch {
		case err == nil && have == mine:
			return nil
		case err == nil:
			return fmt.Errorf("%w: %s is sealed to %s, but this node's vault key %s is %s; every node of a fleet holds the same "+
				"vault key: copy the vault key file of a node of the fleet to %s (mode 0600; state.vault_key_file)",
				state.ErrConflict, v.where(), have, v.KeyFile, mine, v.KeyFile)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		sealed, err := sealVault(local, id)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO vault (id, recipient, sealed, revision, updated_at) VALUES (1, ?, ?, 1, ?)`,
			mine, sealed, state.FormatTime(time.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("opening %s: %w", v.where(), err)
	}
	if err := v.Refresh(ctx); err != nil {
		return err
	}
	v.DB.Follow(state.ChannelCredentials, "vault", v.Refresh)
	return nil
}

// Refresh reads the shared vault again, taking the changes other nodes
// made. On a vault kept in a file it does nothing. Failures: the database's
// (wrapping state.ErrUnavailable when unreachable), or a vault that does
// not decrypt with KeyFile (state.ErrCorruptState: this node's vault key is
// not the fleet's).
func (v *Vault) Refresh(ctx context.Context) error {
	if !v.DB.Shared() {
		return nil
	}
	sealed, rev, err := v.readShared(ctx, v.DB)
	if err != nil {
		return err
	}
	v.mu.RLock()
	same := v.entries != nil && rev == v.rev
	id := v.id
	v.mu.RUnlock()
	if same {
		return nil
	}
	entries, err := v.unseal(sealed, id)
	if err != nil {
		return err
	}
	v.mu.Lock()
	if rev >= v.rev || v.entries == nil {
		v.entries, v.rev = entries, rev
	}
	v.mu.Unlock()
	return nil
}

// unseal decrypts the shared vault (nil: an empty one).
func (v *Vault) unseal(sealed []byte, id *age.X25519Identity) (map[string]Credential, error) {
	if sealed == nil {
		return map[string]Credential{}, nil
	}
	entries, err := openVault(sealed, v.where(), v.KeyFile, id)
	if err != nil {
		return nil, fmt.Errorf("%w (every node of a fleet holds the same vault key: copy it from a node of the fleet to %s)", err, v.KeyFile)
	}
	return entries, nil
}

// readShared reads the sealed vault and its revision (nil, 0: none yet).
func (v *Vault) readShared(ctx context.Context, q state.Querier) ([]byte, int64, error) {
	var sealed []byte
	var rev int64
	err := q.QueryRowContext(ctx, `SELECT sealed, revision FROM vault WHERE id = 1`).Scan(&sealed, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, v.DB.Unavailable(fmt.Errorf("reading %s: %w", v.where(), err))
	}
	return sealed, rev, nil
}

// mutateShared is mutate on the shared vault: the entries are read,
// changed by fn and sealed again in one transaction, which tells the other
// nodes. writeMu is held.
func (v *Vault) mutateShared(fn func(cur map[string]Credential) (map[string]Credential, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	v.mu.RLock()
	id := v.id
	v.mu.RUnlock()
	var next map[string]Credential
	var rev int64
	err := v.DB.Write(ctx, func(tx *state.Tx) error {
		sealed, cur, err := v.readShared(ctx, tx)
		if err != nil {
			return err
		}
		entries, err := v.unseal(sealed, id)
		if err != nil {
			return err
		}
		if next, err = fn(entries); err != nil || next == nil {
			return err
		}
		out, err := sealVault(next, id)
		if err != nil {
			return err
		}
		rev = cur + 1
		_, err = tx.ExecContext(ctx, `UPDATE vault SET sealed = ?, revision = ?, updated_at = ? WHERE id = 1`,
			out, rev, state.FormatTime(time.Now()))
		if err != nil {
			return fmt.Errorf("writing %s: %w", v.where(), err)
		}
		return tx.Notify(ctx, state.ChannelCredentials, "vault")
	})
	if err != nil || next == nil {
		return err
	}
	v.mu.Lock()
	if rev >= v.rev {
		v.entries, v.rev = next, rev
	}
	v.mu.Unlock()
	return nil
}

// coordinateOAuth is the fleet's lock around a refresh of the oauth2
// entry name (inject.OAuthSource.Coordinate): it waits for the other
// nodes' refresh of it to end, reads the vault again and returns the token
// stored now. An entry rotated since rev (the source's) fails: the
// source's endpoint and client are the old entry's, and the next request
// builds a source from the new one.
func (v *Vault) coordinateOAuth(ctx context.Context, name string, rev time.Time) (inject.OAuthToken, func(), error) {
	unlock, err := v.DB.Lock(ctx, "aileron oauth refresh "+name)
	if err != nil {
		return inject.OAuthToken{}, nil, err
	}
	if err := v.Refresh(ctx); err != nil {
		unlock()
		return inject.OAuthToken{}, nil, err
	}
	c, err := v.Get(name)
	if err != nil || c.OAuth == nil {
		unlock()
		return inject.OAuthToken{}, nil, fmt.Errorf("credential %s is no longer an oauth2 entry of the vault", name)
	}
	if !c.UpdatedAt.Equal(rev) {
		unlock()
		return inject.OAuthToken{}, nil, fmt.Errorf("credential %s was replaced meanwhile; the next request uses the new entry", name)
	}
	m := c.OAuth
	return inject.OAuthToken{AccessToken: m.AccessToken, RefreshToken: m.RefreshToken, TokenType: "Bearer", Expiry: m.Expiry}, unlock, nil
}

// keyMissing refuses to make a new vault key for a node that joins a fleet
// whose vault already exists: only the fleet's key opens it.
func (v *Vault) keyMissing() error {
	if !v.DB.Shared() {
		return nil
	}
	if _, err := os.Lstat(v.KeyFile); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	var recipient string
	err := v.DB.QueryRowContext(ctx, `SELECT recipient FROM vault WHERE id = 1`).Scan(&recipient)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // the first node: its key becomes the fleet's
	case err != nil:
		return v.DB.Unavailable(fmt.Errorf("reading %s: %w", v.where(), err))
	}
	return fmt.Errorf("%w: no vault key at %s, and %s is sealed to %s: copy the vault key file of a node of the fleet there "+
		"(mode 0600; state.vault_key_file)", state.ErrConflict, v.KeyFile, v.where(), recipient)
}
