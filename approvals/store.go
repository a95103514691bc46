package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
)

// DefaultTTL is how long an approval waits for its decision, and then for
// the retry that uses it, when Store.TTL is zero.
const DefaultTTL = time.Hour

const (
	approvalIDPrefix        = "ap_"
	approvalIDChars         = 20
	defaultApprovalPoll     = 250 * time.Millisecond
	listeningApprovalPoll   = 2 * time.Second
	defaultMaxPending       = 20
	maxApprovalReasonLength = 1024
)

// Approval is one recorded approval as the admin side sees it.
type Approval struct {
	ID        string                  `json:"id"`
	Session   string                  `json:"session"`
	Digest    string                  `json:"digest"`
	State     dataplane.ApprovalState `json:"state"`
	Preview   dataplane.Preview       `json:"preview"`
	CreatedAt time.Time               `json:"created_at"`
	// ExpiresAt is when a pending approval expires undecided or, once
	// approved, when the approval lapses if no retry has used it.
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at,omitempty"`
	DecidedBy string     `json:"decided_by,omitempty"`
	Reason    string     `json:"reason,omitempty"`
}

// Filter selects approvals for List; empty fields match everything.
type Filter struct {
	State   dataplane.ApprovalState
	Session string
}

// Store keeps approvals in the control-plane database and implements
// dataplane.Approvals. Decisions made through any Store on the same
// database, in this process, another process or (on Postgres) another node,
// reach waiting requests: through an in-process wake-up when the deciding
// store is this one; on Postgres through a notification sent in the
// deciding transaction (state.ChannelApprovals), every wait re-reading its
// approval whenever the listening connection comes back (notifications
// sent while it was away are lost); and through a periodic re-read of the
// database as the backstop.
//
// The zero value of every field but DB is a documented default. A
// Store must not be copied after first use.
type Store struct {
	// DB is the control-plane database. Required.
	DB *state.DB
	// TTL is how long a pending approval waits for a decision, and how long
	// an approval, once approved, waits for the retry that uses it.
	// 0 means one hour.
	TTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReviewURL returns where a human can review approval id; nil means
	// results carry no URL.
	ReviewURL func(id string) string
	// OnEvent receives approval.requested, approval.approved,
	// approval.denied and approval.expired with the approval's id, session,
	// digest and preview summary, after the change is committed; nil means
	// events are dropped. It must not call back into the store.
	OnEvent func(event audit.EventName, details map[string]string)
	// Poll is how often a waiting Await re-reads the database for a decision
	// made by another process or node. 0 means 250ms, or on Postgres 2s while
	// its notifications are being received (and 250ms while they are not).
	Poll time.Duration
	// MaxPendingPerSession is how many pending approvals one session may
	// have; Await refuses one more (wrapping dataplane.ErrApprovalLimit).
	// 0 means 20.
	MaxPendingPerSession int

	listenOnce sync.Once
	mu         sync.Mutex
	waiters    map[string]*approvalWaiters
	holding    map[string][]time.Time // per approval, when each client held on it gives up
	// waitHook, if set, is called each time an Await starts waiting on
	// approval id (tests synchronise on it).
	waitHook func(id string)
}

var _ dataplane.Approvals = (*Store)(nil)

// approvalWaiters is the in-process wake-up channel for one approval: it is
// closed, and removed from the map, when the approval changes state.
type approvalWaiters struct {
	ch chan struct{}
	n  int
}

// approvalRow is the stored form of an approval.
type approvalRow struct {
	Approval
	ConsumedAt *time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Store) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

func (s *Store) poll() time.Duration {
	switch {
	case s.Poll > 0:
		return s.Poll
	case s.DB.Shared() && s.DB.Listening():
		return listeningApprovalPoll
	}
	return defaultApprovalPoll
}

