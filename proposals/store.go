package proposals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/state"
)

const (
	idPrefix        = "pr_"
	idChars         = 20
	maxExamples     = 5
	maxReasonLength = 1024
	// defaultMaxPerSession is Store.MaxPerSession's default.
	defaultMaxPerSession = 1000
)

// The states of a proposal.
const (
	StateOpen     = "open"
	StateAccepted = "accepted"
	StateRejected = "rejected"
)

// ErrNotFound is returned for an id no proposal has; it wraps
// state.ErrNotFound.
var ErrNotFound = fmt.Errorf("%w: no such proposal", state.ErrNotFound)

// ErrDecided is returned when rejecting a proposal that is not open; it
// wraps state.ErrConflict.
var ErrDecided = fmt.Errorf("%w: proposal already decided", state.ErrConflict)

// ErrLimit is returned when a request would open a proposal past a
// session's limit (Store.MaxPerSession); it wraps
// dataplane.ErrApprovalLimit, so the sandbox API answers it 429
// approval_limit. Requests joining an existing proposal are still counted.
var ErrLimit = fmt.Errorf("%w: too many proposals for one session", dataplane.ErrApprovalLimit)

// Proposal is an aggregate of a session's unknown requests with the same
// method, host, port and path template.
type Proposal struct {
	ID       string `json:"id"`
	Session  string `json:"session"`
	Method   string `json:"method"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Template string `json:"template"`
	State    string `json:"state"`
	// Count is how many requests joined the proposal.
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Examples are the audit ids of the first (at most five) requests.
	Examples []string `json:"examples"`
	// Credential reports that at least one request carried a credential
	// (an Authorization header or a session placeholder).
	Credential bool       `json:"credential"`
	Reason     string     `json:"reason,omitempty"`
	DecidedBy  string     `json:"decided_by,omitempty"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
	// Justification is what an agent said when it asked for this access
	// (request_access), the latest; empty for a request only learned.
	Justification string `json:"justification,omitempty"`
	// Rule is the operation accepted (state accepted): the method and
	// template as the human left them, and whether it needs approval.
	Rule *Rule `json:"rule,omitempty"`
	// Connector is the learned connector version the rule went into
	// (FQN@VERSION; state accepted).
	Connector string `json:"connector,omitempty"`
}

// Rule is an operation a proposal was accepted as.
type Rule struct {
	Method   string `json:"method"`
	Template string `json:"template"`
	// Approval reports that each request the rule allows is held for a
	// human's approval.
	Approval bool `json:"approval"`
}

// Store keeps proposals in the control-plane database and implements
// dataplane.Proposals. The zero value of every field but DB is a
// documented default.
type Store struct {
	// DB is the control-plane database. Required.
	DB *state.DB
	// Now is the clock for decisions; nil means time.Now. Learn uses the
	// request's own time.
	Now func() time.Time
	// OnEvent receives proposal.created (once per proposal, after the
	// request or ask that opened it is committed), proposal.requested (Ask)
	// and proposal.rejected; nil
	// means events are dropped. It must not call back into the store.
	OnEvent func(ev audit.Event)
	// MaxPerSession bounds how many proposals one session can open, so
	// that a sandbox sending endless distinct paths or hosts cannot fill
	// the database or the human's list; 0 means 1000. Past it, a request
	// of a new method, host, port and template is refused ErrLimit (and
	// so, in the data plane, refused as in deny mode, never held).
	MaxPerSession int
}

var _ dataplane.Proposals = (*Store)(nil)

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Store) emit(ev audit.Event) {
	if s.OnEvent != nil {
		s.OnEvent(ev)
	}
}

