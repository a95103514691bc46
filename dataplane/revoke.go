package dataplane

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// defaultRevokeCheck is how often the proxy looks for revoked sessions
// with open tunnels when Proxy.RevokeCheck is zero.
const defaultRevokeCheck = 250 * time.Millisecond

// openTunnel is one live tunnel of a session: the client's connection (its
// close ends the tunnel, whatever runs over it), what to audit when it is
// cut, and since when it was open (the cut line's duration).
type openTunnel struct {
	conn  net.Conn
	t     *tunnel
	since time.Time
}

// sessionTunnels tracks every open tunnel (intercepted, sandbox API,
// passthrough) by session, so that revoking a session cuts them all.
type sessionTunnels struct {
	mu    sync.Mutex
	open  map[string]map[*openTunnel]struct{}
	ended map[string]bool // sessions already cut: audited once
}

// add records a tunnel of t's session over conn, and returns the function
// that forgets it.
func (s *sessionTunnels) add(conn net.Conn, t *tunnel) func() {
	ot := &openTunnel{conn: conn, t: t, since: time.Now()}
	s.mu.Lock()
	if s.open == nil {
		s.open = map[string]map[*openTunnel]struct{}{}
	}
	m := s.open[t.sess.ID]
	if m == nil {
		m = map[*openTunnel]struct{}{}
		s.open[t.sess.ID] = m
	}
	m[ot] = struct{}{}
	// A tunnel opened means the session was live again (a fleet node's
	// lease renewed): its next cut is a new one, audited again.
	delete(s.ended, t.sess.ID)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if m := s.open[t.sess.ID]; m != nil {
			delete(m, ot)
			if len(m) == 0 {
				delete(s.open, t.sess.ID)
			}
		}
	}
}

// sessions lists the sessions with open tunnels.
func (s *sessionTunnels) sessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.open))
	for id := range s.open {
		ids = append(ids, id)
	}
	return ids
}

// take removes and returns session id's open tunnels, and whether the
// session was cut before.
func (s *sessionTunnels) take(id string) ([]*openTunnel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*openTunnel
	for ot := range s.open[id] {
		out = append(out, ot)
	}
	delete(s.open, id)
	before := s.ended[id]
	if s.ended == nil {
		s.ended = map[string]bool{}
	}
	s.ended[id] = true
	return out, before
}

// watchRevocations cuts, every RevokeCheck until Shutdown, the tunnels of
// sessions that are no longer live (deleted, expired), so a revoked session
// sends nothing more on a tunnel it opened before.
func (p *Proxy) watchRevocations() {
	every := p.RevokeCheck
	if every <= 0 {
		every = defaultRevokeCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stopping.Done():
			return
		case <-t.C:
		}
		for _, id := range p.open.sessions() {
			if err := p.Sessions.Live(id); err != nil {
				p.cut(id, err, nil)
			}
		}
	}
}

// cut closes every open tunnel of session id but keep (whose request is
// being refused; it closes after the answer), as why says the session is no
// longer live, auditing session.revoked once and one
// sandbox.proxy.tunnel_cut line per tunnel it closed (its duration_ms: how
// long the tunnel was open).
func (p *Proxy) cut(id string, why error, keep *tunnel) {
	tunnels, before := p.open.take(id)
	if !before {
		rec := p.newRecord(nil)
		rec.refused(classify(&revokedError{err: why}))
		rec.Name, rec.Session, rec.Status = audit.EventSessionRevoked, id, 0 // no client was answered
		p.finish(rec)
	}
	for _, ot := range tunnels {
		if ot.t == keep {
			continue
		}
		_ = ot.conn.Close()
		rec := p.newRecord(nil)
		rec.refused(classify(&revokedError{err: why}))
		rec.Start = ot.since
		rec.Name, rec.Session, rec.Client, rec.Status = audit.EventTunnelCut, id, ot.t.client, 0 // closed, not answered
		rec.Host, rec.Port = ot.t.authority.Host, ot.t.authority.Port
		p.finish(rec)
	}
}

// checkLive refuses a request of a session that is no longer live: its
// connection closes after the answer (hangUpRevoked, for HTTP/2, where
// "Connection: close" would only be a graceful GOAWAY that lets the other
// streams go on), and the session's other tunnels at once.
func (p *Proxy) checkLive(w http.ResponseWriter, t *tunnel) error {
	err := p.Sessions.Live(t.sess.ID)
	if err == nil {
		return nil
	}
	w.Header().Set("Connection", "close")
	p.cut(t.sess.ID, err, t)
	return &revokedError{err: err}
}

// unvouchedRefusal is what a request gets while the sessions cannot be
// checked (ErrSessionsUnavailable): the proxy, not the client, must wait.
func unvouchedRefusal() Refusal {
	r := mkRefusal(http.StatusServiceUnavailable, ClassUnavailable, policy.ReasonNotReady,
		"this proxy node cannot check any session right now (it has not reached the fleet's shared state for a while): "+
			"nothing is sent until it can; try again shortly, or through another node")
	r.RetryAfter = 5 * time.Second
	return r
}

// hangUpRevoked ends an HTTP/2 tunnel whose request was just refused
// because its session is no longer live: the refusal is flushed, and the
// connection closed a moment later (HTTP/2 writes frames after Flush
// returns; the revocation watcher's own period is as long), every other
// stream with it.
func hangUpRevoked(w http.ResponseWriter, t *tunnel, err error) {
	var re *revokedError
	if t.hangup != nil && errors.As(err, &re) {
		_ = http.NewResponseController(w).Flush()
		time.AfterFunc(hangUpDelay, t.hangup)
	}
}

// hangUpDelay is how long a refused HTTP/2 stream's answer has to leave
// before its connection is closed.
const hangUpDelay = 100 * time.Millisecond

// revokedError is a request of a deleted or expired session.
type revokedError struct{ err error }

func (e *revokedError) Error() string { return "session no longer live: " + e.err.Error() }
func (e *revokedError) Unwrap() error { return e.err }

// revokedRefusal is what a request, or a tunnel, of a revoked session gets
// (classify answers unvouchedRefusal instead when no session could be
// checked).
func revokedRefusal(why error) Refusal {
	return Refusal{Status: http.StatusForbidden, Class: ClassCapabilityDenied, Reason: policy.ReasonSessionRevoked,
		Message: "this session was deleted or has expired (" + why.Error() + "); nothing more is sent for it: create a new session"}
}
