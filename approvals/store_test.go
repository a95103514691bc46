package approvals

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

type testStore struct {
	*Store
	clock  *testkit.Clock
	events *testkit.Events
	// waiting receives an approval id each time an Await starts waiting.
	waiting chan string
}

// newTestStore returns a store on the database at path with a fake clock,
// an event log, and no DB re-check (Poll one hour) unless poll is set.
func newTestStore(t *testing.T, path string, poll time.Duration) *testStore {
	t.Helper()
	if poll == 0 {
		poll = time.Hour
	}
	ts := &testStore{
		clock:   testkit.NewClock(),
		events:  &testkit.Events{},
		waiting: make(chan string, 100),
	}
	ts.Store = &Store{
		DB:        testkit.OpenDB(t, path),
		TTL:       10 * time.Minute,
		Now:       ts.clock.Now,
		ReviewURL: func(id string) string { return "http://aileron.local/approvals/" + id },
		OnEvent:   ts.events.Record,
		Poll:      poll,
		waitHook:  func(id string) { ts.waiting <- id },
	}
	return ts
}

func testRequest(session, body string) *dataplane.ApprovalRequest {
	return &dataplane.ApprovalRequest{
		Session: session,
		Method:  "POST",
		Host:    "api.example.com",
		Port:    443,
		Path:    "/v1/messages?token=secret",
		Digest:  "digest-of-" + body,
		Preview: dataplane.Preview{
			Connector: "example/mail", Version: "1.0.0", Tool: "mail", Operation: "send",
			Method: "POST", Host: "api.example.com", Path: "/v1/messages?token=secret",
			Inputs: map[string]any{"to": "alice@example.com"}, BodyBytes: len(body),
		},
	}
}

type awaitResult struct {
	res dataplane.ApprovalResult
	err error
}

// awaitAsync runs Await in a goroutine and returns its result channel once
// the call is waiting for a decision.
func (ts *testStore) awaitAsync(t *testing.T, ctx context.Context, req *dataplane.ApprovalRequest) (string, <-chan awaitResult) {
	t.Helper()
	out := make(chan awaitResult, 1)
	go func() {
		res, err := ts.Await(ctx, req, time.Minute)
		out <- awaitResult{res, err}
	}()
	select {
	case id := <-ts.waiting:
		return id, out
	case r := <-out:
		t.Fatalf("Await returned %+v, %v before waiting", r.res, r.err)
	}
	return "", nil
}

func mustAwait(t *testing.T, s *Store, req *dataplane.ApprovalRequest, want dataplane.ApprovalOutcome) dataplane.ApprovalResult {
	t.Helper()
	res, err := s.Await(context.Background(), req, 0)
	if err != nil || res.Outcome != want {
		t.Fatalf("Await(%s) = %+v, %v; want outcome %d", req.Digest, res, err, want)
	}
	return res
}

func TestAwaitHoldTimeoutLeavesPending(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := testRequest("s_one", "A")
	res, err := ts.Await(context.Background(), req, time.Millisecond)
	if err != nil || res.Outcome != dataplane.ApprovalPending {
		t.Fatalf("Await = %+v, %v; want pending", res, err)
	}
	if !strings.HasPrefix(res.ID, "ap_") || res.ReviewURL != "http://aileron.local/approvals/"+res.ID {
		t.Errorf("result id %q, review URL %q", res.ID, res.ReviewURL)
	}
	again := mustAwait(t, ts.Store, req, dataplane.ApprovalPending)
	if again.ID != res.ID {
		t.Errorf("identical retry got approval %s, want to join %s", again.ID, res.ID)
	}
	list, err := ts.List(t.Context(), Filter{State: dataplane.ApprovalStatePending})
	if err != nil || len(list) != 1 {
		t.Fatalf("List(pending) = %v, %v; want one", list, err)
	}
	a := list[0]
	if a.ID != res.ID || a.Session != "s_one" || a.Digest != req.Digest || a.Preview.Operation != "send" ||
		a.Preview.Inputs["to"] != "alice@example.com" || !a.ExpiresAt.Equal(a.CreatedAt.Add(10*time.Minute)) || a.DecidedAt != nil {
		t.Errorf("listed approval = %+v", a)
	}
	if got := ts.events.Names(); len(got) != 1 || got[0] != string(audit.EventApprovalRequested) {
		t.Fatalf("events = %v, want one approval.requested", got)
	}
	d := ts.events.Detail(0)
	if d["approval_id"] != res.ID || d["path"] != "/v1/messages" || d["operation"] != "send" {
		t.Errorf("requested event details = %v (the path must carry no query)", d)
	}
}

