package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// A run's deadline and cancellation. The runs table is the one authority:
// Cancel moves a run to cancelled with a conditional update there, and the
// goroutine executing the run (on this node or another of the fleet)
// notices it, between steps and, while a step is in flight, by reading the
// run's status every CancelPoll; the step's context then ends, which
// cancels its request upstream.

const (
	defaultTimeout    = 2 * time.Minute
	defaultCancelPoll = 250 * time.Millisecond
	// maxCancelTries bounds Cancel's compare-and-swap retries against a
	// run that keeps changing state.
	maxCancelTries = 8
)

// Causes of a step context's end.
var (
	errDeadline  = errors.New("the run's deadline passed")
	errCancelled = errors.New("the run was cancelled")
)

// final reports whether status is one a run never leaves.
func final(status string) bool {
	switch status {
	case StatusCompleted, StatusDenied, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// timeout is the deadline of a run of inst, counted from when its steps
// start.
func (r *Runner) timeout(inst action.Installed) time.Duration {
	switch {
	case inst.Manifest != nil && inst.Timeout > 0:
		return inst.Timeout
	case r.DefaultTimeout > 0:
		return r.DefaultTimeout
	}
	return defaultTimeout
}

func (r *Runner) cancelPoll() time.Duration {
	if r.CancelPoll > 0 {
		return r.CancelPoll
	}
	return defaultCancelPoll
}

// Cancel cancels the run with id (or the run waiting on approval id) on
// behalf of by (named in its result and audit line). sess, when not nil,
// limits it to that session's runs. A run that is pending or running moves
// to cancelled with a conditional update of its row: the step in flight is
// then cancelled upstream and no later step starts; a run waiting for an
// approval never runs. Cancel answers the run's state and whether this
// call cancelled it; a run that already ended answers its final state
// unchanged. Errors: an unknown id (or another session's) wraps
// state.ErrNotFound; others are database failures.
func (r *Runner) Cancel(ctx context.Context, sess *dataplane.Session, id, by string) (Result, bool, error) {
	if err := r.Start(ctx); err != nil {
		return Result{}, false, err
	}
	run, err := r.loadRun(ctx, id)
	if err == nil && sess != nil && run.Session != sess.ID {
		err = fmt.Errorf("%w: no action run has id or approval %q", state.ErrNotFound, id)
	}
	for try := 0; err == nil; try++ {
		if final(run.Status) {
			return run.Result, false, nil
		}
		if try == maxCancelTries {
			return run.Result, false, fmt.Errorf("%w: action run %s kept changing state; cancel it again", state.ErrConflict, run.ID)
		}
		res := cancelledResult(&run, by)
		won, serr := r.markCancelled(ctx, &run, res)
		if serr != nil {
			return Result{}, false, serr
		}
		if won {
			r.interrupt(run.ID)
			return res, true, nil
		}
		run, err = r.loadRun(ctx, run.ID)
	}
	return Result{}, false, err
}

// cancelledResult is the answer for run, pending or running, once by
// cancelled it.
func cancelledResult(run *actionRun, by string) Result {
	what := "the step in flight is cancelled upstream and no later step starts"
	if run.Status == StatusPendingApproval {
		what = fmt.Sprintf("nothing more is sent: approval %s no longer runs it", run.ApprovalID)
	}
	msg := "cancelled by " + by
	return Result{Status: StatusCancelled, RunID: run.ID, ApprovalID: run.ApprovalID, ReviewURL: run.Result.ReviewURL,
		AuditIDs: run.Result.AuditIDs,
		Message:  fmt.Sprintf("Action %s was %s; %s. It is not retried: run it again to start anew.", run.Action, msg, what),
		Error:    &RunError{Reason: policy.ReasonCancelled, Message: msg}}
}

// interrupt ends the step context of run id if it executes in this
// process, without waiting for its next status poll.
func (r *Runner) interrupt(id string) {
	r.mu.Lock()
	cancel := r.running[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel(errCancelled)
	}
}

// begin readies run, running and owned by the caller, to execute: its
// deadline (its timeout from now, or what a step approval left of it) and,
// on its first start, its audit id, with its action.started line. It
// reports false when the run is no longer running (cancelled meanwhile) or
// cannot be saved.
func (r *Runner) begin(ctx context.Context, run *actionRun, inst action.Installed) bool {
	first := run.AuditID == ""
	if first {
		id, err := state.RandomID("a_run_", 20)
		if err != nil {
			r.runFailed(run.ID, err)
			return false
		}
		run.AuditID = id
	}
	if run.Deadline.IsZero() {
		left := run.TimeLeft
		if left <= 0 {
			left = r.timeout(inst)
		}
		run.Deadline, run.TimeLeft = r.now().Add(left), 0
	}
	won, err := r.saveRun(ctx, run, StatusRunning)
	if err != nil {
		r.runFailed(run.ID, err)
	}
	if !won {
		return false
	}
	if first {
		r.emitStarted(run, r.timeout(inst))
	}
	return true
}

// watch returns the context run's steps execute under: it ends at the
// run's deadline (cause errDeadline) or once the run is cancelled (cause
// errCancelled), which stop then no longer notices. ctx must not be one a
// client's leaving cancels.
func (r *Runner) watch(ctx context.Context, run *actionRun) (context.Context, func()) {
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, time.Now().Add(run.Deadline.Sub(r.now())), errDeadline)
	ctx, cancel := context.WithCancelCause(ctx)
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]context.CancelCauseFunc{}
	}
	r.running[run.ID] = cancel
	r.mu.Unlock()
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(r.cancelPoll())
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if st, err := r.runStatus(ctx, run.ID); err == nil && st == StatusCancelled {
				cancel(errCancelled)
				return
			}
		}
	}()
	return ctx, func() {
		close(done)
		<-exited
		r.mu.Lock()
		delete(r.running, run.ID)
		r.mu.Unlock()
		cancel(nil)
		cancelDeadline()
	}
}

