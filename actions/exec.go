package actions

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// maxErrorBody bounds the upstream body quoted in a failed step's message.
const maxErrorBody = 512

// advance moves the run with id (or waiting on approval id) on according to
// its approval: denied → denied, expired → failed, approved → running with
// its steps started in the background (only the caller whose compare-and-
// swap wins starts them). It is safe to call concurrently, repeatedly and
// after a restart, and returns the run's state. sess, if not nil, is the
// caller's session.
func (r *Runner) advance(ctx context.Context, id string, sess *dataplane.Session) (actionRun, error) {
	run, err := r.loadRun(ctx, id)
	if err != nil || run.Status != StatusPendingApproval {
		return run, err
	}
	st, reason, err := r.Approvals.State(ctx, run.ApprovalID)
	if errors.Is(err, state.ErrNotFound) {
		err = r.finish(ctx, &run, StatusFailed, policy.ReasonApprovalMissing,
			fmt.Sprintf("approval %s is no longer recorded; run the action again", run.ApprovalID), "", StatusPendingApproval)
		return run, err
	}
	if err != nil {
		return run, err
	}
	step := r.waitingStep(&run)
	switch st {
	case dataplane.ApprovalStatePending:
		return run, nil
	case dataplane.ApprovalStateDenied:
		msg := "a human denied the approval"
		if reason != "" {
			msg += ": " + reason
		}
		err = r.finish(ctx, &run, StatusDenied, policy.ReasonApprovalDenied, msg, step, StatusPendingApproval)
	case dataplane.ApprovalStateExpired:
		err = r.finish(ctx, &run, StatusFailed, policy.ReasonApprovalExpired,
			"the approval expired before it was decided or used; run the action again to ask anew", step, StatusPendingApproval)
	case dataplane.ApprovalStateConsumed:
		if run.actionApproval() {
			// The runner that won the run consumed it after this caller read
			// the row: answer the row as it is now (running or later).
			return r.loadRun(ctx, run.ID)
		}
		err = r.finish(ctx, &run, StatusFailed, policy.ReasonApprovalConsumed,
			fmt.Sprintf("approval %s was used by another identical request, which may have been sent; check the upstream before running the action again", run.ApprovalID),
			step, StatusPendingApproval)
	case dataplane.ApprovalStateApproved:
		return r.resume(ctx, run, sess)
	default:
		err = fmt.Errorf("%w: approval %s has unknown state %q", state.ErrCorruptState, run.ApprovalID, st)
	}
	return run, err
}

// waitingStep names the step a run parked at, "" for an action approval.
func (r *Runner) waitingStep(run *actionRun) string {
	if run.actionApproval() {
		return ""
	}
	inst, ok := r.catalog().Lookup(run.Action)
	if !ok || run.NextStep < 0 || run.NextStep >= len(inst.Steps) {
		return ""
	}
	return inst.Steps[run.NextStep].ID
}

// resume moves approved run to running and, if this caller won, starts its
// steps in the background.
func (r *Runner) resume(ctx context.Context, run actionRun, sess *dataplane.Session) (actionRun, error) {
	s := r.sessionFor(run.Session, sess)
	if s == nil || !r.acquire() {
		return run, nil // starts at the session's next poll, or after a restart
	}
	next := run
	next.Status = StatusRunning
	next.Result = runningResult(&run)
	won, err := r.saveRun(ctx, &next, StatusPendingApproval)
	if err != nil || !won {
		r.wg.Done()
		if err != nil {
			return run, err
		}
		return r.loadRun(ctx, run.ID)
	}
	life, _ := r.background() // resume runs only once Start has set it
	go func() {
		defer r.wg.Done()
		r.continueRun(life, run.ID, s)
	}()
	return next, nil
}