// listen subscribes, once, to the decisions other nodes announce: each
// wakes the waiters of its approval, and a listener that reconnected wakes
// them all to re-read.
func (s *Store) listen() {
	s.listenOnce.Do(func() {
		s.DB.Subscribe(state.ChannelApprovals, state.Subscription{Changed: s.notify, Resync: s.notifyAll})
	})
}

// notifyAll wakes everything waiting on any approval.
func (s *Store) notifyAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.waiters {
		close(w.ch)
		delete(s.waiters, id)
	}
}

func (s *Store) maxPending() int {
	if s.MaxPendingPerSession > 0 {
		return s.MaxPendingPerSession
	}
	return defaultMaxPending
}

func (s *Store) check() error {
	if s == nil || s.DB == nil {
		return fmt.Errorf("%w: approvals.Store.DB is nil; open the database with state.Open", state.ErrInvalidArgument)
	}
	return nil
}

// newApprovalID returns "ap_" and 20 random lower-case base32 characters
// (100 bits).
func newApprovalID() (string, error) { return state.RandomID(approvalIDPrefix, approvalIDChars) }

// subscribe returns the channel closed at approval id's next change.
func (s *Store) subscribe(id string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters == nil {
		s.waiters = make(map[string]*approvalWaiters)
	}
	w := s.waiters[id]
	if w == nil {
		w = &approvalWaiters{ch: make(chan struct{})}
		s.waiters[id] = w
	}
	w.n++
	return w.ch
}

// unsubscribe undoes one subscribe that returned ch.
func (s *Store) unsubscribe(id string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.waiters[id]; w != nil && w.ch == ch {
		if w.n--; w.n == 0 {
			delete(s.waiters, id)
		}
	}
}

// notify wakes everything waiting on approval id.
func (s *Store) notify(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.waiters[id]; w != nil {
		close(w.ch)
		delete(s.waiters, id)
	}
}

// emit reports an event about a to OnEvent.
func (s *Store) emit(event audit.EventName, a *Approval) {
	if s.OnEvent == nil {
		return
	}
	d := map[string]string{
		"approval_id": a.ID,
		"session":     a.Session,
		"digest":      a.Digest,
		"connector":   a.Preview.Connector,
		"version":     a.Preview.Version,
		"tool":        a.Preview.Tool,
		"operation":   a.Preview.Operation,
		"method":      a.Preview.Method,
		"host":        a.Preview.Host,
		"path":        pathOnly(a.Preview.Path),
	}
	if a.Preview.ProposalID != "" { // an unknown request (ask mode): no operation, a proposal
		d["proposal_id"] = a.Preview.ProposalID
	}
	if a.DecidedBy != "" {
		d["decided_by"] = a.DecidedBy
	}
	if a.Reason != "" {
		d["reason"] = a.Reason
	}
	s.OnEvent(event, d)
}

// pathOnly drops a query string: audit records never carry one.
func pathOnly(p string) string {
	p, _, _ = strings.Cut(p, "?")
	return p
}

const approvalColumns = `id, session, digest, state, preview, created_at, expires_at,
	decided_at, decided_by, reason, consumed_at`

// scanApproval reads one row selected with approvalColumns.
func scanApproval(db *state.DB, sc state.Scanner) (approvalRow, error) {
	var (
		r                 approvalRow
		preview, created  string
		expires           string
		decided, consumed sql.NullString
	)
	err := sc.Scan(&r.ID, &r.Session, &r.Digest, &r.State, &preview, &created, &expires,
		&decided, &r.DecidedBy, &r.Reason, &consumed)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(preview), &r.Preview); err != nil {
		return r, fmt.Errorf("%w: preview of approval %s: %v", state.ErrCorruptState, r.ID, err)
	}
	if r.CreatedAt, err = db.ParseTime("approval "+r.ID+" created_at", created); err != nil {
		return r, err
	}
	if r.ExpiresAt, err = db.ParseTime("approval "+r.ID+" expires_at", expires); err != nil {
		return r, err
	}
	for _, p := range []struct {
		s   sql.NullString
		dst **time.Time
	}{{decided, &r.DecidedAt}, {consumed, &r.ConsumedAt}} {
		if p.s.Valid {
			t, err := db.ParseTime("approval "+r.ID+" time", p.s.String)
			if err != nil {
				return r, err
			}
			*p.dst = &t
		}
	}
	return r, nil
}

