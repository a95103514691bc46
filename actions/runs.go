package actions

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/state"
)

// The action_runs table (migration 2) holds one row per action run. Its
// result column holds the run's latest Result as JSON at every state,
// not only once final, so that Result answers from the row alone.

const (
	runIDPrefix = "ar_"
	runIDChars  = 20
)

// actionRun is one action_runs row, decoded.
type actionRun struct {
	ID, Session, Action, Version, Connector string
	// ArgsJSON is the canonical JSON of Args.
	ArgsJSON string
	Args     map[string]any
	Status   string
	// ApprovalID is the approval the run waits (or last waited) on; it
	// equals ID for a run gated by its action's own approval.
	ApprovalID string
	NextStep   int
	Outputs    map[string]map[string]any
	Result     Result
	// AuditID is the audit_id of the run's action.started line, the
	// parent of its steps' lines; "" until its steps first start.
	AuditID string
	// Deadline is when the run must end while it runs (zero otherwise);
	// TimeLeft is what is left of its timeout while it waits on a step's
	// approval (0: all of it).
	Deadline time.Time
	TimeLeft time.Duration
}

// actionApproval reports whether the run waits on its action's approval
// (as opposed to one step's).
func (run *actionRun) actionApproval() bool { return run.ApprovalID != "" && run.ApprovalID == run.ID }

// newRunID returns "ar_" and 20 random lower-case base32 characters.
func newRunID() (string, error) { return state.RandomID(runIDPrefix, runIDChars) }

