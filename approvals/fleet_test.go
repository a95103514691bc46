package approvals

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/state"
)

// newNode returns a store on its own connection to the Postgres database
// dsn (another node), polling once an hour: only notifications, and the
// re-read after the listener reconnects, can wake its waiters in a test.
func newNode(t *testing.T, dsn string, clock *testkit.Clock) *testStore {
	t.Helper()
	db, err := state.OpenPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ts := &testStore{clock: clock, events: &testkit.Events{}, waiting: make(chan string, 1000)}
	ts.Store = &Store{DB: db, TTL: 10 * time.Minute, Now: clock.Now, OnEvent: ts.events.Record,
		Poll: time.Hour, waitHook: func(id string) { ts.waiting <- id }}
	return ts
}

func waitResult(t *testing.T, out <-chan awaitResult, what string) awaitResult {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: the held request was never released", what)
		return awaitResult{}
	}
}

// A request held on node B is released by a decision made on node A,
// through the notification alone (B never polls in this test), and again
// when B's listening connection was killed just before the decision: B
// listens again and re-reads what it holds.
func TestFleetDecisionOnOtherNodeReleases(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	clock := testkit.NewClock()
	a, b := newNode(t, dsn, clock), newNode(t, dsn, clock)
	for _, tc := range []struct {
		name     string
		kill     bool
		decide   func(id string) error
		outcome  dataplane.ApprovalOutcome
		wantBody string
	}{
		{name: "approve", decide: func(id string) error { return a.Approve(t.Context(), id, "alice") }, outcome: dataplane.ApprovalApproved},
		{name: "deny", decide: func(id string) error { return a.Deny(t.Context(), id, "alice", "no") }, outcome: dataplane.ApprovalDenied},
		{name: "approve after the listener was killed", kill: true,
			decide: func(id string) error { return a.Approve(t.Context(), id, "alice") }, outcome: dataplane.ApprovalApproved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for len(b.waiting) > 0 { // a wait woken to re-read (the listener's resync) reports again: drop the earlier test's
				<-b.waiting
			}
			id, out := b.awaitAsync(t, context.Background(), testRequest("s_one", tc.name))
			if tc.kill {
				pg.Exec("postgres", `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'aileron-listen'`)
			}
			if err := tc.decide(id); err != nil {
				t.Fatal(err)
			}
			r := waitResult(t, out, tc.name)
			if r.err != nil || r.res.Outcome != tc.outcome {
				t.Fatalf("held request got %+v, %v; want outcome %d", r.res, r.err, tc.outcome)
			}
		})
	}
}

// Twenty identical requests held over two nodes share one approval, and
// one approval releases exactly one of them upstream; the others learn it
// was taken.
func TestFleetIdenticalRequestsConsumeOnce(t *testing.T) {
	const n = 20
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	clock := testkit.NewClock()
	nodes := []*testStore{newNode(t, dsn, clock), newNode(t, dsn, clock)}
	req := testRequest("s_one", "same bytes")
	out := make(chan awaitResult, n)
	for i := range n {
		go func() {
			res, err := nodes[i%2].Await(context.Background(), req, time.Minute)
			out <- awaitResult{res, err}
		}()
	}
	var id string
	for i := range n {
		var got string
		select {
		case got = <-nodes[0].waiting:
		case got = <-nodes[1].waiting:
		case r := <-out:
			t.Fatalf("a request returned before the decision: %+v, %v", r.res, r.err)
		}
		if i > 0 && got != id {
			t.Fatalf("identical requests waited on approvals %s and %s", id, got)
		}
		id = got
	}
	// Every request must be held before the decision: one that joins after
	// it finds the approval used and asks anew.
	deadline := time.Now().Add(15 * time.Second)
	for {
		c0, _ := nodes[0].Waiting(id)
		c1, _ := nodes[1].Waiting(id)
		if c0+c1 == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d identical requests held", c0+c1, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := nodes[1].Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	counts := map[dataplane.ApprovalOutcome]int{}
	for range n {
		r := waitResult(t, out, "identical requests")
		if r.err != nil {
			t.Fatalf("Await: %v", r.err)
		}
		counts[r.res.Outcome]++
	}
	if counts[dataplane.ApprovalApproved] != 1 || counts[dataplane.ApprovalConsumed] != n-1 {
		t.Fatalf("outcomes = %v; want exactly 1 approved and %d consumed", counts, n-1)
	}
	list, err := nodes[0].List(t.Context(), Filter{})
	if err != nil || len(list) != 1 || list[0].State != dataplane.ApprovalStateConsumed {
		t.Fatalf("approvals on record = %+v, %v; want one, consumed", list, err)
	}
	h, err := nodes[1].History(t.Context(), 10) // the approvals page's history, on Postgres
	if err != nil || len(h) != 1 || h[0].Method != "POST" || h[0].Host != "api.example.com" {
		t.Fatalf("History = %+v, %v; want the consumed approval with its method and host", h, err)
	}
}

// With the shared state down, a new request needing approval is refused
// as unavailable (fail closed), and a request already held keeps waiting
// until its hold ends; both work again once the server is back.
func TestFleetStateDownFailsClosed(t *testing.T) {
	pg := testkit.StartPostgres(t)
	dsn := pg.NewDatabase()
	clock := testkit.NewClock()
	a := newNode(t, dsn, clock)
	held := make(chan awaitResult, 1)
	go func() {
		res, err := a.Await(context.Background(), testRequest("s_one", "held"), 3*time.Second)
		held <- awaitResult{res, err}
	}()
	<-a.waiting
	pg.Stop()
	if _, err := a.Await(t.Context(), testRequest("s_one", "new"), time.Second); !errorsIsUnavailable(err) {
		t.Fatalf("Await with the state down = %v; want state.ErrUnavailable", err)
	}
	r := waitResult(t, held, "held during the outage")
	if r.res.Outcome != dataplane.ApprovalPending {
		t.Fatalf("held request got %+v, %v; want it to wait out its hold (pending)", r.res, r.err)
	}
	pg.Start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := a.Await(t.Context(), testRequest("s_one", "new"), 0)
		if err == nil && res.Outcome == dataplane.ApprovalPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the server came back, Await = %+v, %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func errorsIsUnavailable(err error) bool { return errors.Is(err, state.ErrUnavailable) }
