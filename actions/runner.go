package actions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
	"github.com/rs/zerolog"
)

// Approvals is what the runner needs of the approval store: record (or
// join) an approval and read where one stands. It cannot decide one: only
// the admin side does.
type Approvals interface {
	// Await is dataplane.Approvals' Await.
	Await(ctx context.Context, req *dataplane.ApprovalRequest, hold time.Duration) (dataplane.ApprovalResult, error)
	// State reports where approval id stands and, when denied, why; an
	// unknown id wraps state.ErrNotFound.
	State(ctx context.Context, id string) (dataplane.ApprovalState, string, error)
}

// Executor runs a synthetic call through the proxy's one request pipeline
// (policy, approval, injection, audit). *dataplane.Proxy implements it.
type Executor interface {
	Execute(ctx context.Context, c dataplane.Call) (dataplane.CallResult, error)
}

var _ Executor = (*dataplane.Proxy)(nil)

// ErrClosed is wrapped when an action would start after Runner.Close.
var ErrClosed = errors.New("action runner closed")

// actionMethod is the pseudo method of an action approval.
const actionMethod = "ACTION"

// Runner runs installed actions for sessions: the one execution path
// of the sandbox API's run endpoint and the MCP tools.
//
// A run of an action whose manifest says [approval] required first records
// an approval for the action, its version and its exact arguments and
// answers pending_approval with the approval's id (which is also the run's
// id). Once a human approves, the runner consumes the approval and runs the
// steps, each as a call with Call.ApprovedBy set, so approval-gated
// operations inside the action need no second approval. Any other action
// runs at once. A step whose own operation needs approval parks the run
// (pending_approval, waiting on that operation's approval) and resumes it,
// sending exactly the parked request, once approved.
//
// Runs are rows of the action_runs table; state changes are compare-and-
// swaps, so concurrent polls, approval events and restarts never run a step
// twice. A run left running by a daemon that stopped is marked failed when
// the runner starts, or, while its deadline has not passed (another node of
// a fleet may be executing it), once it has (recover.go).
//
// Output of a completed run: the decoded output of its single step or, for
// an action with several steps, an object mapping each step id to its
// output. A step's output is the upstream's JSON object, or
// {"status": HTTP status, "body": JSON value or text} for any other body.
//
// Fields other than DB, Approvals and Exec may be left zero. A
// Runner must not be copied after first use.
type Runner struct {
	// DB holds action_runs. Required.
	DB *state.DB
	// Approvals records action approvals and reports their decisions.
	// Required; *approvals.Store implements it.
	Approvals Approvals
	// Exec runs each step's call. Required.
	Exec Executor
	// Policy is the compiled policy steps resolve against; nil means an
	// empty policy (no step resolves).
	Policy *policy.Holder
	// Catalog returns the installed actions; nil means none.
	Catalog func() *action.Catalog
	// ReviewURL returns where a human reviews approval id; nil means the
	// URL the approval store reports, if any.
	ReviewURL func(id string) string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnEvent receives the run's audit lines: action.pending,
	// action.started (the root of the run's call tree: its audit_id is
	// the parent_audit_id of the steps' lines and of the run's later
	// lines), action.completed, action.failed, action.denied and
	// action.cancelled, each with session and run_id set and details
	// holding the run's id, session, action, version, connector,
	// approval_id and, for failures, reason and step, timeout on
	// action.started, by on action.cancelled, and unpinned (the
	// FQN@VERSION the action requires by a placeholder hash,
	// comma-separated) for an unpinned action: never argument values.
	// nil drops events.
	OnEvent func(ev audit.Event)
	// DefaultTimeout is the deadline of a run whose action sets no
	// timeout, counted from when its steps start; 0 means 2 minutes.
	DefaultTimeout time.Duration
	// CancelPoll is how often a running run reads its status, to notice a
	// cancellation made on another node; 0 means 250ms.
	CancelPoll time.Duration
	// SessionByID returns the live session id, for a run approved while no
	// request of its session is in flight in this process (after a
	// restart). nil means only sessions seen by Run and Result in this
	// process are known; such a run then starts at its session's next
	// Result poll.
	SessionByID func(id string) (*dataplane.Session, error)
	// Log receives failures of background work; nil discards them.
	Log *zerolog.Logger

	startMu sync.Mutex
	started bool
	mu      sync.Mutex
	// life is the context of the runner's own work (resumed runs, approval
	// events): Start's, without its cancellation, since that work outlives
	// the request that started the runner. Guarded by mu.
	life   context.Context
	closed bool
	// stale holds the timers that fail, once past their deadline, runs
	// found running at Start (recover.go).
	stale    []*time.Timer
	sessions map[string]*dataplane.Session
	// running cancels the steps of a run executing in this process, by
	// run id, once the runs table says it was cancelled. Guarded by mu.
	running map[string]context.CancelCauseFunc
	wg      sync.WaitGroup
}

