package credentials

import (
	"context"
	"fmt"
	"time"

	"github.com/aileronhq/aileron/state"
)

// loadBindings reads every row of the bindings table and validates it like
// a binding being bound. Content failures wrap state.ErrCorruptState
// and name the database, the table and the connector.
func loadBindings(ctx context.Context, q state.Querier, db *state.DB) (map[string]Binding, error) {
	rows, err := q.QueryContext(ctx, `SELECT connector, credential, header, format, query, env FROM bindings`)
	if err != nil {
		return nil, fmt.Errorf("reading bindings from %s: %w", db.Path(), err)
	}
	defer rows.Close()
	byFQN := map[string]Binding{}
	for rows.Next() {
		var bd Binding
		if err := rows.Scan(&bd.Connector, &bd.Credential, &bd.Header, &bd.Format, &bd.Query, &bd.Env); err != nil {
			return nil, fmt.Errorf("reading bindings from %s: %w", db.Path(), err)
		}
		if err := validateBinding(bd); err != nil {
			return nil, fmt.Errorf("%w: %s: table bindings, connector %q: %v "+
				"(rebind it with `aileron credential bind`, or restore a backup of the database)", state.ErrCorruptState, db.Path(), bd.Connector, err)
		}
		byFQN[bd.Connector] = bd
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading bindings from %s: %w", db.Path(), err)
	}
	return byFQN, nil
}

// putBinding inserts bd or replaces the connector's binding.
func putBinding(ctx context.Context, tx *state.Tx, bd Binding, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO bindings (connector, credential, header, format, query, env, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (connector) DO UPDATE SET credential = excluded.credential, header = excluded.header,
			format = excluded.format, query = excluded.query, env = excluded.env, updated_at = excluded.updated_at`,
		bd.Connector, bd.Credential, bd.Header, bd.Format, bd.Query, bd.Env, state.FormatTime(now))
	if err != nil {
		return fmt.Errorf("recording the binding of %s: %w", bd.Connector, err)
	}
	return nil
}