// learnSQL adds one request to its proposal in a single statement, opening
// the proposal if it is the first: concurrent requests lose no count, and
// exactly one of them gets back the id it offered.
const learnSQL = `INSERT INTO proposals (id, session, method, host, port, template, seen, first_seen, last_seen,
	examples, examples_n, credential)
VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?)
ON CONFLICT (session, method, host, port, template) DO UPDATE SET
	seen = proposals.seen + 1,
	first_seen = CASE WHEN excluded.first_seen < proposals.first_seen THEN excluded.first_seen ELSE proposals.first_seen END,
	last_seen = CASE WHEN excluded.last_seen > proposals.last_seen THEN excluded.last_seen ELSE proposals.last_seen END,
	examples = CASE WHEN excluded.examples = '' OR proposals.examples_n >= 5 THEN proposals.examples
		WHEN proposals.examples = '' THEN excluded.examples
		ELSE proposals.examples || ' ' || excluded.examples END,
	examples_n = CASE WHEN excluded.examples = '' OR proposals.examples_n >= 5 THEN proposals.examples_n
		ELSE proposals.examples_n + 1 END,
	credential = CASE WHEN excluded.credential = 1 THEN 1 ELSE proposals.credential END
RETURNING id, seen, state, reason`

// Learn adds r to the proposal of its session, method, host, port and
// path template, opening it if there is none, and returns its id.
func (s *Store) Learn(ctx context.Context, r dataplane.UnknownRequest) (string, error) {
	l, err := s.Record(ctx, r)
	return l.ID, err
}

// Record is Learn (dataplane.Proposals), returning the proposal: its id,
// and whether (and why) a human rejected it.
func (s *Store) Record(ctx context.Context, r dataplane.UnknownRequest) (dataplane.Learned, error) {
	if r.Session == "" || r.Method == "" || r.Host == "" || r.Port <= 0 {
		return dataplane.Learned{}, fmt.Errorf("learning an unknown request: session, method, host and port are required (got %q %q %q %d)",
			r.Session, r.Method, r.Host, r.Port)
	}
	newID, err := state.RandomID(idPrefix, idChars)
	if err != nil {
		return dataplane.Learned{}, err
	}
	at := r.Time
	if at.IsZero() {
		at = s.now()
	}
	tmpl := Template(r.Path)
	examplesN, cred := 0, 0
	if r.AuditID != "" {
		examplesN = 1
	}
	if r.Credential {
		cred = 1
	}
	if err := s.room(ctx, r.Session, r.Method, r.Host, r.Port, tmpl); err != nil {
		return dataplane.Learned{}, err
	}
	ts := state.FormatTime(at)
	var id, st, reason string
	var seen int64
	args := []any{newID, r.Session, r.Method, r.Host, r.Port, tmpl, ts, ts, r.AuditID, examplesN, cred}
	if _, err := s.DB.WriteRow(ctx, learnSQL, args, &id, &seen, &st, &reason); err != nil {
		return dataplane.Learned{}, fmt.Errorf("learning %s %s:%d%s of session %s: %w", r.Method, r.Host, r.Port, tmpl, r.Session, err)
	}
	if id == newID { // opened here, not joined (an asked proposal has seen 0 before)
		s.emit(audit.Event{Name: audit.EventProposalCreated, Session: r.Session, Method: r.Method, Host: r.Host,
			Port: r.Port, Path: tmpl, AuditID: r.AuditID,
			Details: map[string]string{"proposal_id": id, "template": tmpl, "credential": fmt.Sprint(r.Credential)}})
	}
	return dataplane.Learned{ID: id, Rejected: st == StateRejected, Reason: reason}, nil
}