// stopped reports whether run must stop at step (before it starts, or
// after inFlight it returned): the run's deadline passed or it was
// cancelled, here or, as the runs table says now, elsewhere. It records
// the end: failed with deadline_exceeded, or cancelled naming the step.
func (r *Runner) stopped(ctx, sctx context.Context, run *actionRun, inst action.Installed, step string, inFlight bool) bool {
	cancelled := errors.Is(context.Cause(sctx), errCancelled)
	if !cancelled && sctx.Err() == nil {
		st, err := r.runStatus(ctx, run.ID)
		if err != nil {
			r.runFailed(run.ID, err)
		}
		cancelled = st == StatusCancelled
	}
	switch {
	case cancelled:
		r.endCancelled(ctx, run, step, inFlight)
	case sctx.Err() != nil:
		msg := fmt.Sprintf("the run's deadline (timeout %s) passed before step %s started; nothing more was sent", r.timeout(inst), step)
		if inFlight {
			msg = fmt.Sprintf("the run's deadline (timeout %s) cut step %s, whose request was cancelled upstream; no later step started", r.timeout(inst), step)
		}
		r.fail(ctx, run, &RunError{Reason: policy.ReasonDeadlineExceeded, Message: msg, Step: step})
	default:
		return false
	}
	return true
}

// endCancelled completes the result of run, which Cancel moved to
// cancelled, with the step it stopped at and the audit ids of the steps
// sent.
func (r *Runner) endCancelled(ctx context.Context, run *actionRun, step string, inFlight bool) {
	cur, err := r.loadRun(ctx, run.ID)
	if err != nil || cur.Status != StatusCancelled || cur.Result.Error == nil {
		if err != nil {
			r.runFailed(run.ID, err)
		}
		return
	}
	cur.Result.Error.Step = step
	cur.Result.AuditIDs = run.Result.AuditIDs
	where := fmt.Sprintf("before step %s started", step)
	if inFlight {
		where = fmt.Sprintf("during step %s, whose request was cancelled upstream", step)
	}
	cur.Result.Message = fmt.Sprintf("Action %s was %s %s; no later step started. It is not retried: run it again to start anew.",
		cur.Action, cur.Result.Error.Message, where)
	cur.NextStep, cur.Outputs = run.NextStep, run.Outputs
	if _, err := r.saveRun(ctx, &cur, StatusCancelled); err != nil {
		r.runFailed(run.ID, err)
	}
	*run = cur
}
