package sandboxapi

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// runAction posts args to the run endpoint as session id.
func (e *sapiEnv) runAction(t *testing.T, id, name string, args any) (int, actions.Result) {
	t.Helper()
	res := e.do(t, id, "POST", "/v1/actions/"+name+"/run", args)
	var out actions.Result
	res.decode(t, &out)
	return res.status, out
}

// actionResult polls the result endpoint once.
func (e *sapiEnv) actionResult(t *testing.T, id, approval string) (int, actions.Result) {
	t.Helper()
	res := e.do(t, id, "GET", "/v1/action-approvals/"+approval+"/result", nil)
	var out actions.Result
	res.decode(t, &out)
	return res.status, out
}

var sendArgs = map[string]any{"to": "alice@example.com", "subject": "secret-subject", "body": "hello"}

func TestActionRunReadCompletes(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	status, res := e.runAction(t, "s1", "get-issue", map[string]any{"id": "ENG-1"})
	if status != 200 || res.Status != actions.StatusCompleted || len(res.AuditIDs) != 1 || res.Error != nil {
		t.Fatalf("%d %+v", status, res)
	}
	out, _ := res.Output.(map[string]any)
	if out["id"] != "canon-ENG-1" || out["number"] != 12345678901234567890.0 {
		t.Fatalf("output %#v", res.Output)
	}
	if hits := e.upstreamHits(); len(hits) != 1 || hits[0].URI != "/issues/ENG-1" {
		t.Fatalf("upstream %+v", hits)
	}
	// The tool name is accepted too; the big number survives in the stored run.
	if _, res := e.runAction(t, "s1", "get_issue", map[string]any{"id": "ENG-2"}); res.Status != actions.StatusCompleted {
		t.Fatalf("by tool name: %+v", res)
	}
	var stored string
	if err := e.db.QueryRowContext(context.Background(), `SELECT result FROM action_runs WHERE action = 'get-issue' LIMIT 1`).Scan(&stored); err != nil ||
		!strings.Contains(stored, "12345678901234567890") {
		t.Fatalf("stored result %s (%v)", stored, err)
	}
}