// Start marks the runs a previous daemon left running (and those whose
// action approval it consumed without starting them) as failed, then
// advances runs whose approval was decided meanwhile. Run and Result call
// it on first use; calling it again does nothing. The runner's background
// work runs under the first Start's ctx values but not its cancellation, so
// the daemon starts it at boot with a context of its own. Errors are
// database failures (a later call retries).
func (r *Runner) Start(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if r.started {
		return nil
	}
	r.mu.Lock()
	if r.life == nil {
		r.life = context.WithoutCancel(ctx)
	}
	r.mu.Unlock()
	if err := r.recoverRuns(ctx); err != nil {
		return err
	}
	r.started = true
	return nil
}

// background returns the context of the runner's own work, and false
// before Start.
func (r *Runner) background() (context.Context, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.life, r.life != nil
}

func (r *Runner) check() error {
	if r == nil || r.DB == nil || r.Approvals == nil || r.Exec == nil {
		return fmt.Errorf("%w: actions.Runner needs DB, Approvals and Exec", state.ErrInvalidArgument)
	}
	return nil
}

// Close stops new work from starting and waits for running actions to
// finish. It returns nil.
func (r *Runner) Close() error {
	r.mu.Lock()
	r.closed = true
	for _, t := range r.stale {
		t.Stop()
	}
	r.stale = nil
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// acquire reserves a background goroutine; false once closed.
func (r *Runner) acquire() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// log returns Log, or a logger that discards.
func (r *Runner) log() *zerolog.Logger {
	if r.Log != nil {
		return r.Log
	}
	nop := zerolog.Nop()
	return &nop
}

// runFailed logs a failure of background work on run id.
func (r *Runner) runFailed(id string, err error) {
	r.log().Error().Str("event", "action.run_error").Str("run", id).Err(err).Msg("action run")
}

func (r *Runner) catalog() *action.Catalog {
	if r.Catalog == nil {
		return nil
	}
	return r.Catalog()
}

func (r *Runner) policy() *policy.Policy {
	if r.Policy == nil {
		return nil
	}
	return r.Policy.Load()
}

// remember keeps sess for runs of its session that resume in the
// background.
func (r *Runner) remember(sess *dataplane.Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions == nil {
		r.sessions = map[string]*dataplane.Session{}
	}
	r.sessions[sess.ID] = sess
}

// sessionFor returns the session a run of id executes for: sess if given
// (it just authenticated), else SessionByID's, which is authoritative: a
// session deleted or expired since runs nothing. Only without SessionByID
// is a session seen earlier in this process used. nil if unknown.
func (r *Runner) sessionFor(id string, sess *dataplane.Session) *dataplane.Session {
	if sess != nil && sess.ID == id {
		return sess
	}
	if r.SessionByID == nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.sessions[id]
	}
	s, err := r.SessionByID(id)
	if err != nil || s == nil || s.ID != id {
		return nil
	}
	return s
}

// Actions lists the actions sess may run, sorted by name, with the
// catalog's version.
func (r *Runner) Actions(sess *dataplane.Session) List {
	return ListFor(r.catalog(), sess)
}

// listActions renders cat's actions that sess may run.
func ListFor(cat *action.Catalog, sess *dataplane.Session) List {
	out := List{Version: cat.Version(), Actions: []Info{}}
	for _, a := range cat.List() {
		if sess != nil && !sess.MayUse(a.Connector) {
			continue
		}
		out.Actions = append(out.Actions, Info{Name: a.Name, ToolName: a.ToolName(), Description: a.Description,
			Version: a.Version, Connector: a.Connector, ApprovalRequired: a.Approval.Required, InputSchema: a.InputSchema(),
			Unpinned: a.Unpinned()})
	}
	return out
}

