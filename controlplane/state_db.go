package controlplane

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// queryer is *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// parseStateTime reads a time stored with fmtTime; what names the value in
// the error, which wraps ErrCorruptState.
func parseStateTime(db *DB, what, s string) (time.Time, error) {
	t, err := time.ParseInLocation(dbTimeLayout, s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %s: %s %q is not a time: %v", ErrCorruptState, db.path, what, s, err)
	}
	return t, nil
}
