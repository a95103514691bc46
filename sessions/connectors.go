package sessions

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// maxAddAttempts bounds AddConnector's compare-and-swap retries when the
// session's list changes under it.
const maxAddAttempts = 8

// AddConnector adds connector fqn to the scope of live session id, on this
// node at once and on every fleet node through a notification (or at its
// next Refresh). Its next request is decided with the connector; requests
// already past the policy keep the old scope. A session whose list is
// empty already has every connector and is left as it is. It returns the
// session as it is now and whether its list changed. A bad FQN wraps
// state.ErrInvalidArgument, an unknown or expired session
// state.ErrNotFound; before Open, state.ErrNotOpen.
func (s *Manager) AddConnector(ctx context.Context, id, fqn string) (Info, bool, error) {
	if err := policy.CheckFQN(fqn); err != nil {
		return Info{}, false, fmt.Errorf("%w: adding a connector to session %s: %v", state.ErrInvalidArgument, id, err)
	}
	_, db, err := s.opened()
	if err != nil {
		return Info{}, false, err
	}
	if _, err := s.Get(id); err != nil {
		return Info{}, false, err
	}
	for range maxAddAttempts {
		rec, err := sessionRow(ctx, db, id)
		if errors.Is(err, sql.ErrNoRows) {
			return Info{}, false, fmt.Errorf("%w: session %q was deleted meanwhile", state.ErrNotFound, id)
		}
		if err != nil {
			return Info{}, false, err
		}
		if rec.Connectors == nil || slices.Contains(rec.Connectors, fqn) {
			info, err := s.Get(id)
			return info, false, err
		}
		conns := append(slices.Clone(rec.Connectors), fqn)
		swapped, err := swapConnectors(ctx, db, id, rec.Connectors, conns)
		if err != nil {
			return Info{}, false, err
		}
		if !swapped {
			continue // another change came first: read the list again
		}
		s.mu.Lock()
		e := s.live[id]
		if e != nil {
			e = e.withConnectors(conns)
			s.live[id] = e
		}
		s.mu.Unlock()
		if e == nil {
			return Info{}, false, fmt.Errorf("%w: session %q was deleted meanwhile", state.ErrNotFound, id)
		}
		s.log().Info().Str("event", "session.updated").Str("session", id).Str("connector", fqn).Msg("connector added to the session")
		return s.info(e, ""), true, nil
	}
	return Info{}, false, fmt.Errorf("%w: session %s kept changing while adding %s; try again", state.ErrConflict, id, fqn)
}

// AddConnectorEverywhere adds connector fqn to every live session
// (AddConnector) and returns the ids of those whose list changed.
func (s *Manager) AddConnectorEverywhere(ctx context.Context, fqn string) ([]string, error) {
	list, err := s.List()
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, in := range list {
		_, ok, err := s.AddConnector(ctx, in.ID, fqn)
		if errors.Is(err, state.ErrNotFound) {
			continue // deleted or expired meanwhile
		}
		if err != nil {
			return changed, err
		}
		if ok {
			changed = append(changed, in.ID)
		}
	}
	return changed, nil
}

// swapConnectors sets session id's connectors to now if they are still
// was, announcing the change to the fleet, and reports whether they were.
func swapConnectors(ctx context.Context, db *state.DB, id string, was, now []string) (bool, error) {
	before, err := json.Marshal(nonNil(was))
	if err != nil {
		return false, err
	}
	after, err := json.Marshal(nonNil(now))
	if err != nil {
		return false, err
	}
	var n int64
	err = db.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET connectors = ? WHERE id = ? AND connectors = ?`, string(after), id, string(before))
		if err != nil {
			return fmt.Errorf("updating the connectors of session %s in %s: %w", id, db.Path(), err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		return tx.Notify(ctx, state.ChannelSessions, id)
	})
	return n == 1, err
}

// withConnectors returns a copy of e with scope conns; the data-plane
// session handed out before stays as it was (it is immutable).
func (e *sessionEntry) withConnectors(conns []string) *sessionEntry {
	c := *e
	c.rec.Connectors = slices.Clone(conns)
	dp := *e.dp
	dp.Connectors = slices.Clone(conns)
	c.dp = &dp
	return &c
}

// takeRow brings live entry have to what rec, the session's row as read
// now, says of what changes on a live session (its unknown-request mode
// and its connectors), and returns it.
func (have *sessionEntry) takeRow(rec sessionRecord) *sessionEntry {
	if have.rec.Unknown != rec.Unknown {
		have = have.withUnknown(rec.Unknown)
	}
	if !slices.Equal(have.rec.Connectors, rec.Connectors) {
		have = have.withConnectors(rec.Connectors)
	}
	return have
}