// continueRun executes the approved run id, which this goroutine moved to
// running: for an action approval it first consumes the approval.
func (r *Runner) continueRun(ctx context.Context, id string, sess *dataplane.Session) {
	run, err := r.loadRun(ctx, id)
	if err != nil || run.Status != StatusRunning {
		if err != nil {
			r.runFailed(id, err)
		}
		return
	}
	inst, aerr := r.installedFor(&run)
	if aerr != nil {
		r.fail(ctx, &run, aerr)
		return
	}
	approvedBy := ""
	if !strings.HasPrefix(run.ID, runIDPrefix) {
		approvedBy = run.ID // the run's own action approval
	}
	if run.actionApproval() {
		res, err := r.Approvals.Await(ctx, r.approvalRequest(run.Session, inst, &run), 0)
		switch {
		case err != nil:
			r.fail(ctx, &run, &RunError{Reason: policy.ReasonApprovalUnavailable, Message: "reading the approval failed: " + err.Error()})
			return
		case res.Outcome == dataplane.ApprovalConsumed:
			return // an identical Run consumed it and runs the steps
		case res.Outcome != dataplane.ApprovalApproved && res.ID != run.ApprovalID: // the package changed since
			r.fail(ctx, &run, &RunError{Reason: policy.ReasonActionChanged, Message: fmt.Sprintf(
				"approval %s was given for action %s as its package was when the run started, and %s@%s is now sha256:%s; nothing was sent: approval %s asks about the action as installed now, run the action again",
				run.ApprovalID, inst.Name, inst.Connector, inst.ConnectorVersion, inst.Hash, res.ID)})
			return
		case res.Outcome == dataplane.ApprovalExpired:
			r.fail(ctx, &run, &RunError{Reason: policy.ReasonApprovalExpired, Message: "the approval expired before it was used; run the action again to ask anew"})
			return
		case res.Outcome != dataplane.ApprovalApproved:
			r.fail(ctx, &run, &RunError{Reason: policy.ReasonApprovalUnavailable, Message: fmt.Sprintf("approval %s is no longer approved; run the action again", run.ApprovalID)})
			return
		}
	}
	r.runSteps(ctx, &run, inst, sess, approvedBy)
}

// installedFor returns the installed action run belongs to, if it is still
// installed exactly as when the run started.
func (r *Runner) installedFor(run *actionRun) (action.Installed, *RunError) {
	inst, ok := r.catalog().Lookup(run.Action)
	if !ok || inst.Name != run.Action || inst.Version != run.Version || inst.Connector != run.Connector {
		return inst, &RunError{Reason: policy.ReasonActionChanged, Message: fmt.Sprintf(
			"action %s %s of %s is no longer installed as it was when the run started; nothing more was sent: run the action again",
			run.Action, run.Version, run.Connector)}
	}
	return inst, nil
}

// runSteps executes inst's steps from run.NextStep for sess; run is
// running and owned by this goroutine. Every step runs under the run's
// deadline, and stops once the run is cancelled. It stops at the first
// failure, or parks the run at a step whose operation needs its own
// approval.
func (r *Runner) runSteps(ctx context.Context, run *actionRun, inst action.Installed, sess *dataplane.Session, approvedBy string) {
	pol := r.policy()
	spec := specOf(pol, inst.Connector)
	if msg := pinProblem(pol, inst); msg != "" {
		r.fail(ctx, run, &RunError{Reason: policy.ReasonConnectorChanged, Message: msg})
		return
	}
	if !r.begin(ctx, run, inst) {
		return
	}
	sctx, stop := r.watch(ctx, run)
	defer stop()
	for i := run.NextStep; i < len(inst.Steps); i++ {
		step := inst.Steps[i]
		if r.stopped(ctx, sctx, run, inst, step.ID, false) {
			return
		}
		call, aerr := stepCall(pol, spec, step, run)
		if aerr != nil {
			r.fail(ctx, run, aerr)
			return
		}
		call.Session, call.ApprovedBy, call.Subset = sess, approvedBy, subsetOf(inst, step)
		call.Run = dataplane.RunRef{ID: run.ID, ParentAuditID: run.AuditID}
		res, err := r.Exec.Execute(sctx, call)
		if res.AuditID != "" {
			run.Result.AuditIDs = append(run.Result.AuditIDs, res.AuditID)
		}
		if sctx.Err() != nil && r.stopped(ctx, sctx, run, inst, step.ID, true) {
			return
		}
		if !r.stepDone(ctx, run, inst, i, call, res, err, sess) {
			return
		}
	}
	run.Status = StatusCompleted
	run.Deadline = time.Time{}
	run.Result = Result{Status: StatusCompleted, ApprovalID: run.ApprovalID, ReviewURL: run.Result.ReviewURL,
		Message: fmt.Sprintf("Action %s completed.", inst.Name), AuditIDs: run.Result.AuditIDs, Output: runOutput(inst, run)}
	if _, err := r.saveRun(ctx, run, StatusRunning); err != nil {
		r.runFailed(run.ID, err)
	}
}