// room refuses ErrLimit when session already has MaxPerSession proposals
// and none of them has the key method, host, port, tmpl. Requests that
// arrive at once may pass the limit by as many as arrive together.
func (s *Store) room(ctx context.Context, session, method, host string, port int, tmpl string) error {
	max := s.MaxPerSession
	if max <= 0 {
		max = defaultMaxPerSession
	}
	var n, has int64
	err := s.DB.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(CASE WHEN method = ? AND host = ? AND port = ? AND template = ?
		THEN 1 ELSE 0 END), 0) FROM proposals WHERE session = ?`, method, host, port, tmpl, session).Scan(&n, &has)
	if err != nil {
		return fmt.Errorf("counting the proposals of session %s: %w", session, err)
	}
	if has == 0 && n >= int64(max) {
		return fmt.Errorf("%w: session %s has %d proposals, the most one session opens; decide them (aileron proposals list --session %s) and learn the rest in a new session",
			ErrLimit, session, n, session)
	}
	return nil
}

const selectSQL = `SELECT id, session, method, host, port, template, state, seen, first_seen, last_seen,
	examples, credential, reason, decided_by, decided_at, justification, rule, connector FROM proposals`

// rowScanner is what *sql.Row and *sql.Rows share.
type rowScanner interface{ Scan(dest ...any) error }

func (s *Store) scan(r rowScanner) (Proposal, error) {
	var p Proposal
	var first, last, examples, decidedAt, rule string
	var cred int64
	if err := r.Scan(&p.ID, &p.Session, &p.Method, &p.Host, &p.Port, &p.Template, &p.State, &p.Count,
		&first, &last, &examples, &cred, &p.Reason, &p.DecidedBy, &decidedAt, &p.Justification, &rule, &p.Connector); err != nil {
		return p, err
	}
	if rule != "" {
		p.Rule = &Rule{}
		if err := json.Unmarshal([]byte(rule), p.Rule); err != nil {
			return p, fmt.Errorf("proposal %s: its stored rule does not decode: %v", p.ID, err)
		}
	}
	var err error
	if p.FirstSeen, err = s.DB.ParseTime("proposal first_seen", first); err != nil {
		return p, err
	}
	if p.LastSeen, err = s.DB.ParseTime("proposal last_seen", last); err != nil {
		return p, err
	}
	if decidedAt != "" {
		t, err := s.DB.ParseTime("proposal decided_at", decidedAt)
		if err != nil {
			return p, err
		}
		p.DecidedAt = &t
	}
	p.Examples = strings.Fields(examples)
	p.Credential = cred == 1
	return p, nil
}

// List returns the proposals of session (every session when empty), most
// recently seen first.
func (s *Store) List(ctx context.Context, session string) ([]Proposal, error) {
	q, args := selectSQL, []any{}
	if session != "" {
		q += ` WHERE session = ?`
		args = append(args, session)
	}
	rows, err := s.DB.QueryContext(ctx, q+` ORDER BY last_seen DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("listing proposals: %w", err)
	}
	defer rows.Close()
	out := []Proposal{}
	for rows.Next() {
		p, err := s.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("listing proposals: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing proposals: %w", err)
	}
	return out, nil
}

// Get returns proposal id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Proposal, error) {
	if !state.ValidID(id, idPrefix, idChars) {
		return Proposal{}, fmt.Errorf("%w: %q is not a proposal id (pr_ and 20 characters; see aileron proposals list)", ErrNotFound, id)
	}
	p, err := s.scan(s.DB.QueryRowContext(ctx, selectSQL+` WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("%w: %s (see aileron proposals list)", ErrNotFound, id)
	}
	if err != nil {
		return p, fmt.Errorf("reading proposal %s: %w", id, err)
	}
	return p, nil
}

// Reject marks open proposal id rejected by who for reason, which the
// proposal keeps. Later requests still join it; it stays rejected.
func (s *Store) Reject(ctx context.Context, id, who, reason string) (Proposal, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > maxReasonLength {
		return Proposal{}, fmt.Errorf("%w: rejecting proposal %s: a reason of 1 to %d bytes is required (--reason)", state.ErrInvalidArgument, id, maxReasonLength)
	}
	p, err := s.Get(ctx, id)
	if err != nil {
		return p, err
	}
	at := state.FormatTime(s.now())
	var got string
	found, err := s.DB.WriteRow(ctx, `UPDATE proposals SET state = 'rejected', reason = ?, decided_by = ?, decided_at = ?
		WHERE id = ? AND state = 'open' RETURNING id`, []any{reason, who, at, id}, &got)
	if err != nil {
		return p, fmt.Errorf("rejecting proposal %s: %w", id, err)
	}
	if !found {
		return p, fmt.Errorf("%w: %s is %s", ErrDecided, id, p.State)
	}
	s.emit(audit.Event{Name: audit.EventProposalRejected, Session: p.Session, Method: p.Method, Host: p.Host,
		Port: p.Port, Path: p.Template,
		Details: map[string]string{"proposal_id": id, "template": p.Template, "by": who, "reason": reason}})
	return s.Get(ctx, id)
}