// lookup finds action name (or its tool name) for sess. Unknown or out of
// the session's scope wraps state.ErrNotFound.
func (r *Runner) lookup(sess *dataplane.Session, name string) (action.Installed, error) {
	cat := r.catalog()
	inst, ok := cat.Lookup(name)
	if ok && sess.MayUse(inst.Connector) {
		return inst, nil
	}
	var names []string
	for _, a := range ListFor(cat, sess).Actions {
		names = append(names, a.Name)
	}
	avail := "none"
	if len(names) > 0 {
		avail = strings.Join(names, ", ")
	}
	if ok {
		return inst, fmt.Errorf("%w: action %q comes from connector %s, which is not available to this session; actions available: %s",
			state.ErrNotFound, name, inst.Connector, avail)
	}
	return inst, fmt.Errorf("%w: action %q is not installed; actions available to this session: %s", state.ErrNotFound, name, avail)
}

// Run runs action name (manifest name or tool name) for sess with args.
// It answers the run's state: completed or failed for an action that ran
// now (running if ctx ended first; the run goes on), or pending_approval
// with the approval's id, review URL and instructions when a human must
// approve first. Calling Run again with identical arguments while that
// approval is pending answers the same run.
//
// Errors: an action that is not installed or not available to sess wraps
// state.ErrNotFound; arguments that do not fit the action's inputs wrap
// state.ErrInvalidArgument and action.ErrInvalidArgs, naming the input; after
// Close, ErrClosed; others are database failures. A run that fails
// is not an error: its result says why.
func (r *Runner) Run(ctx context.Context, sess *dataplane.Session, name string, args map[string]any) (Result, error) {
	return r.run(ctx, sess, name, args, false)
}

// RunAttached is Run, except that ctx ending before the run does cancels
// the run (by is then the caller that left: an MCP tool call cancelled by
// notifications/cancelled), where Run lets it go on. A run waiting for
// approval answers at once, as with Run, and is not cancelled.
func (r *Runner) RunAttached(ctx context.Context, sess *dataplane.Session, name string, args map[string]any) (Result, error) {
	return r.run(ctx, sess, name, args, true)
}

// run is Run, or RunAttached with cancelOnDone.
func (r *Runner) run(ctx context.Context, sess *dataplane.Session, name string, args map[string]any, cancelOnDone bool) (Result, error) {
	if err := r.Start(ctx); err != nil {
		return Result{}, err
	}
	if sess == nil {
		return Result{}, fmt.Errorf("%w: Run needs the caller's session", state.ErrInvalidArgument)
	}
	inst, err := r.lookup(sess, name)
	if err != nil {
		return Result{}, err
	}
	if err := inst.CheckArgs(args); err != nil {
		return Result{}, fmt.Errorf("%w: %w", state.ErrInvalidArgument, err)
	}
	canon, norm, err := canonicalArgs(args)
	if err != nil {
		return Result{}, err
	}
	r.remember(sess)
	run := &actionRun{Session: sess.ID, Action: inst.Name, Version: inst.Version, Connector: inst.Connector,
		ArgsJSON: canon, Args: norm, Outputs: map[string]map[string]any{}}
	if inst.Approval.Required {
		return r.runGated(ctx, sess, inst, run)
	}
	return r.runNow(ctx, sess, inst, run, cancelOnDone)
}

// runNow runs an action without an action approval and waits for it (or
// for ctx; with cancelOnDone, ctx ending cancels the run).
func (r *Runner) runNow(ctx context.Context, sess *dataplane.Session, inst action.Installed, run *actionRun, cancelOnDone bool) (Result, error) {
	id, err := newRunID()
	if err != nil {
		return Result{}, err
	}
	run.ID, run.Status = id, StatusRunning
	run.Result = Result{Message: fmt.Sprintf("Action %s is running.", inst.Name)}
	if !r.acquire() {
		return Result{}, fmt.Errorf("%w: the daemon is shutting down; run action %s again once it is back", ErrClosed, inst.Name)
	}
	if _, err := r.insertRun(ctx, run); err != nil {
		r.wg.Done()
		return Result{}, err
	}
	done := make(chan struct{})
	go func() {
		defer r.wg.Done()
		defer close(done)
		r.runSteps(context.WithoutCancel(ctx), run, inst, sess, "")
	}()
	select {
	case <-done:
	case <-ctx.Done():
		if cancelOnDone {
			res, _, err := r.Cancel(context.WithoutCancel(ctx), sess, id, "the client that started it (MCP notifications/cancelled, or it left)")
			return res, err
		}
	}
	cur, err := r.loadRun(context.WithoutCancel(ctx), id)
	return cur.Result, err
}