// stepDone records the outcome of step i, which call sent: its output
// (and false when the run cannot go on: the step failed, the run parked at
// its approval, or the run was cancelled meanwhile).
func (r *Runner) stepDone(ctx context.Context, run *actionRun, inst action.Installed, i int, call dataplane.Call,
	res dataplane.CallResult, err error, sess *dataplane.Session) bool {
	step := inst.Steps[i]
	if err != nil {
		r.fail(ctx, run, &RunError{Reason: policy.ReasonInternal, Message: err.Error(), Step: step.ID})
		return false
	}
	if ref := res.Refusal; ref != nil {
		if ref.Reason == policy.ReasonApprovalPending && ref.ApprovalID != "" {
			r.park(ctx, run, inst, i, ref, sess)
			return false
		}
		r.fail(ctx, run, &RunError{Reason: ref.Reason, Message: ref.Message, Step: step.ID})
		return false
	}
	if res.Status < 200 || res.Status > 299 {
		r.fail(ctx, run, &RunError{Reason: policy.ReasonUpstreamStatus, Step: step.ID, Message: fmt.Sprintf(
			"%s %s answered HTTP %d: %s", call.Method, call.URL.Path, res.Status, clipBody(res.Body))})
		return false
	}
	run.Outputs[step.ID] = stepOutput(res)
	run.NextStep = i + 1
	if i+1 == len(inst.Steps) {
		return true
	}
	won, err := r.saveRun(ctx, run, StatusRunning)
	if err != nil {
		r.runFailed(run.ID, err)
	}
	if !won && err == nil { // cancelled meanwhile
		r.endCancelled(ctx, run, inst.Steps[i+1].ID, false)
		return false
	}
	return true
}

// park records that run waits at step i for the approval ref names, with
// what is left of its deadline (the wait is not part of it), then
// advances it once in case the approval was already decided.
func (r *Runner) park(ctx context.Context, run *actionRun, inst action.Installed, i int, ref *dataplane.Refusal, sess *dataplane.Session) {
	run.Status, run.ApprovalID, run.NextStep = StatusPendingApproval, ref.ApprovalID, i
	run.TimeLeft, run.Deadline = max(run.Deadline.Sub(r.now()), time.Millisecond), time.Time{}
	run.Result = r.pendingResult(run, inst.Name, inst.Steps[i].ID, ref.ReviewURL)
	won, err := r.saveRun(ctx, run, StatusRunning)
	if err != nil || !won {
		if err != nil {
			r.runFailed(run.ID, err)
		}
		return
	}
	if _, err := r.advance(ctx, run.ID, sess); err != nil {
		r.runFailed(run.ID, err)
	}
}

// fail ends running run with aerr.
func (r *Runner) fail(ctx context.Context, run *actionRun, aerr *RunError) {
	if err := r.finish(ctx, run, StatusFailed, aerr.Reason, aerr.Message, aerr.Step, StatusRunning); err != nil {
		r.runFailed(run.ID, err)
	}
}