func TestApproveWakesWaiter(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := testRequest("s_one", "A")
	id, out := ts.awaitAsync(t, context.Background(), req)
	if err := ts.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil || r.res.Outcome != dataplane.ApprovalApproved || r.res.ID != id {
		t.Fatalf("waiter got %+v, %v; want approved %s", r.res, r.err, id)
	}
	a, err := ts.Get(t.Context(), id)
	if err != nil || a.State != dataplane.ApprovalStateConsumed || a.DecidedBy != "alice" || a.DecidedAt == nil {
		t.Errorf("Get = %+v, %v; want consumed, decided by alice", a, err)
	}
	if got := strings.Join(ts.events.Names(), ","); got != "approval.requested,approval.approved" {
		t.Errorf("events = %s", got)
	}
	// The approval was used: the next identical request asks again.
	if next := mustAwait(t, ts.Store, req, dataplane.ApprovalPending); next.ID == id {
		t.Errorf("retry after consumption reused approval %s", id)
	}
}

func TestConcurrentAwaitsConsumeOnce(t *testing.T) {
	const n = 50
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := testRequest("s_one", "A")
	out := make(chan awaitResult, n)
	for range n {
		go func() {
			res, err := ts.Await(context.Background(), req, time.Minute)
			out <- awaitResult{res, err}
		}()
	}
	var id string
	for i := range n {
		got := <-ts.waiting
		if i > 0 && got != id {
			t.Fatalf("identical requests waited on approvals %s and %s", id, got)
		}
		id = got
	}
	if err := ts.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	counts := map[dataplane.ApprovalOutcome]int{}
	for range n {
		r := <-out
		if r.err != nil {
			t.Fatalf("Await: %v", r.err)
		}
		counts[r.res.Outcome]++
	}
	if counts[dataplane.ApprovalApproved] != 1 || counts[dataplane.ApprovalConsumed] != n-1 {
		t.Fatalf("outcomes = %v; want exactly 1 approved and %d consumed", counts, n-1)
	}
}

func TestApprovalBindsToDigestAndSession(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	a := mustAwait(t, ts.Store, testRequest("s_one", "A"), dataplane.ApprovalPending)
	b := mustAwait(t, ts.Store, testRequest("s_one", "B"), dataplane.ApprovalPending)
	other := mustAwait(t, ts.Store, testRequest("s_two", "A"), dataplane.ApprovalPending)
	if a.ID == b.ID || a.ID == other.ID {
		t.Fatalf("distinct requests share an approval: %s %s %s", a.ID, b.ID, other.ID)
	}
	if err := ts.Approve(t.Context(), a.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*dataplane.ApprovalRequest{testRequest("s_one", "B"), testRequest("s_two", "A")} {
		if res := mustAwait(t, ts.Store, req, dataplane.ApprovalPending); res.ID == a.ID {
			t.Errorf("%s/%s released by approval of s_one/A", req.Session, req.Digest)
		}
	}
	if res := mustAwait(t, ts.Store, testRequest("s_one", "A"), dataplane.ApprovalApproved); res.ID != a.ID {
		t.Errorf("approved request consumed %s, want %s", res.ID, a.ID)
	}
}

func TestDenyWithReason(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := testRequest("s_one", "A")
	id, out := ts.awaitAsync(t, context.Background(), req)
	if err := ts.Deny(t.Context(), id, "bob", "wrong recipient"); err != nil {
		t.Fatal(err)
	}
	r := <-out
	if r.err != nil || r.res.Outcome != dataplane.ApprovalDenied || r.res.Reason != "wrong recipient" {
		t.Fatalf("waiter got %+v, %v; want denied with reason", r.res, r.err)
	}
	a, err := ts.Get(t.Context(), id)
	if err != nil || a.State != dataplane.ApprovalStateDenied || a.Reason != "wrong recipient" || a.DecidedBy != "bob" {
		t.Errorf("Get = %+v, %v", a, err)
	}
	last := ts.events.Detail(-1)
	if ev := ts.events.Names(); ev[len(ev)-1] != string(audit.EventApprovalDenied) || last["reason"] != "wrong recipient" || last["decided_by"] != "bob" {
		t.Errorf("last event %s %v", ev[len(ev)-1], last)
	}
	if err := ts.Deny(t.Context(), id, "bob", strings.Repeat("x", 2000)); !errors.Is(err, state.ErrInvalidArgument) {
		t.Errorf("overlong reason: err = %v, want state.ErrInvalidArgument", err)
	}
}

func TestDecideConflicts(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	tests := []struct {
		name   string
		first  func(id string) error
		second func(id string) error
		state  string
	}{
		{"approve twice", func(id string) error { return ts.Approve(t.Context(), id, "a") },
			func(id string) error { return ts.Approve(t.Context(), id, "b") }, "approved"},
		{"deny after approve", func(id string) error { return ts.Approve(t.Context(), id, "a") },
			func(id string) error { return ts.Deny(t.Context(), id, "b", "no") }, "approved"},
		{"approve after deny", func(id string) error { return ts.Deny(t.Context(), id, "a", "no") },
			func(id string) error { return ts.Approve(t.Context(), id, "b") }, "denied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustAwait(t, ts.Store, testRequest("s_one", tt.name), dataplane.ApprovalPending)
			if err := tt.first(res.ID); err != nil {
				t.Fatal(err)
			}
			err := tt.second(res.ID)
			if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "is "+tt.state) {
				t.Fatalf("case %d: err = %v, want state.ErrConflict saying %s", i, err, tt.state)
			}
		})
	}
	if err := ts.Approve(t.Context(), "ap_nope", "a"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Approve(unknown): err = %v, want state.ErrNotFound", err)
	}
	if _, err := ts.Get(t.Context(), "ap_nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(unknown): err = %v, want state.ErrNotFound", err)
	}
}