// runGated registers (or joins) the action approval for run and answers
// the run's state.
func (r *Runner) runGated(ctx context.Context, sess *dataplane.Session, inst action.Installed, run *actionRun) (Result, error) {
	id, ok, err := r.findLiveRun(ctx, sess.ID, inst.Name, inst.Version, run.ArgsJSON)
	if err != nil {
		return Result{}, err
	}
	if ok {
		cur, err := r.advance(ctx, id, sess)
		if err != nil {
			return Result{}, err
		}
		if cur.Status == StatusPendingApproval || cur.Status == StatusRunning {
			return cur.Result, nil
		}
	}
	res, err := r.Approvals.Await(ctx, r.approvalRequest(sess.ID, inst, run), 0)
	if err != nil {
		return Result{}, fmt.Errorf("recording the approval for action %s: %w", inst.Name, err)
	}
	run.ID, run.ApprovalID, run.Status = res.ID, res.ID, StatusPendingApproval
	run.Result = r.pendingResult(run, inst.Name, "", res.ReviewURL)
	switch res.Outcome {
	case dataplane.ApprovalPending:
		inserted, err := r.insertRun(ctx, run)
		if err != nil {
			return Result{}, err
		}
		if inserted {
			r.emit(run)
		}
		cur, err := r.advance(ctx, run.ID, sess)
		return cur.Result, err
	case dataplane.ApprovalApproved:
		return r.startConsumed(ctx, sess, inst, run)
	}
	return Result{}, fmt.Errorf("%w: approval %s of action %s is already decided (%d); run the action again",
		state.ErrConflict, res.ID, inst.Name, res.Outcome)
}

// startConsumed runs run, whose action approval this caller has just
// consumed (an identical Run raced a human's approval): consuming it is
// the right, and the duty, to run the steps.
func (r *Runner) startConsumed(ctx context.Context, sess *dataplane.Session, inst action.Installed, run *actionRun) (Result, error) {
	ctx = context.WithoutCancel(ctx)
	if _, err := r.insertRun(ctx, run); err != nil {
		return Result{}, err
	}
	cur, err := r.loadRun(ctx, run.ID)
	if err != nil {
		return Result{}, err
	}
	if !r.acquire() {
		err := r.finish(ctx, &cur, StatusFailed, policy.ReasonDaemonStopped,
			"the daemon shut down after the approval was used and before the action ran; nothing was sent: run the action again", "",
			StatusPendingApproval, StatusRunning)
		return cur.Result, err
	}
	cur.Status = StatusRunning
	cur.Result = runningResult(&cur)
	won, err := r.saveRun(ctx, &cur, StatusPendingApproval, StatusRunning)
	if err != nil || !won { // cancelled meanwhile: the approval no longer runs it
		r.wg.Done()
		if err != nil {
			return Result{}, err
		}
		cur, err = r.loadRun(ctx, run.ID)
		return cur.Result, err
	}
	res := cur.Result
	go func() {
		defer r.wg.Done()
		r.runSteps(ctx, &cur, inst, sess, cur.ID)
	}()
	return res, nil
}

// Result reports the run waiting (or that waited) on approval id, or the
// run with id, for sess, advancing it first: a decided approval moves it to
// running (its steps start in the background), denied or failed. Errors: an
// unknown id or another session's wraps state.ErrNotFound; others are database
// failures.
func (r *Runner) Result(ctx context.Context, sess *dataplane.Session, id string) (Result, error) {
	if err := r.Start(ctx); err != nil {
		return Result{}, err
	}
	if sess == nil {
		return Result{}, fmt.Errorf("%w: Result needs the caller's session", state.ErrInvalidArgument)
	}
	run, err := r.loadRun(ctx, id)
	if err == nil && run.Session != sess.ID {
		err = fmt.Errorf("%w: no action run has id or approval %q", state.ErrNotFound, id)
	}
	if err != nil {
		return Result{}, err
	}
	r.remember(sess)
	run, err = r.advance(ctx, run.ID, sess)
	return run.Result, err
}