// finish moves run, if it is in one of the states from, to final status
// (failed or denied) with the error reason, message and step; *run then
// holds the stored state whether or not this call moved it.
func (r *Runner) finish(ctx context.Context, run *actionRun, status string, reason policy.Reason, msg, step string, from ...string) error {
	next := *run
	next.Status = status
	res := Result{Status: status, ApprovalID: run.ApprovalID, ReviewURL: run.Result.ReviewURL, AuditIDs: run.Result.AuditIDs,
		Error: &RunError{Reason: reason, Message: msg, Step: step}}
	switch {
	case status == StatusDenied:
		res.Message = fmt.Sprintf("A human denied action %s: %s.", run.Action, msg)
	case step != "":
		res.Message = fmt.Sprintf("Action %s failed at step %s: %s", run.Action, step, msg)
	default:
		res.Message = fmt.Sprintf("Action %s failed: %s", run.Action, msg)
	}
	next.Result = res
	won, err := r.saveRun(ctx, &next, from...)
	if err != nil {
		return err
	}
	if won {
		*run = next
		return nil
	}
	cur, err := r.loadRun(ctx, run.ID)
	if err != nil {
		return err
	}
	*run = cur
	return nil
}

// stepCall builds the call of step for run.
func stepCall(pol *policy.Policy, spec *policy.Spec, step action.Step, run *actionRun) (dataplane.Call, *RunError) {
	tool, op, err := action.ResolveStep(spec, step)
	if err != nil {
		return dataplane.Call{}, &RunError{Reason: policy.ReasonStepUnresolved, Step: step.ID,
			Message: err.Error() + "; check that the action's connector is installed and active (aileron connector list)"}
	}
	in, err := step.Args(run.Args, run.Outputs)
	if err != nil {
		return dataplane.Call{}, &RunError{Reason: policy.ReasonStepInputs, Message: err.Error(), Step: step.ID}
	}
	call, _, err := OperationStepCall(pol, step.Connector, tool, op.Name, in) // Step: internal operations reachable
	if err != nil {
		return dataplane.Call{}, &RunError{Reason: policy.ReasonInvalidArguments, Message: err.Error(), Step: step.ID}
	}
	return call, nil
}

// specOf rebuilds the active spec of connector fqn from the compiled
// policy (operations grouped by tool, in spec order); nil if fqn has no
// operations.
func specOf(pol *policy.Policy, fqn string) *policy.Spec {
	var spec *policy.Spec
	for _, o := range pol.Operations() {
		if o.FQN != fqn {
			continue
		}
		if spec == nil {
			spec = &policy.Spec{SchemaVersion: policy.SchemaVersion, Connector: policy.Connector{FQN: o.FQN, Version: o.Version}}
		}
		n := len(spec.Tools)
		if n == 0 || spec.Tools[n-1].Name != o.Tool {
			spec.Tools = append(spec.Tools, policy.Tool{Name: o.Tool})
			n++
		}
		spec.Tools[n-1].Operations = append(spec.Tools[n-1].Operations, *o.Spec)
	}
	return spec
}

// IsJSON reports whether a Content-Type is JSON (application/json or
// any +json type).
func IsJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// stepOutput is a step's decoded output: the upstream's JSON object, or
// {"status": N, "body": JSON value or text}.
func stepOutput(res dataplane.CallResult) map[string]any {
	if IsJSON(res.Header.Get("Content-Type")) && !res.Truncated {
		var v any
		if err := decodeJSONNumbers(res.Body, &v); err == nil {
			if m, ok := v.(map[string]any); ok && m != nil {
				return m
			}
			return map[string]any{"status": res.Status, "body": v}
		}
	}
	return map[string]any{"status": res.Status, "body": strings.ToValidUTF8(string(res.Body), "\uFFFD")}
}

// runOutput is a completed run's output: the single step's, or step id →
// output for several steps.
func runOutput(inst action.Installed, run *actionRun) any {
	if len(inst.Steps) == 1 {
		return run.Outputs[inst.Steps[0].ID]
	}
	out := make(map[string]any, len(inst.Steps))
	for _, s := range inst.Steps {
		out[s.ID] = run.Outputs[s.ID]
	}
	return out
}

// clipBody renders at most maxErrorBody bytes of an upstream body for a
// message.
func clipBody(b []byte) string {
	s := string(b)
	if len(s) > maxErrorBody {
		s = s[:maxErrorBody] + "…"
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.TrimSpace(s) == "" {
		return "(empty body)"
	}
	return s
}