func TestActionRunRejectsBeforeRunning(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	tests := []struct {
		name, session, action string
		args                  any
		status                int
		has                   string
	}{
		{"unknown action", "s1", "nope", map[string]any{}, 404, "not installed"},
		{"out of scope", "scoped", "get-issue", map[string]any{"id": "1"}, 404, "not available to this session"},
		{"missing input", "s1", "get-issue", map[string]any{}, 400, `missing required input "id"`},
		{"unknown input", "s1", "get-issue", map[string]any{"id": "1", "x": 1}, 400, `unknown input "x"`},
		{"wrong type", "s1", "send-email", map[string]any{"to": 1, "subject": "s", "body": "b"}, 400, `"to"`},
		{"not an object", "s1", "get-issue", `[1]`, 400, "JSON object"},
	}
	for _, tc := range tests {
		res := e.do(t, tc.session, "POST", "/v1/actions/"+tc.action+"/run", tc.args)
		if env := res.envelope(t); res.status != tc.status || !strings.Contains(env.Message, tc.has) {
			t.Errorf("%s: %d %s", tc.name, res.status, res.body)
		}
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
	var runs int
	if err := e.db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM action_runs`).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("%d runs recorded (%v)", runs, err)
	}
}

func TestActionRunApprovalApproved(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	status, res := e.runAction(t, "s1", "send-email", sendArgs)
	if status != 202 || res.Status != actions.StatusPendingApproval || res.ApprovalID == "" ||
		res.ReviewURL != "https://aileron.test/approvals/"+res.ApprovalID ||
		!strings.Contains(res.Message, "check_action_status") || !strings.Contains(res.Message, "aileron approvals approve "+res.ApprovalID) {
		t.Fatalf("%d %+v", status, res)
	}
	id := res.ApprovalID
	a, err := e.store.Get(t.Context(), id)
	if err != nil || a.Preview.Action != "send-email" || a.Preview.Method != "ACTION" || a.Preview.Host != tdGoogleFQN ||
		a.Preview.Summary != `Send "secret-subject" to alice@example.com` || a.Preview.Inputs["to"] != "alice@example.com" {
		t.Fatalf("approval %+v (%v)", a, err)
	}
	// An identical retry answers the same run; different arguments a new one.
	if _, again := e.runAction(t, "s1", "send-email", sendArgs); again.ApprovalID != id || again.Status != actions.StatusPendingApproval {
		t.Fatalf("retry: %+v", again)
	}
	if _, other := e.runAction(t, "s1", "send-email", map[string]any{"to": "bob@example.com", "subject": "s", "body": "b"}); other.ApprovalID == id {
		t.Fatal("different arguments joined the approval")
	}
	if _, r := e.actionResult(t, "s1", id); r.Status != actions.StatusPendingApproval {
		t.Fatalf("result before approval: %+v", r)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 0 {
		t.Fatalf("sent before approval: %d", n)
	}
	if err := e.store.Approve(t.Context(), id, "tester"); err != nil {
		t.Fatal(err)
	}
	e.waitRunEvent(t, audit.EventActionCompleted, id)
	status, res = e.actionResult(t, "s1", id)
	out, _ := res.Output.(map[string]any)
	if status != 200 || res.Status != actions.StatusCompleted || out["id"] != "msg-1" || len(res.AuditIDs) != 1 {
		t.Fatalf("%d %+v", status, res)
	}
	hits := e.upstreamHits()
	if n := e.countHits("POST", "gmail.google.test"); n != 1 {
		t.Fatalf("sent %d times", n)
	}
	for _, h := range hits {
		if h.Host == "gmail.google.test" && string(h.Body) != `{"body":"hello","subject":"secret-subject","to":"alice@example.com"}` {
			t.Errorf("sent body %s", h.Body)
		}
	}
	if a, _ := e.store.Get(t.Context(), id); a.State != dataplane.ApprovalStateConsumed {
		t.Errorf("approval state %s", a.State)
	}
	// The identical call now asks for a new approval: one approval, one run.
	if _, again := e.runAction(t, "s1", "send-email", sendArgs); again.ApprovalID == id || again.Status != actions.StatusPendingApproval {
		t.Fatalf("after completion: %+v", again)
	}
	// Events carry no argument values.
	for i, ev := range e.events.Names() {
		if !strings.HasPrefix(ev, "action.") {
			continue
		}
		for k, v := range e.events.Detail(i) {
			if strings.Contains(v, "secret-subject") || strings.Contains(v, "alice@") {
				t.Errorf("event %s carries %s=%q", ev, k, v)
			}
		}
	}
}

func TestActionRunApprovalDenied(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	_, res := e.runAction(t, "s1", "send-email", sendArgs)
	if err := e.store.Deny(t.Context(), res.ApprovalID, "tester", "not today"); err != nil {
		t.Fatal(err)
	}
	e.waitRunEvent(t, audit.EventActionDenied, res.ApprovalID)
	status, got := e.actionResult(t, "s1", res.ApprovalID)
	if status != 200 || got.Status != actions.StatusDenied || got.Error == nil || got.Error.Reason != "approval_denied" ||
		!strings.Contains(got.Error.Message, "not today") {
		t.Fatalf("%d %+v", status, got)
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
}

// TestActionRunConcurrentPollsSendOnce: with no approval events wired,
// concurrent Result polls race to start the approved run; it runs once.
func TestActionRunConcurrentPollsSendOnce(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{noDecided: true})
	s1 := e.sessions["s1"]
	ctx := context.Background()
	res, err := e.runner.Run(ctx, s1, "send-email", sendArgs)
	if err != nil || res.Status != actions.StatusPendingApproval {
		t.Fatalf("%+v %v", res, err)
	}
	if err := e.store.Approve(t.Context(), res.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := e.runner.Result(ctx, s1, res.ApprovalID)
			if err == nil && got.Status != actions.StatusRunning && got.Status != actions.StatusCompleted {
				err = errors.New("status " + got.Status)
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	e.waitRunEvent(t, audit.EventActionCompleted, res.ApprovalID)
	if got, err := e.runner.Result(ctx, s1, res.ApprovalID); err != nil || got.Status != actions.StatusCompleted {
		t.Fatalf("%+v %v", got, err)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 1 {
		t.Fatalf("sent %d times, want 1", n)
	}
}

// TestActionRunStepApprovalParksAndResumes: a step whose operation needs
// approval parks the run after the steps before it; approval resumes it
// with exactly the parked request.
func TestActionRunStepApprovalParksAndResumes(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	args := map[string]any{"issueId": "ENG-7", "body": "LGTM"}
	status, res := e.runAction(t, "s1", "comment-create", args)
	if status != 202 || res.Status != actions.StatusPendingApproval || res.ApprovalID == "" || len(res.AuditIDs) != 2 ||
		!strings.Contains(res.Message, "Step comment") {
		t.Fatalf("%d %+v", status, res)
	}
	a, err := e.store.Get(t.Context(), res.ApprovalID)
	if err != nil || a.Preview.Action != "" || a.Preview.Operation != "comment-create" || a.Preview.Path != "/issues/canon-ENG-7/comments" {
		t.Fatalf("step approval %+v (%v)", a.Preview, err)
	}
	if n := e.countHits("GET", "api.linear.test"); n != 1 || e.countHits("POST", "api.linear.test") != 0 {
		t.Fatalf("before approval: %+v", e.upstreamHits())
	}
	if err := e.store.Approve(t.Context(), res.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	e.waitRunEvent(t, audit.EventActionCompleted, "")
	_, got := e.actionResult(t, "s1", res.ApprovalID)
	out, _ := got.Output.(map[string]any)
	comment, _ := out["comment"].(map[string]any)
	issue, _ := out["issue"].(map[string]any)
	if got.Status != actions.StatusCompleted || issue["id"] != "canon-ENG-7" || comment == nil {
		t.Fatalf("%+v", got)
	}
	if n := e.countHits("POST", "api.linear.test"); n != 1 || e.countHits("GET", "api.linear.test") != 1 {
		t.Fatalf("upstream %+v", e.upstreamHits())
	}
	for _, h := range e.upstreamHits() {
		if h.Method == "POST" && (h.URI != "/issues/canon-ENG-7/comments" || string(h.Body) != `{"body":"LGTM"}`) {
			t.Errorf("comment sent as %s %s", h.URI, h.Body)
		}
	}
}

func TestActionRunOtherSessionCannotRead(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	_, res := e.runAction(t, "s1", "send-email", sendArgs)
	r := e.do(t, "s2", "GET", "/v1/action-approvals/"+res.ApprovalID+"/result", nil)
	if env := r.envelope(t); r.status != 404 || env.Reason != "not_found" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if _, err := e.runner.Result(context.Background(), e.sessions["s2"], res.ApprovalID); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	// s2's identical run is its own approval, not s1's.
	if _, other := e.runAction(t, "s2", "send-email", sendArgs); other.ApprovalID == res.ApprovalID {
		t.Fatal("s2 joined s1's run")
	}
}

// TestActionRunRestart: a run left running is failed when a runner starts;
// a run approved while no runner listened runs at its session's next poll.
func TestActionRunRestart(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), state.FileName)
	e := newSapiEnv(t, sapiOpts{dbPath: dbPath, noDecided: true})
	ctx := context.Background()
	s1 := e.sessions["s1"]
	pending, err := e.runner.Run(ctx, s1, "send-email", sendArgs)
	if err != nil {
		t.Fatal(err)
	}
	// A run a stopped daemon left running.
	err = testkit.Exec(t, e.db, `INSERT INTO action_runs (id, session, action, version, connector, args, status,
		created_at, updated_at) VALUES ('ar_stuck', 's1', 'get-issue', '1.0.0', ?, '{"id":"1"}', 'running', ?, ?)`,
		tdLinearFQN, state.FormatTime(time.Now()), state.FormatTime(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	// Runs that may be executing on another node of a fleet: one whose
	// deadline has passed is abandoned, one whose deadline has not is
	// left alone until it has.
	for id, deadline := range map[string]time.Time{"ar_late": time.Now().Add(-time.Minute), "ar_live": time.Now().Add(500 * time.Millisecond)} {
		err = testkit.Exec(t, e.db, `INSERT INTO action_runs (id, session, action, version, connector, args, status, deadline,
			created_at, updated_at) VALUES (?, 's1', 'get-issue', '1.0.0', ?, '{"id":"1"}', 'running', ?, ?, ?)`,
			id, tdLinearFQN, state.FormatTime(deadline), state.FormatTime(time.Now()), state.FormatTime(time.Now()))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := e.runner.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Approve(t.Context(), pending.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}

	// A new runner on the same database, as after a daemon restart.
	events := make(chan string, 16)
	r2 := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: e.runner.Catalog,
		OnEvent: func(ev audit.Event) { events <- string(ev.Name) + " " + ev.Details["id"] }}
	t.Cleanup(func() { r2.Close() })
	got, err := r2.Result(ctx, s1, "ar_stuck")
	if err != nil || got.Status != actions.StatusFailed || got.Error == nil || got.Error.Reason != "daemon_stopped" ||
		!strings.Contains(got.Error.Message, "check the upstream") {
		t.Fatalf("stuck run: %+v %v", got, err)
	}
	if got, err := r2.Result(ctx, s1, "ar_late"); err != nil || got.Status != actions.StatusFailed || got.Error == nil || got.Error.Reason != "daemon_stopped" {
		t.Fatalf("run past its deadline: %+v %v", got, err)
	}
	if got, err := r2.Result(ctx, s1, "ar_live"); err != nil || got.Status != actions.StatusRunning {
		t.Fatalf("run within its deadline, which another node may be executing: %+v %v", got, err)
	}
	for stop := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err := r2.Result(ctx, s1, "ar_live")
		if err == nil && got.Status == actions.StatusFailed && got.Error != nil && got.Error.Reason == "daemon_stopped" {
			break
		}
		if time.Now().After(stop) {
			t.Fatalf("run still %+v %v well past its deadline", got, err)
		}
	}
	if got, err := r2.Result(ctx, s1, pending.ApprovalID); err != nil ||
		(got.Status != actions.StatusRunning && got.Status != actions.StatusCompleted) {
		t.Fatalf("approved run: %+v %v", got, err)
	}
	for done := false; !done; {
		select {
		case ev := <-events:
			done = ev == string(audit.EventActionCompleted)+" "+pending.ApprovalID
		case <-time.After(20 * time.Second):
			t.Fatal("the approved run did not complete after the restart")
		}
	}
	if got, _ := r2.Result(ctx, s1, pending.ApprovalID); got.Status != actions.StatusCompleted {
		t.Fatalf("after restart: %+v", got)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 1 {
		t.Fatalf("sent %d times", n)
	}
}

// TestActionRunExpiredApproval: an approval nobody decided fails the run.
func TestActionRunExpiredApproval(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	now := time.Now().UTC()
	clock := &sync.Mutex{}
	e.store.Now = func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	_, res := e.runAction(t, "s1", "send-email", sendArgs)
	clock.Lock()
	now = now.Add(2 * approvals.DefaultTTL)
	clock.Unlock()
	_, got := e.actionResult(t, "s1", res.ApprovalID)
	if got.Status != actions.StatusFailed || got.Error == nil || got.Error.Reason != "approval_expired" {
		t.Fatalf("%+v", got)
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
}

// TestActionRunFailures: a refused or failing step stops the chain and says
// which step and why.
func TestActionRunFailures(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	ctx := context.Background()
	_, res := e.runAction(t, "s1", "get-issue", map[string]any{"id": "a/b"})
	if res.Status != actions.StatusFailed || res.Error == nil || res.Error.Step != "issue" || res.Error.Reason != "invalid_arguments" {
		t.Fatalf("bad path arg: %+v", res)
	}
	// A catalog whose action names an operation the policy lacks.
	_, acts := loadTestdataPackage(t, "linear")
	broken := acts[0]
	m := *broken.Manifest
	m.Steps = []action.Step{{ID: "x", Connector: tdLinearFQN, Op: "missing-op"}}
	broken.Manifest = &m
	cat, err := action.NewCatalog([]action.Installed{broken})
	if err != nil {
		t.Fatal(err)
	}
	r := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: func() *action.Catalog { return cat }}
	t.Cleanup(func() { r.Close() })
	args := map[string]any{}
	for _, in := range m.Inputs {
		args[in.Name] = "v"
	}
	got, err := r.Run(ctx, e.sessions["s1"], m.Name, args)
	if err != nil || got.Status != actions.StatusFailed || got.Error.Reason != "step_unresolved" || got.Error.Step != "x" {
		t.Fatalf("%+v %v", got, err)
	}
	if n := len(e.upstreamHits()); n != 0 {
		t.Fatalf("upstream reached %d times", n)
	}
	b, _ := json.Marshal(got)
	if !strings.Contains(string(b), `"status":"failed"`) {
		t.Errorf("wire form %s", b)
	}
}

// TestActionRunNeedsSession: Run and Result refuse a nil session.
func TestActionRunNeedsSession(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	if _, err := e.runner.Run(context.Background(), nil, "get-issue", nil); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("Run: %v", err)
	}
	if _, err := e.runner.Result(context.Background(), nil, "x"); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("Result: %v", err)
	}
	if _, err := (&actions.Runner{}).Run(context.Background(), &dataplane.Session{ID: "s"}, "x", nil); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("zero runner: %v", err)
	}
}

// TestActionRunSessionGoneRunsNothing: an approval decided after its
// session was deleted sends nothing, although this runner saw the session.
func TestActionRunSessionGoneRunsNothing(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{})
	s1 := e.sessions["s1"]
	var mu sync.Mutex
	live := map[string]*dataplane.Session{"s1": s1}
	e.runner.SessionByID = func(id string) (*dataplane.Session, error) {
		mu.Lock()
		defer mu.Unlock()
		if s, ok := live[id]; ok {
			return s, nil
		}
		return nil, state.ErrNotFound
	}
	res, err := e.runner.Run(context.Background(), s1, "send-email", sendArgs)
	if err != nil || res.Status != actions.StatusPendingApproval {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	delete(live, "s1")
	mu.Unlock()
	if err := e.store.Approve(t.Context(), res.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Close(); err != nil { // waits for the Decided work
		t.Fatal(err)
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 0 {
		t.Fatalf("a deleted session's action sent %d requests", n)
	}
}

// TestActionRunResumedByStart: a run approved while no runner listened is
// resumed by the next runner's Start when that runner can look its session
// up, without waiting for a poll (and without deadlocking Start).
func TestActionRunResumedByStart(t *testing.T) {
	e := newSapiEnv(t, sapiOpts{noDecided: true})
	ctx := context.Background()
	s1 := e.sessions["s1"]
	pending, err := e.runner.Run(ctx, s1, "send-email", sendArgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.runner.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Approve(t.Context(), pending.ApprovalID, "tester"); err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 16)
	r2 := &actions.Runner{DB: e.db, Approvals: e.store, Exec: e.proxy, Policy: e.runner.Policy, Catalog: e.runner.Catalog,
		SessionByID: func(id string) (*dataplane.Session, error) { return e.sessions[id], nil },
		OnEvent:     func(ev audit.Event) { events <- string(ev.Name) + " " + ev.Details["id"] }}
	t.Cleanup(func() { r2.Close() })
	started := make(chan error, 1)
	go func() { started <- r2.Start(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Start did not return")
	}
	for done := false; !done; {
		select {
		case ev := <-events:
			done = ev == string(audit.EventActionCompleted)+" "+pending.ApprovalID
		case <-time.After(20 * time.Second):
			t.Fatal("the approved run did not complete after Start")
		}
	}
	if n := e.countHits("POST", "gmail.google.test"); n != 1 {
		t.Fatalf("sent %d times", n)
	}
}