// getRow reads approval id; a missing one wraps state.ErrNotFound.
func (s *Store) getRow(ctx context.Context, q state.Querier, id string) (approvalRow, error) {
	r, err := scanApproval(s.DB, q.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("%w: approval %q; list approvals with: aileron approvals list", state.ErrNotFound, id)
	}
	if err != nil {
		return r, s.DB.Unavailable(fmt.Errorf("reading approval %s: %w", id, err))
	}
	return r, nil
}

// expireTx marks every pending approval, and every approved one nobody used,
// whose expires_at is not after now as expired, returning them.
func (s *Store) expireTx(ctx context.Context, tx *state.Tx, now time.Time) ([]approvalRow, error) {
	rows, err := tx.QueryContext(ctx, `UPDATE approvals SET state = 'expired'
		WHERE state IN ('pending','approved') AND expires_at <= ?
		RETURNING `+approvalColumns, state.FormatTime(now))
	if err != nil {
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	defer rows.Close()
	var out []approvalRow
	for rows.Next() {
		r, err := scanApproval(s.DB, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	rows.Close()
	for i := range out {
		if err := tx.Notify(ctx, state.ChannelApprovals, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// announceExpired wakes the waiters of, and reports, approvals expireTx
// returned, once their transaction has committed.
func (s *Store) announceExpired(rows []approvalRow) {
	for i := range rows {
		s.notify(rows[i].ID)
		s.emit(audit.EventApprovalExpired, &rows[i].Approval)
	}
}

// Expire marks pending approvals past their expiry, and approved ones whose
// retry never came, as expired, wakes their waiters and reports
// approval.expired for each. It returns how many it expired. Await, List and
// Get call it lazily; a daemon may also call it from a ticker so that expiry
// is recorded without traffic. Errors are database failures.
func (s *Store) Expire(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	return s.expire(ctx)
}

func (s *Store) expire(ctx context.Context) (int, error) {
	var expired []approvalRow
	err := s.DB.Write(ctx, func(tx *state.Tx) error {
		var err error
		expired, err = s.expireTx(ctx, tx, s.now())
		return err
	})
	if err != nil {
		return 0, err
	}
	s.announceExpired(expired)
	return len(expired), nil
}

// Get returns approval id. A missing id wraps state.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	if err := s.check(); err != nil {
		return Approval{}, err
	}
	if _, err := s.expire(ctx); err != nil {
		return Approval{}, err
	}
	r, err := s.getRow(ctx, s.DB, id)
	return r.Approval, err
}

// State reports where approval id stands and, for a denied one, why (the
// action runner's view). A missing id wraps state.ErrNotFound.
func (s *Store) State(ctx context.Context, id string) (dataplane.ApprovalState, string, error) {
	ap, err := s.Get(ctx, id)
	return ap.State, ap.Reason, err
}

// Covers implements dataplane.Approvals: it returns nil only for an action
// approval (Preview.Action set) of session, for an action of connector,
// that a human approved and the action runner has consumed. Anything else wraps state.ErrNotFound (unknown id,
// another session's) or state.ErrConflict (not an action approval, not consumed).
func (s *Store) Covers(ctx context.Context, id, session, connector string) error {
	if err := s.check(); err != nil {
		return err
	}
	r, err := s.getRow(ctx, s.DB, id)
	if err != nil {
		return err
	}
	switch {
	case r.Session != session:
		return fmt.Errorf("%w: approval %s", state.ErrNotFound, id)
	case r.Preview.Action == "":
		return fmt.Errorf("%w: approval %s is for a single request, not an action", state.ErrConflict, id)
	case r.Preview.Connector != connector:
		return fmt.Errorf("%w: approval %s is for an action of %s, not of %s", state.ErrConflict, id, r.Preview.Connector, connector)
	case r.State != dataplane.ApprovalStateConsumed:
		return fmt.Errorf("%w: approval %s is %s, not approved and taken by its action", state.ErrConflict, id, r.State)
	}
	return nil
}

// List returns the approvals f selects, oldest first. An unknown f.State
// wraps state.ErrInvalidArgument.
func (s *Store) List(ctx context.Context, f Filter) ([]Approval, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	switch f.State {
	case "", dataplane.ApprovalStatePending, dataplane.ApprovalStateApproved, dataplane.ApprovalStateDenied, dataplane.ApprovalStateExpired, dataplane.ApprovalStateConsumed:
	default:
		return nil, fmt.Errorf("%w: approval state %q; use pending, approved, denied, expired or consumed",
			state.ErrInvalidArgument, f.State)
	}
	if _, err := s.expire(ctx); err != nil {
		return nil, err
	}
	rows, err := s.DB.QueryContext(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE (? = '' OR state = ?) AND (? = '' OR session = ?)
		ORDER BY created_at, id`, f.State, f.State, f.Session, f.Session)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer rows.Close()
	out := []Approval{}
	for rows.Next() {
		r, err := scanApproval(s.DB, rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r.Approval)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return out, nil
}

// Approve approves pending approval id on behalf of by (empty means
// "admin"), wakes the request waiting on it and reports approval.approved.
// The approval then lasts one TTL for the retry that uses it. A missing id
// wraps state.ErrNotFound; an approval that is not pending (already decided, used
// or expired) wraps state.ErrConflict, naming its state.
func (s *Store) Approve(ctx context.Context, id, by string) error {
	return s.decide(ctx, id, by, dataplane.ApprovalStateApproved, "")
}

// Deny denies pending approval id on behalf of by (empty means "admin") with
// reason (at most 1024 bytes), wakes the request waiting on it and reports
// approval.denied. Errors are Approve's, and a reason too long wraps
// state.ErrInvalidArgument.
func (s *Store) Deny(ctx context.Context, id, by, reason string) error {
	return s.decide(ctx, id, by, dataplane.ApprovalStateDenied, reason)
}

// decide moves approval id from pending to state to.
func (s *Store) decide(ctx context.Context, id, by string, to dataplane.ApprovalState, reason string) error {
	if err := s.check(); err != nil {
		return err
	}
	if len(reason) > maxApprovalReasonLength {
		return fmt.Errorf("%w: deny reason is %d bytes; the limit is %d", state.ErrInvalidArgument, len(reason), maxApprovalReasonLength)
	}
	if by == "" {
		by = "admin"
	}
	if _, err := s.expire(ctx); err != nil {
		return err
	}
	now := s.now()
	var decided approvalRow
	err := s.DB.Write(ctx, func(tx *state.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvals
			SET state = ?, decided_at = ?, decided_by = ?, reason = ?,
			    expires_at = CASE WHEN ? = 'approved' THEN ? ELSE expires_at END
			WHERE id = ? AND state = 'pending' AND expires_at > ?`,
			to, state.FormatTime(now), by, reason, to, state.FormatTime(now.Add(s.ttl())), id, state.FormatTime(now))
		if err != nil {
			return fmt.Errorf("deciding approval %s: %w", id, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("deciding approval %s: %w", id, err)
		}
		if decided, err = s.getRow(ctx, tx, id); err != nil {
			return err
		}
		if n == 0 {
			cur := decided.State
			if cur == dataplane.ApprovalStatePending { // its expiry passed since expire ran
				cur = dataplane.ApprovalStateExpired
			}
			return fmt.Errorf("%w: approval %s is %s, not pending; only a pending approval can be approved or denied",
				state.ErrConflict, id, cur)
		}
		return tx.Notify(ctx, state.ChannelApprovals, id)
	})
	if err != nil {
		return err
	}
	s.notify(id)
	event := audit.EventApprovalApproved
	if to == dataplane.ApprovalStateDenied {
		event = audit.EventApprovalDenied
	}
	s.emit(event, &decided.Approval)
	return nil
}

// Await implements dataplane.Approvals. In one transaction it expires what
// is due, then joins the live (pending or approved) approval for req's
// session and digest or records a new pending one (reporting
// approval.requested). An approved one is consumed at once; a pending one is
// waited on for up to hold, woken by decisions made through this store, by
// other nodes' notifications (Postgres), and by a re-read of the database
// every Poll for decisions made elsewhere. While the shared state cannot be
// reached, a request already held keeps waiting out its hold.
//
// Outcomes: ApprovalApproved for the one caller whose compare-and-swap
// consumed the approval; ApprovalConsumed for one that lost the race;
// ApprovalDenied with the reason; ApprovalExpired when the TTL passed;
// ApprovalPending when hold elapsed (the approval stays pending for a
// retry), or with ctx's error when ctx ended. A nil req or one without
// session or digest wraps state.ErrInvalidArgument; other errors are database
// failures.
func (s *Store) Await(ctx context.Context, req *dataplane.ApprovalRequest, hold time.Duration) (dataplane.ApprovalResult, error) {
	res := dataplane.ApprovalResult{Outcome: dataplane.ApprovalPending}
	if err := s.check(); err != nil {
		return res, err
	}
	if req == nil || req.Session == "" || req.Digest == "" {
		return res, fmt.Errorf("%w: approval request needs a session and a digest", state.ErrInvalidArgument)
	}
	preview, err := json.Marshal(req.Preview)
	if err != nil {
		return res, fmt.Errorf("%w: approval preview does not encode as JSON: %v", state.ErrInvalidArgument, err)
	}
	row, created, consumed, err := s.join(ctx, req, preview)
	if err != nil {
		return res, err
	}
	res.ID = row.ID
	if s.ReviewURL != nil {
		res.ReviewURL = s.ReviewURL(row.ID)
	}
	if created {
		s.emit(audit.EventApprovalRequested, &row.Approval)
	}
	if consumed {
		res.Outcome = dataplane.ApprovalApproved
		return res, nil
	}
	return s.wait(ctx, res, hold)
}

// join finds or records the live approval for req, consuming it if it is
// approved. created reports a new row; consumed that this caller consumed it.
func (s *Store) join(ctx context.Context, req *dataplane.ApprovalRequest, preview []byte) (row approvalRow, created, consumed bool, err error) {
	now := s.now()
	var expired []approvalRow
	err = s.DB.Write(ctx, func(tx *state.Tx) error {
		created, consumed = false, false
		var err error
		if expired, err = s.expireTx(ctx, tx, now); err != nil {
			return err
		}
		row, err = scanApproval(s.DB, tx.QueryRowContext(ctx, `SELECT `+approvalColumns+` FROM approvals
			WHERE session = ? AND digest = ? AND state IN ('pending','approved')`, req.Session, req.Digest))
		switch {
		case err == nil && row.State == dataplane.ApprovalStateApproved:
			consumed, err = s.consumeTx(ctx, tx, row.ID, now)
			return err
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("looking up approval for session %s: %w", req.Session, err)
		}
		var pending int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM approvals WHERE session = ? AND state = 'pending'`,
			req.Session).Scan(&pending); err != nil {
			return fmt.Errorf("counting the pending approvals of session %s: %w", req.Session, err)
		}
		if pending >= s.maxPending() {
			return fmt.Errorf("%w: session %s already has %d approvals waiting for a human, the most approval.max_pending_per_session allows; "+
				"retry once some are decided (aileron approvals list --session %s) or have expired", dataplane.ErrApprovalLimit, req.Session, pending, req.Session)
		}
		id, err := newApprovalID()
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO approvals
			(id, session, digest, state, preview, created_at, expires_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)`,
			id, req.Session, req.Digest, string(preview), state.FormatTime(now), state.FormatTime(now.Add(s.ttl())))
		if err != nil {
			return fmt.Errorf("recording approval for session %s: %w", req.Session, err)
		}
		created = true
		row, err = s.getRow(ctx, tx, id)
		return err
	})
	if err != nil {
		return approvalRow{}, false, false, err
	}
	s.announceExpired(expired)
	return row, created, consumed, nil
}

// consumeTx is the compare-and-swap that uses approved approval id: true if
// this call moved it to consumed, false if it was no longer approved.
func (s *Store) consumeTx(ctx context.Context, tx *state.Tx, id string, now time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, `UPDATE approvals SET state = 'consumed', consumed_at = ?
		WHERE id = ? AND state = 'approved'`, state.FormatTime(now), id)
	if err != nil {
		return false, fmt.Errorf("consuming approval %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("consuming approval %s: %w", id, err)
	}
	if n == 1 {
		// The other nodes' identical requests waiting on it learn at once
		// that it is taken.
		return true, tx.Notify(ctx, state.ChannelApprovals, id)
	}
	return false, nil
}

// wait waits up to hold for approval res.ID to leave pending.
func (s *Store) wait(ctx context.Context, res dataplane.ApprovalResult, hold time.Duration) (dataplane.ApprovalResult, error) {
	if hold <= 0 {
		return res, nil
	}
	s.listen()
	timer := time.NewTimer(hold)
	defer timer.Stop()
	defer s.held(res.ID, s.now().Add(hold))()
	for {
		ch := s.subscribe(res.ID)
		done, err := s.settle(ctx, &res)
		if errors.Is(err, state.ErrUnavailable) {
			// The shared state is unreachable: the client keeps waiting
			// until its hold ends, and the next read may find it back.
			done, err = false, nil
		}
		if done || err != nil {
			s.unsubscribe(res.ID, ch)
			return res, err
		}
		if s.waitHook != nil {
			s.waitHook(res.ID)
		}
		select {
		case <-ch:
		case <-time.After(s.poll()):
		case <-timer.C:
			s.unsubscribe(res.ID, ch)
			return res, nil
		case <-ctx.Done():
			s.unsubscribe(res.ID, ch)
			return res, ctx.Err()
		}
		s.unsubscribe(res.ID, ch)
	}
}

// settle reads approval res.ID and, unless it is still pending, sets
// res's outcome (consuming an approved one) and reports done.
func (s *Store) settle(ctx context.Context, res *dataplane.ApprovalResult) (done bool, err error) {
	row, err := s.getRow(ctx, s.DB, res.ID)
	if err != nil {
		return false, err
	}
	if row.State == dataplane.ApprovalStatePending && !row.ExpiresAt.After(s.now()) {
		if _, err := s.expire(ctx); err != nil {
			return false, err
		}
		if row, err = s.getRow(ctx, s.DB, res.ID); err != nil {
			return false, err
		}
	}
	switch row.State {
	case dataplane.ApprovalStatePending:
		return false, nil
	case dataplane.ApprovalStateApproved:
		var won bool
		err := s.DB.Write(ctx, func(tx *state.Tx) error {
			var err error
			won, err = s.consumeTx(ctx, tx, res.ID, s.now())
			return err
		})
		if err != nil {
			return false, err
		}
		res.Outcome = dataplane.ApprovalConsumed
		if won {
			res.Outcome = dataplane.ApprovalApproved
		}
	case dataplane.ApprovalStateConsumed:
		res.Outcome = dataplane.ApprovalConsumed
	case dataplane.ApprovalStateDenied:
		res.Outcome, res.Reason = dataplane.ApprovalDenied, row.Reason
	case dataplane.ApprovalStateExpired:
		res.Outcome = dataplane.ApprovalExpired
	default:
		return false, fmt.Errorf("%w: approval %s has unknown state %q", state.ErrCorruptState, res.ID, row.State)
	}
	return true, nil
}