func TestApprovalTTL(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := testRequest("s_one", "A")
	first := mustAwait(t, ts.Store, req, dataplane.ApprovalPending)
	ts.clock.Advance(10*time.Minute - time.Second)
	if n, err := ts.Expire(t.Context()); err != nil || n != 0 {
		t.Fatalf("Expire before TTL = %d, %v; want 0", n, err)
	}
	ts.clock.Advance(time.Second)
	if n, err := ts.Expire(t.Context()); err != nil || n != 1 {
		t.Fatalf("Expire at TTL = %d, %v; want 1", n, err)
	}
	if ev := ts.events.Names(); ev[len(ev)-1] != string(audit.EventApprovalExpired) {
		t.Errorf("events = %v, want approval.expired last", ev)
	}
	if err := ts.Approve(t.Context(), first.ID, "alice"); !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("Approve(expired) err = %v, want state.ErrConflict saying expired", err)
	}
	// A retry after expiry asks again.
	second, out := ts.awaitAsync(t, context.Background(), req)
	if second == first.ID {
		t.Fatalf("retry joined expired approval %s", second)
	}
	// A waiter sees the expiry when Expire runs.
	ts.clock.Advance(11 * time.Minute)
	if _, err := ts.Expire(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || r.res.Outcome != dataplane.ApprovalExpired {
		t.Fatalf("waiter got %+v, %v; want expired", r.res, r.err)
	}
	// An approval nobody uses within the TTL lapses too.
	third := mustAwait(t, ts.Store, req, dataplane.ApprovalPending)
	if err := ts.Approve(t.Context(), third.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(10 * time.Minute)
	if res := mustAwait(t, ts.Store, req, dataplane.ApprovalPending); res.ID == third.ID {
		t.Errorf("lapsed approval %s was still usable", third.ID)
	}
	if a, err := ts.Get(t.Context(), third.ID); err != nil || a.State != dataplane.ApprovalStateExpired {
		t.Errorf("lapsed approval = %+v, %v; want expired", a, err)
	}
}

func TestApprovalsSurviveRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), state.FileName)
	req := testRequest("s_one", "A")
	before := newTestStore(t, path, 0)
	first := mustAwait(t, before.Store, req, dataplane.ApprovalPending)
	if err := before.DB.Close(); err != nil {
		t.Fatal(err)
	}

	after := newTestStore(t, path, 0)
	list, err := after.List(t.Context(), Filter{State: dataplane.ApprovalStatePending, Session: "s_one"})
	if err != nil || len(list) != 1 || list[0].ID != first.ID {
		t.Fatalf("List after restart = %+v, %v; want %s", list, err, first.ID)
	}
	if err := after.Approve(t.Context(), first.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if res := mustAwait(t, after.Store, req, dataplane.ApprovalApproved); res.ID != first.ID {
		t.Errorf("retry consumed %s, want %s", res.ID, first.ID)
	}
	if res := mustAwait(t, after.Store, req, dataplane.ApprovalPending); res.ID == first.ID {
		t.Errorf("second retry reused approval %s", first.ID)
	}
	if list, err := after.List(t.Context(), Filter{Session: "s_other"}); err != nil || len(list) != 0 {
		t.Errorf("List(other session) = %v, %v; want none", list, err)
	}
}

func TestDecisionFromAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), state.FileName)
	daemon := newTestStore(t, path, 5*time.Millisecond)
	admin := newTestStore(t, path, 0) // its own *state.DB: another process's view
	id, out := daemon.awaitAsync(t, context.Background(), testRequest("s_one", "A"))
	if err := admin.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || r.res.Outcome != dataplane.ApprovalApproved {
		t.Fatalf("waiter got %+v, %v; want approved via the database re-check", r.res, r.err)
	}
}

func TestAwaitContextCancelled(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	ctx, cancel := context.WithCancel(context.Background())
	id, out := ts.awaitAsync(t, ctx, testRequest("s_one", "A"))
	cancel()
	r := <-out
	if !errors.Is(r.err, context.Canceled) || r.res.Outcome != dataplane.ApprovalPending || r.res.ID != id {
		t.Fatalf("Await = %+v, %v; want pending %s with context.Canceled", r.res, r.err, id)
	}
	if a, err := ts.Get(t.Context(), id); err != nil || a.State != dataplane.ApprovalStatePending {
		t.Errorf("approval after cancel = %+v, %v; want still pending", a, err)
	}
	ts.mu.Lock()
	left := len(ts.waiters)
	ts.mu.Unlock()
	if left != 0 {
		t.Errorf("%d waiter entries left behind", left)
	}
}

func TestApprovalsInvalidArguments(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	tests := []struct {
		name string
		call func() error
	}{
		{"nil request", func() error { _, err := ts.Await(context.Background(), nil, 0); return err }},
		{"no digest", func() error {
			_, err := ts.Await(context.Background(), &dataplane.ApprovalRequest{Session: "s"}, 0)
			return err
		}},
		{"no session", func() error {
			_, err := ts.Await(context.Background(), &dataplane.ApprovalRequest{Digest: "d"}, 0)
			return err
		}},
		{"unknown state", func() error { _, err := ts.List(t.Context(), Filter{State: "maybe"}); return err }},
		{"no DB", func() error { return (&Store{}).Approve(t.Context(), "ap_x", "a") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, state.ErrInvalidArgument) {
				t.Fatalf("err = %v, want state.ErrInvalidArgument", err)
			}
		})
	}
}

