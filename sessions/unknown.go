package sessions

import (
	"context"
	"fmt"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
)

// CheckUnknown returns mode as stored: "" becomes dataplane.UnknownDeny;
// anything but deny, ask or learn wraps state.ErrInvalidArgument.
func CheckUnknown(mode string) (string, error) {
	switch mode {
	case "", dataplane.UnknownDeny:
		return dataplane.UnknownDeny, nil
	case dataplane.UnknownAsk, dataplane.UnknownLearn:
		return mode, nil
	}
	return "", fmt.Errorf("%w: unknown-request mode %q is not one of %s, %s, %s (deny refuses requests no operation matches; "+
		"ask holds each for a human, who sends it once, allows it as a rule or denies it; learn refuses them and records them as proposals)",
		state.ErrInvalidArgument, mode, dataplane.UnknownDeny, dataplane.UnknownAsk, dataplane.UnknownLearn)
}

// unknownMode is mode with "" read as deny.
func unknownMode(mode string) string {
	if mode == "" {
		return dataplane.UnknownDeny
	}
	return mode
}

// SetUnknown changes what live session id does with requests no operation
// matches (CheckUnknown's modes). Its next request is decided under the
// new mode; requests already past the policy keep the old one. A bad mode
// wraps state.ErrInvalidArgument, an unknown or expired session
// state.ErrNotFound; before Open, state.ErrNotOpen.
func (s *Manager) SetUnknown(ctx context.Context, id, mode string) (Info, error) {
	mode, err := CheckUnknown(mode)
	if err != nil {
		return Info{}, err
	}
	_, db, err := s.opened()
	if err != nil {
		return Info{}, err
	}
	if _, err := s.Get(id); err != nil {
		return Info{}, err
	}
	var n int64
	err = db.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET unknown = ? WHERE id = ?`, mode, id)
		if err != nil {
			return fmt.Errorf("updating session %s in %s: %w", id, db.Path(), err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		return tx.Notify(ctx, state.ChannelSessions, id)
	})
	if err != nil {
		return Info{}, err
	}
	if n == 0 {
		return Info{}, fmt.Errorf("%w: session %q (see `aileron session list`)", state.ErrNotFound, id)
	}
	s.mu.Lock()
	e := s.live[id]
	if e != nil {
		e = e.withUnknown(mode)
		s.live[id] = e
	}
	s.mu.Unlock()
	if e == nil {
		return Info{}, fmt.Errorf("%w: session %q was deleted meanwhile", state.ErrNotFound, id)
	}
	s.log().Info().Str("event", "session.updated").Str("session", id).Str("unknown", mode).Msg("session unknown-request mode changed")
	return s.info(e, ""), nil
}

// withUnknown returns a copy of e in mode; the data-plane session handed
// out before stays as it was (it is immutable), the CA is shared.
func (e *sessionEntry) withUnknown(mode string) *sessionEntry {
	c := *e
	c.rec.Unknown = mode
	dp := *e.dp
	dp.Unknown = mode
	c.dp = &dp
	return &c
}