// Decided is the hook for approval events (approval.approved, denied,
// expired with the approval's id): it advances the run waiting on id, if
// any, in the background. It never blocks and never calls back into the
// approval store synchronously. Before Start it does nothing: Start
// advances every run whose approval was decided meanwhile.
func (r *Runner) Decided(id string) {
	ctx, started := r.background()
	if id == "" || !started || !r.acquire() {
		return
	}
	go func() {
		defer r.wg.Done()
		if _, err := r.advance(ctx, id, nil); err != nil && !errors.Is(err, state.ErrNotFound) {
			r.runFailed(id, err)
		}
	}()
}

// approvalRequest is the approval of run of inst: bound to the action, its
// version and the canonical arguments.
func (r *Runner) approvalRequest(session string, inst action.Installed, run *actionRun) *dataplane.ApprovalRequest {
	summary, err := inst.PreviewText(run.Args)
	if err != nil || summary == "" {
		summary = inst.Intent
	}
	if summary == "" {
		summary = "Run action " + inst.Name
	}
	version := inst.ConnectorVersion
	if version == "" {
		version = inst.Version
	}
	path := "/actions/" + inst.Name
	return &dataplane.ApprovalRequest{
		Session: session, Method: actionMethod, Host: inst.Connector, Path: path,
		Digest: actionDigest(inst.Name, inst.Version, inst.Hash, run.ArgsJSON),
		Preview: dataplane.Preview{Action: inst.Name, Connector: inst.Connector, Version: version, Tool: "action",
			Operation: inst.Name, Summary: summary, Method: actionMethod, Host: inst.Connector, Path: path, Inputs: run.Args},
	}
}

// actionDigest is hex SHA-256 over "action", name, version, the hash of
// the package holding the action and the canonical arguments, each
// length-prefixed: an approval covers the action's bytes as they were
// when it was asked for, not whatever is installed under the same names
// when it is used.
func actionDigest(name, version, pkgHash, canonArgs string) string {
	h := sha256.New()
	for _, part := range []string{"action", name, version, pkgHash, canonArgs} {
		io.WriteString(h, strconv.Itoa(len(part))+":"+part+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// reviewURL is where a human decides approval id.
func (r *Runner) reviewURL(id, fallback string) string {
	if r.ReviewURL != nil {
		return r.ReviewURL(id)
	}
	return fallback
}

// pendingResult is the answer for run waiting on its approval; step names
// the step whose operation needs it ("" for the action's own approval).
func (r *Runner) pendingResult(run *actionRun, name, step, fallbackURL string) Result {
	id := run.ApprovalID
	url := r.reviewURL(id, fallbackURL)
	what := fmt.Sprintf("Action %s needs a human's approval before it runs", name)
	if step != "" {
		what = fmt.Sprintf("Step %s of action %s needs a human's approval before it is sent", step, name)
	}
	where := fmt.Sprintf("Ask the user to approve it with `aileron approvals approve %s` on the host", id)
	if url != "" {
		where = fmt.Sprintf("Ask the user to review it at %s or approve it with `aileron approvals approve %s` on the host", url, id)
	}
	msg := fmt.Sprintf("%s (approval %s). %s; then call check_action_status with approval_id %q (GET /v1/action-approvals/%s/result) until the status is completed, denied, failed or cancelled.",
		what, id, where, id, id)
	return Result{Status: StatusPendingApproval, ApprovalID: id, ReviewURL: url, Message: msg,
		AuditIDs: run.Result.AuditIDs}
}

// runningResult is the answer for run while its steps execute.
func runningResult(run *actionRun) Result {
	msg := fmt.Sprintf("Action %s is running.", run.Action)
	if run.ApprovalID != "" {
		msg = fmt.Sprintf("Action %s was approved and is running; call check_action_status with approval_id %q again for the result.", run.Action, run.ApprovalID)
	}
	return Result{Status: StatusRunning, ApprovalID: run.ApprovalID, ReviewURL: run.Result.ReviewURL,
		Message: msg, AuditIDs: run.Result.AuditIDs}
}