// TestCoversOnlyAConsumedActionApprovalOfTheSameSession: the data plane
// lets approval-gated operations of an action through on Covers alone, so
// nothing but this session's approved-and-taken action approval may pass.
func TestCoversOnlyAConsumedActionApprovalOfTheSameSession(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	ctx := context.Background()
	actionReq := func(body string) *dataplane.ApprovalRequest {
		r := testRequest("s_one", body)
		r.Preview.Action = "send-email"
		return r
	}
	pending := mustAwait(t, ts.Store, actionReq("pending"), dataplane.ApprovalPending)
	approved := mustAwait(t, ts.Store, actionReq("approved"), dataplane.ApprovalPending)
	consumed := mustAwait(t, ts.Store, actionReq("consumed"), dataplane.ApprovalPending)
	request := mustAwait(t, ts.Store, testRequest("s_one", "request"), dataplane.ApprovalPending)
	denied := mustAwait(t, ts.Store, actionReq("denied"), dataplane.ApprovalPending)
	for _, id := range []string{approved.ID, consumed.ID, request.ID} {
		if err := ts.Approve(t.Context(), id, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Deny(t.Context(), denied.ID, "alice", "no"); err != nil {
		t.Fatal(err)
	}
	mustAwait(t, ts.Store, actionReq("consumed"), dataplane.ApprovalApproved)
	mustAwait(t, ts.Store, testRequest("s_one", "request"), dataplane.ApprovalApproved)
	const conn = "example/mail"
	for _, tc := range []struct {
		name, id, session, connector string
		covers                       bool
	}{
		{"consumed action approval", consumed.ID, "s_one", conn, true},
		{"another session's", consumed.ID, "s_two", conn, false},
		{"another connector's operation", consumed.ID, "s_one", "example/other", false},
		{"pending", pending.ID, "s_one", conn, false},
		{"approved, not yet taken", approved.ID, "s_one", conn, false},
		{"denied", denied.ID, "s_one", conn, false},
		{"a consumed request-level approval", request.ID, "s_one", conn, false},
		{"unknown id", "ap_nosuchapproval000000", "s_one", conn, false},
	} {
		if err := ts.Covers(ctx, tc.id, tc.session, tc.connector); (err == nil) != tc.covers {
			t.Errorf("%s: Covers = %v, want covers=%v", tc.name, err, tc.covers)
		}
	}
}

// TestMaxPendingPerSession: a session may have at most MaxPendingPerSession
// pending approvals; one more is refused with ErrApprovalLimit, while an
// identical retry still joins its approval, other sessions are unaffected,
// and a decision makes room.
func TestMaxPendingPerSession(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	ts.MaxPendingPerSession = 2
	ctx := context.Background()
	first, err := ts.Await(ctx, testRequest("s_a", "one"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Await(ctx, testRequest("s_a", "two"), 0); err != nil {
		t.Fatal(err)
	}
	_, err = ts.Await(ctx, testRequest("s_a", "three"), 0)
	if !errors.Is(err, dataplane.ErrApprovalLimit) || !strings.Contains(err.Error(), "approval.max_pending_per_session") {
		t.Fatalf("third pending approval: %v, want ErrApprovalLimit naming the setting", err)
	}
	if again, err := ts.Await(ctx, testRequest("s_a", "one"), 0); err != nil || again.ID != first.ID {
		t.Errorf("identical retry: %+v %v, want it to join %s", again, err, first.ID)
	}
	if _, err := ts.Await(ctx, testRequest("s_b", "three"), 0); err != nil {
		t.Errorf("another session: %v", err)
	}
	if err := ts.Deny(ctx, first.ID, "t", "no"); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Await(ctx, testRequest("s_a", "three"), 0); err != nil {
		t.Errorf("after a decision: %v, want room for one more", err)
	}
}

// TestUnknownRequestApproval: the approval of a request no operation
// matches (ask mode) keeps its proposal id, which every event about it
// carries in place of an operation; identical requests join it and it is
// used once.
func TestUnknownRequestApproval(t *testing.T) {
	ts := newTestStore(t, filepath.Join(t.TempDir(), state.FileName), 0)
	req := &dataplane.ApprovalRequest{Session: "s_one", Method: "GET", Host: "new.example.com", Port: 443, Path: "/v1/x",
		Digest: "digest-unknown", Preview: dataplane.Preview{Method: "GET", Host: "new.example.com", Path: "/v1/x", ProposalID: "pr_abc"}}
	id, out := ts.awaitAsync(t, context.Background(), req)
	joined := mustAwait(t, ts.Store, req, dataplane.ApprovalPending)
	if joined.ID != id {
		t.Errorf("an identical request got approval %s, want to join %s", joined.ID, id)
	}
	if err := ts.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-out; r.err != nil || r.res.Outcome != dataplane.ApprovalApproved {
		t.Fatalf("waiter got %+v, %v; want approved", r.res, r.err)
	}
	mustAwait(t, ts.Store, req, dataplane.ApprovalPending) // used: the same request again asks anew
	a, err := ts.Get(t.Context(), id)
	if err != nil || a.State != dataplane.ApprovalStateConsumed || a.Preview.ProposalID != "pr_abc" {
		t.Errorf("Get = %+v, %v; want consumed, naming its proposal", a, err)
	}
	names := ts.events.Names()
	if len(names) < 2 {
		t.Fatalf("events %v", names)
	}
	for i := range 2 {
		if d := ts.events.Detail(i); d["proposal_id"] != "pr_abc" || d["operation"] != "" || d["connector"] != "" {
			t.Errorf("event %s details %v; want proposal_id pr_abc and no operation", names[i], d)
		}
	}
}
