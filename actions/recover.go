package actions

import (
	"context"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
)

// staleGrace is how long past its deadline a run may still show running
// before a runner takes it for abandoned. The node executing a run ends it
// by its deadline, so one still running then has lost its node.
const staleGrace = 2 * time.Second

const stoppedMessage = "the daemon stopped while the action ran; check the upstream before retrying"

// recoverRuns fails runs interrupted by a stop and advances pending ones.
// A run found running is failed at once when it has no deadline or its
// deadline has passed; otherwise another node of a fleet may be executing
// it, so it is failed only if it is still running once its deadline (and
// staleGrace) has passed.
func (r *Runner) recoverRuns(ctx context.Context) error {
	running, err := r.runIDsWithStatus(ctx, StatusRunning)
	if err != nil {
		return err
	}
	for _, id := range running {
		if err := r.recoverRunning(ctx, id); err != nil {
			return err
		}
	}
	pending, err := r.runIDsWithStatus(ctx, StatusPendingApproval)
	if err != nil {
		return err
	}
	for _, id := range pending {
		run, err := r.loadRun(ctx, id)
		if err != nil {
			return err
		}
		st, _, err := r.Approvals.State(ctx, run.ApprovalID)
		if err == nil && st == dataplane.ApprovalStateConsumed {
			if err := r.finish(ctx, &run, StatusFailed, policy.ReasonDaemonStopped, stoppedMessage, "", StatusPendingApproval); err != nil {
				return err
			}
			continue
		}
		if _, err := r.advance(ctx, id, nil); err != nil {
			r.runFailed(id, err)
		}
	}
	return nil
}

// recoverRunning fails run id, found running, when it is abandoned, or
// checks it again once its deadline and staleGrace have passed.
func (r *Runner) recoverRunning(ctx context.Context, id string) error {
	run, err := r.loadRun(ctx, id)
	if err != nil || run.Status != StatusRunning {
		return err
	}
	if wait := run.Deadline.Add(staleGrace).Sub(r.now()); !run.Deadline.IsZero() && wait > 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.closed {
			r.stale = append(r.stale, time.AfterFunc(wait, func() { r.recheckStale(id) }))
		}
		return nil
	}
	return r.finish(ctx, &run, StatusFailed, policy.ReasonDaemonStopped, stoppedMessage, "", StatusRunning)
}

// recheckStale runs recoverRunning for id from a timer.
func (r *Runner) recheckStale(id string) {
	ctx, ok := r.background()
	if !ok || !r.acquire() {
		return
	}
	defer r.wg.Done()
	if err := r.recoverRunning(ctx, id); err != nil {
		r.runFailed(id, err)
	}
}
