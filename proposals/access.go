package proposals

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/state"
)

const (
	// MaxJustification bounds what an agent says when it asks for access.
	MaxJustification = 1024
	// maxMethod bounds a method an agent asks for.
	maxMethod = 20
	// awaitPoll is how often Await re-reads a proposal for a decision made
	// by any store, process or node on the same database.
	awaitPoll = 250 * time.Millisecond
)

// askSQL records an agent's request for access: it opens the proposal of
// the key with no request counted yet, or joins the existing one, whose
// counts and times it leaves alone. The justification is kept while the
// proposal is open (the latest); a decided proposal keeps the one it was
// decided with. RETURNING the id tells a new proposal (the id offered)
// from an existing one.
const askSQL = `INSERT INTO proposals (id, session, method, host, port, template, seen, first_seen, last_seen,
	examples, examples_n, credential, justification)
VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, '', 0, 0, ?)
ON CONFLICT (session, method, host, port, template) DO UPDATE SET
	justification = CASE WHEN proposals.state = 'open' THEN excluded.justification ELSE proposals.justification END
RETURNING id`

// Ask records that an agent of session asks for access to method on
// host:port at path (escaped, no query), saying why: it opens the proposal
// of the request's key (session, method, host, port, Template(path)), or
// joins the one there is, and returns it as it stands (a proposal already
// decided is returned decided). It audits proposal.requested, and
// proposal.created first when the proposal is new.
//
// Errors: a missing key part, a method that is not upper-case letters, a
// path not starting with "/" or a justification that is empty, over
// MaxJustification bytes, not UTF-8 or holding a control character other
// than newline and tab wrap state.ErrInvalidArgument; a new proposal past
// the session's limit is ErrLimit.
func (s *Store) Ask(ctx context.Context, session, method, host string, port int, path, justification string) (Proposal, error) {
	justification = strings.TrimSpace(justification)
	if err := checkAsk(session, method, host, port, path, justification); err != nil {
		return Proposal{}, err
	}
	newID, err := state.RandomID(idPrefix, idChars)
	if err != nil {
		return Proposal{}, err
	}
	tmpl := Template(path)
	if err := s.room(ctx, session, method, host, port, tmpl); err != nil {
		return Proposal{}, err
	}
	ts := state.FormatTime(s.now())
	var id string
	args := []any{newID, session, method, host, port, tmpl, ts, ts, justification}
	if _, err := s.DB.WriteRow(ctx, askSQL, args, &id); err != nil {
		return Proposal{}, fmt.Errorf("asking for %s %s:%d%s for session %s: %w", method, host, port, tmpl, session, err)
	}
	p, err := s.Get(ctx, id)
	if err != nil {
		return p, err
	}
	ev := audit.Event{Session: session, Method: method, Host: host, Port: port, Path: tmpl}
	if id == newID {
		ev.Name = audit.EventProposalCreated
		ev.Details = map[string]string{"proposal_id": id, "template": tmpl, "credential": "false", "asked": "true"}
		s.emit(ev)
	}
	ev.Name = audit.EventProposalRequested
	ev.Details = map[string]string{"proposal_id": id, "template": tmpl, "state": p.State, "justification": justification}
	s.emit(ev)
	return p, nil
}

// checkAsk validates what Ask records.
func checkAsk(session, method, host string, port int, path, justification string) error {
	switch {
	case session == "" || host == "":
		return fmt.Errorf("%w: asking for access: a session and a host are required", state.ErrInvalidArgument)
	case method == "" || len(method) > maxMethod || strings.TrimFunc(method, func(r rune) bool { return r >= 'A' && r <= 'Z' }) != "":
		return fmt.Errorf("%w: asking for access: method %q is not 1 to %d upper-case letters (GET, POST, …)", state.ErrInvalidArgument, method, maxMethod)
	case port < 1 || port > 65535:
		return fmt.Errorf("%w: asking for access: port %d is not from 1 to 65535", state.ErrInvalidArgument, port)
	case !strings.HasPrefix(path, "/"):
		return fmt.Errorf("%w: asking for access: path %q does not start with /", state.ErrInvalidArgument, path)
	}
	return CheckJustification(justification)
}

// CheckJustification reports what is wrong with what an agent says when it
// asks for access: empty, over MaxJustification bytes, not UTF-8, or
// holding a control character other than newline and tab. Characters that
// draw nothing or reorder text are kept: everything that shows a
// justification escapes them. Errors wrap state.ErrInvalidArgument.
func CheckJustification(j string) error {
	switch {
	case strings.TrimSpace(j) == "":
		return fmt.Errorf("%w: a justification is required: say what the access is for, for the human who decides", state.ErrInvalidArgument)
	case len(j) > MaxJustification:
		return fmt.Errorf("%w: the justification is %d bytes; keep it to %d", state.ErrInvalidArgument, len(j), MaxJustification)
	case !utf8.ValidString(j):
		return fmt.Errorf("%w: the justification is not valid UTF-8", state.ErrInvalidArgument)
	}
	for i, r := range j {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return fmt.Errorf("%w: the justification has control character %U at byte %d; write plain text (newlines and tabs are kept)", state.ErrInvalidArgument, r, i)
		}
	}
	return nil
}

// Await returns session's proposal id once it is no longer open (accepted
// or rejected, with its reason, rule and connector), or as it stands when
// wait has passed (at once for wait <= 0). It re-reads the proposal every
// 250ms, so a decision made through any store, process or node on the
// same database reaches it.
//
// Errors: a proposal of another session is reported exactly as one that
// does not exist (wrapping ErrNotFound); ctx ending returns ctx.Err().
func (s *Store) Await(ctx context.Context, session, id string, wait time.Duration) (Proposal, error) {
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	tick := time.NewTicker(awaitPoll)
	defer tick.Stop()
	for {
		p, err := s.Get(ctx, id)
		if err == nil && p.Session != session {
			p, err = Proposal{}, fmt.Errorf("%w: %s (see aileron proposals list)", ErrNotFound, id)
		}
		if err != nil || p.State != StateOpen || timeout == nil {
			return p, err
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-timeout:
			timeout = nil // one more read, then return
		case <-tick.C:
		}
	}
}
