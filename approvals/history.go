package approvals

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/aileronhq/aileron/dataplane"
)

// Decided is a decided approval as a history lists it: what was asked and
// how it ended, without the preview's headers, fields or body.
type Decided struct {
	ID, Session            string
	State                  dataplane.ApprovalState
	Method, Host           string
	Path, Query, Operation string
	// When is when it was decided, or when it expired undecided.
	When              time.Time
	DecidedBy, Reason string
}

// Target is the request's host and escaped path and query.
func (d Decided) Target() string {
	if d.Query != "" {
		return d.Host + d.Path + "?" + d.Query
	}
	return d.Host + d.Path
}

// History returns the latest limit approvals that are no longer pending
// (approved, consumed, denied, expired), newest first. It reads only the
// columns and preview members it shows: its cost does not grow with the
// bodies held for approval, nor with the number of approvals recorded.
func (s *Store) History(ctx context.Context, limit int) ([]Decided, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if _, err := s.expire(ctx); err != nil {
		return nil, err
	}
	j := func(member string) string { return "COALESCE(" + s.DB.JSONText("preview", member) + ", '')" }
	rows, err := s.DB.QueryContext(ctx, `SELECT id, session, state,
		`+j("method")+`, `+j("host")+`, `+j("path")+`, `+j("query")+`, `+j("operation")+`,
		COALESCE(decided_at, expires_at), decided_by, reason
		FROM approvals WHERE state != 'pending'
		ORDER BY COALESCE(decided_at, expires_at) DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("listing decided approvals: %w", err)
	}
	defer rows.Close()
	out := []Decided{}
	for rows.Next() {
		var d Decided
		var when string
		var by, reason sql.NullString
		if err := rows.Scan(&d.ID, &d.Session, &d.State, &d.Method, &d.Host, &d.Path, &d.Query, &d.Operation, &when, &by, &reason); err != nil {
			return nil, fmt.Errorf("listing decided approvals: %w", err)
		}
		if d.When, err = s.DB.ParseTime("approval "+d.ID+" decided_at", when); err != nil {
			return nil, err
		}
		d.DecidedBy, d.Reason = by.String, reason.String
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing decided approvals: %w", err)
	}
	return out, nil
}