// decodeJSONNumbers decodes data keeping numbers as json.Number, so that
// values survive a round trip through the database unchanged.
func decodeJSONNumbers(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// encodeJSON encodes v compactly with sorted object keys and no HTML
// escaping: the canonical form stored and hashed.
func encodeJSON(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// canonicalArgs returns args' canonical JSON and args decoded back from it
// (numbers as json.Number), which is what a run uses from then on: the
// steps of a run resumed after a restart see exactly the same values.
// Failures wrap state.ErrInvalidArgument.
func canonicalArgs(args map[string]any) (string, map[string]any, error) {
	if args == nil {
		args = map[string]any{}
	}
	canon, err := encodeJSON(args)
	if err != nil {
		return "", nil, fmt.Errorf("%w: action arguments do not encode as JSON: %v", state.ErrInvalidArgument, err)
	}
	var norm map[string]any
	if err := decodeJSONNumbers([]byte(canon), &norm); err != nil {
		return "", nil, fmt.Errorf("%w: action arguments: %v", state.ErrInvalidArgument, err)
	}
	return canon, norm, nil
}

const actionRunColumns = `id, session, action, version, connector, args, status, approval_id, next_step, outputs, result,
	audit_id, deadline, time_left_ms`

// scanRun reads one row selected with actionRunColumns.
func scanRun(db *state.DB, sc state.Scanner) (actionRun, error) {
	var run actionRun
	var outputs, result, deadline string
	var left int64
	err := sc.Scan(&run.ID, &run.Session, &run.Action, &run.Version, &run.Connector, &run.ArgsJSON,
		&run.Status, &run.ApprovalID, &run.NextStep, &outputs, &result, &run.AuditID, &deadline, &left)
	if err != nil {
		return run, err
	}
	run.TimeLeft = time.Duration(left) * time.Millisecond
	if deadline != "" {
		if run.Deadline, err = db.ParseTime("deadline of action run "+run.ID, deadline); err != nil {
			return run, err
		}
	}
	if err := decodeJSONNumbers([]byte(run.ArgsJSON), &run.Args); err != nil {
		return run, fmt.Errorf("%w: args of action run %s: %v", state.ErrCorruptState, run.ID, err)
	}
	if err := decodeJSONNumbers([]byte(outputs), &run.Outputs); err != nil {
		return run, fmt.Errorf("%w: outputs of action run %s: %v", state.ErrCorruptState, run.ID, err)
	}
	if run.Outputs == nil {
		run.Outputs = map[string]map[string]any{}
	}
	if result != "" {
		if err := decodeJSONNumbers([]byte(result), &run.Result); err != nil {
			return run, fmt.Errorf("%w: result of action run %s: %v", state.ErrCorruptState, run.ID, err)
		}
	}
	run.Result.Status, run.Result.RunID = run.Status, run.ID
	return run, nil
}

// loadRun reads the run with id key or, failing that, the newest run
// waiting (or that waited) on approval key. A missing one wraps state.ErrNotFound.
func (r *Runner) loadRun(ctx context.Context, key string) (actionRun, error) {
	run, err := scanRun(r.DB, r.DB.QueryRowContext(ctx, `SELECT `+actionRunColumns+` FROM action_runs WHERE id = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		run, err = scanRun(r.DB, r.DB.QueryRowContext(ctx, `SELECT `+actionRunColumns+` FROM action_runs
			WHERE approval_id = ? ORDER BY created_at DESC, id LIMIT 1`, key))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return run, fmt.Errorf("%w: no action run has id or approval %q", state.ErrNotFound, key)
	}
	if err != nil {
		return run, fmt.Errorf("reading action run %s: %w", key, err)
	}
	return run, nil
}

// findLiveRun finds the newest run of session gated by its own approval for
// this action, version and arguments that is still pending or running.
func (r *Runner) findLiveRun(ctx context.Context, session, name, version, args string) (string, bool, error) {
	var id string
	err := r.DB.QueryRowContext(ctx, `SELECT id FROM action_runs
		WHERE session = ? AND action = ? AND version = ? AND args = ? AND id = approval_id
		  AND status IN ('pending_approval','running')
		ORDER BY created_at DESC, id LIMIT 1`, session, name, version, args).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("looking up action runs of session %s: %w", session, err)
	}
	return id, true, nil
}

// encodeRun renders the JSON columns of run.
func encodeRun(run *actionRun) (outputs, result string, err error) {
	if outputs, err = encodeJSON(run.Outputs); err != nil {
		return "", "", fmt.Errorf("encoding outputs of action run %s: %w", run.ID, err)
	}
	run.Result.Status, run.Result.RunID = run.Status, run.ID
	if result, err = encodeJSON(run.Result); err != nil {
		return "", "", fmt.Errorf("encoding result of action run %s: %w", run.ID, err)
	}
	return outputs, result, nil
}

// insertRun records run unless a run with its id exists; it reports
// whether this call inserted it.
func (r *Runner) insertRun(ctx context.Context, run *actionRun) (bool, error) {
	outputs, result, err := encodeRun(run)
	if err != nil {
		return false, err
	}
	now := state.FormatTime(r.now())
	var n int64
	err = r.DB.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO action_runs (`+actionRunColumns+`, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			run.ID, run.Session, run.Action, run.Version, run.Connector, run.ArgsJSON, run.Status,
			run.ApprovalID, run.NextStep, outputs, result, run.AuditID, formatDeadline(run.Deadline), run.TimeLeft.Milliseconds(), now, now)
		if err != nil {
			return fmt.Errorf("recording action run %s: %w", run.ID, err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n == 1, err
}

// saveRun writes run's state if the stored run is still in one of the
// states from (a compare-and-swap); it reports whether it wrote. A write
// that moves the run to a new status reports the matching event.
func (r *Runner) saveRun(ctx context.Context, run *actionRun, from ...string) (bool, error) {
	outputs, result, err := encodeRun(run)
	if err != nil {
		return false, err
	}
	var n int64
	var prev string
	err = r.DB.Write(ctx, func(tx *state.Tx) error {
		n = 0
		if err := tx.QueryRowContext(ctx, `SELECT status FROM action_runs WHERE id = ?`, run.ID).Scan(&prev); err != nil {
			return fmt.Errorf("reading action run %s: %w", run.ID, err)
		}
		ok := false
		for _, f := range from {
			ok = ok || prev == f
		}
		if !ok {
			return nil
		}
		res, err := tx.ExecContext(ctx, `UPDATE action_runs SET status = ?, approval_id = ?, next_step = ?, outputs = ?,
			result = ?, audit_id = ?, deadline = ?, time_left_ms = ?, updated_at = ? WHERE id = ? AND status = ?`,
			run.Status, run.ApprovalID, run.NextStep, outputs, result, run.AuditID, formatDeadline(run.Deadline),
			run.TimeLeft.Milliseconds(), state.FormatTime(r.now()), run.ID, prev)
		if err != nil {
			return fmt.Errorf("updating action run %s: %w", run.ID, err)
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil || n != 1 {
		return false, err
	}
	if prev != run.Status {
		r.emit(run)
	}
	return true, nil
}

// markCancelled moves run to cancelled with result res if it is still in
// the status run has: a conditional update of the status and result alone,
// which leaves the rest of the row as the run's executor wrote it. It
// reports whether it moved the run, and then reports action.cancelled.
func (r *Runner) markCancelled(ctx context.Context, run *actionRun, res Result) (bool, error) {
	res.Status, res.RunID = StatusCancelled, run.ID
	result, err := encodeJSON(res)
	if err != nil {
		return false, fmt.Errorf("encoding result of action run %s: %w", run.ID, err)
	}
	var n int64
	err = r.DB.Write(ctx, func(tx *state.Tx) error {
		out, err := tx.ExecContext(ctx, `UPDATE action_runs SET status = ?, result = ?, updated_at = ? WHERE id = ? AND status = ?`,
			StatusCancelled, result, state.FormatTime(r.now()), run.ID, run.Status)
		if err != nil {
			return fmt.Errorf("cancelling action run %s: %w", run.ID, err)
		}
		n, err = out.RowsAffected()
		return err
	})
	if err != nil || n != 1 {
		return false, err
	}
	ended := *run
	ended.Status, ended.Result = StatusCancelled, res
	r.emit(&ended)
	return true, nil
}

// formatDeadline stores a deadline; "" for none.
func formatDeadline(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return state.FormatTime(t)
}

// runStatus reads the stored status of run id.
func (r *Runner) runStatus(ctx context.Context, id string) (string, error) {
	var st string
	if err := r.DB.QueryRowContext(ctx, `SELECT status FROM action_runs WHERE id = ?`, id).Scan(&st); err != nil {
		return "", fmt.Errorf("reading action run %s: %w", id, err)
	}
	return st, nil
}

// runIDsWithStatus lists the runs in status, oldest first.
func (r *Runner) runIDsWithStatus(ctx context.Context, status string) ([]string, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT id FROM action_runs WHERE status = ? ORDER BY created_at, id`, status)
	if err != nil {
		return nil, fmt.Errorf("listing %s action runs: %w", status, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("listing %s action runs: %w", status, err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing %s action runs: %w", status, err)
	}
	return ids, nil
}

// emit reports run's current status to OnEvent, without argument values.
func (r *Runner) emit(run *actionRun) {
	event := map[string]audit.EventName{
		StatusPendingApproval: audit.EventActionPending,
		StatusCompleted:       audit.EventActionCompleted,
		StatusFailed:          audit.EventActionFailed,
		StatusDenied:          audit.EventActionDenied,
		StatusCancelled:       audit.EventActionCancelled,
	}[run.Status]
	if event == "" {
		return
	}
	d := r.eventDetails(run)
	if e := run.Result.Error; e != nil {
		d["reason"] = string(e.Reason)
		if e.Step != "" {
			d["step"] = e.Step
		}
	}
	r.send(audit.Event{Name: event, ParentAuditID: run.AuditID, Details: d}, run)
}

// emitStarted records run's action.started line, the root of its call
// tree: its audit_id is run.AuditID.
func (r *Runner) emitStarted(run *actionRun, timeout time.Duration) {
	d := r.eventDetails(run)
	d["timeout"] = timeout.String()
	r.send(audit.Event{Name: audit.EventActionStarted, AuditID: run.AuditID, Details: d}, run)
}

// eventDetails are the identifying facts of run every action.* line has.
func (r *Runner) eventDetails(run *actionRun) map[string]string {
	d := map[string]string{"id": run.ID, "session": run.Session, "action": run.Action,
		"version": run.Version, "connector": run.Connector}
	if run.ApprovalID != "" {
		d["approval_id"] = run.ApprovalID
	}
	if inst, ok := r.catalog().Lookup(run.Action); ok && len(inst.Unpinned()) > 0 {
		d["unpinned"] = strings.Join(inst.Unpinned(), ",")
	}
	return d
}

// send hands ev, of run, to OnEvent.
func (r *Runner) send(ev audit.Event, run *actionRun) {
	if r.OnEvent == nil {
		return
	}
	ev.Session, ev.RunID = run.Session, run.ID
	r.OnEvent(ev)
}
