package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/aileronhq/aileron/policy"
)

// Defaults of the budget for held bodies; see Proxy.ApprovalMaxHeld.
const (
	defaultApprovalMaxHeld           = 64 << 20
	defaultApprovalMaxHeldPerSession = 8 << 20
)

// heldBudget counts the bytes of the bodies that held requests keep in
// memory while they wait for a human: in all, and per session, so that one
// session cannot spend what the others need.
type heldBudget struct {
	mu        sync.Mutex
	total     int64
	bySession map[string]int64
	waiting   map[string]int // requests each session has waiting for a human
}

// maxHeldRequests bounds the requests one session may have waiting for
// approval at once (each holds a goroutine, a connection or an HTTP/2
// stream, and a poll of the approval store), however many approvals they
// share.
const maxHeldRequests = 64

// enter books one more waiting request for session, unless it has
// maxHeldRequests already.
func (b *heldBudget) enter(session string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting[session] >= maxHeldRequests {
		return false
	}
	if b.waiting == nil {
		b.waiting = map[string]int{}
	}
	b.waiting[session]++
	return true
}

// leave gives back what enter booked.
func (b *heldBudget) leave(session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiting[session]--; b.waiting[session] <= 0 {
		delete(b.waiting, session)
	}
}

// take books n more bytes for session, or reports which limit it would
// pass ("" when booked).
func (b *heldBudget) take(session string, n, maxTotal, maxSession int64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.bySession[session]+n > maxSession:
		return "approval.max_held_bytes_per_session"
	case b.total+n > maxTotal:
		return "approval.max_held_bytes"
	}
	if b.bySession == nil {
		b.bySession = map[string]int64{}
	}
	b.total += n
	b.bySession[session] += n
	return ""
}

// give returns n bytes of session's.
func (b *heldBudget) give(session string, n int64) {
	if n == 0 { // nothing was booked (an empty body): nothing to give back
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total -= n
	if b.bySession[session] -= n; b.bySession[session] <= 0 {
		delete(b.bySession, session)
	}
}

func (p *Proxy) approvalMaxHeld() (total, perSession int64) {
	total, perSession = defaultApprovalMaxHeld, defaultApprovalMaxHeldPerSession
	if p.ApprovalMaxHeld > 0 {
		total = p.ApprovalMaxHeld
	}
	if p.ApprovalMaxHeldPerSession > 0 {
		perSession = p.ApprovalMaxHeldPerSession
	}
	if l := p.limits.Load(); l != nil {
		if l.ApprovalMaxHeld > 0 {
			total = l.ApprovalMaxHeld
		}
		if l.ApprovalMaxHeldPerSession > 0 {
			perSession = l.ApprovalMaxHeldPerSession
		}
	}
	return total, perSession
}

// readHeld reads the whole body if it is at most approval.max_body bytes
// and fits in the budget for held bodies, in all and for session; release
// gives its bytes back.
func (p *Proxy) readHeld(r *http.Request, session string) (body []byte, release func(), err error) {
	none := func() {}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, none, nil
	}
	limit := p.approvalMaxBody()
	if r.ContentLength > limit {
		return nil, none, deny(policy.ReasonApprovalBodyTooLarge, "the body is %d bytes; requests that need approval may carry at most %d (approval.max_body)", r.ContentLength, limit)
	}
	hr := &heldReader{r: io.LimitReader(r.Body, limit+1), p: p, session: session}
	hr.maxTotal, hr.maxSession = p.approvalMaxHeld()
	b, err := io.ReadAll(hr)
	release = func() { p.held.give(session, hr.taken) }
	var se *stalledError
	switch {
	case hr.full != "":
		err = &limitError{msg: fmt.Sprintf("requests waiting for approval hold as many bytes of bodies in memory as %s allows; "+
			"retry once some of those held requests have ended (decided, or their approval.hold passed)", hr.full)}
	case errors.As(err, &se):
		err = se
	case err != nil:
		err = &DenyError{Reason: policy.ReasonBadRequest, Message: "reading the request body failed: " + err.Error()}
	case int64(len(b)) > limit:
		err = deny(policy.ReasonApprovalBodyTooLarge, "the body is larger than %d bytes, the most a request that needs approval may carry (approval.max_body)", limit)
	}
	if err != nil {
		release()
		return nil, none, err
	}
	return b, release, nil
}

// heldBody is the body the approval gate holds: the one already read
// whole to check its arguments (x.whole, never read twice; booked in the
// budget for held bodies too, and bound by approval.max_body like any),
// else readHeld's.
func (p *Proxy) heldBody(x *exchange) (body []byte, release func(), err error) {
	if x.whole == nil {
		return p.readHeld(x.in, x.t.sess.ID)
	}
	none, session, n := func() {}, x.t.sess.ID, int64(len(x.whole))
	if limit := p.approvalMaxBody(); n > limit {
		return nil, none, deny(policy.ReasonApprovalBodyTooLarge, "the body is %d bytes; requests that need approval may carry at most %d (approval.max_body)", n, limit)
	}
	maxTotal, maxSession := p.approvalMaxHeld()
	if full := p.held.take(session, n, maxTotal, maxSession); full != "" {
		return nil, none, &limitError{msg: fmt.Sprintf("requests waiting for approval hold as many bytes of bodies in memory as %s allows; "+
			"retry once some of those held requests have ended (decided, or their approval.hold passed)", full)}
	}
	return x.whole, func() { p.held.give(session, n) }, nil
}

// heldReader books what it reads in the proxy's budget for held bodies.
type heldReader struct {
	r                    io.Reader
	p                    *Proxy
	session              string
	maxTotal, maxSession int64
	taken                int64
	full                 string // the limit that stopped the read
}

func (h *heldReader) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	if n > 0 {
		if h.full = h.p.held.take(h.session, int64(n), h.maxTotal, h.maxSession); h.full != "" {
			return 0, errHeldFull
		}
		h.taken += int64(n)
	}
	return n, err
}

var errHeldFull = errors.New("the budget for held bodies is spent")

// limitError is a held request refused because a limit on approvals is
// reached: 429 approval_limit.
type limitError struct{ msg string }

func (e *limitError) Error() string { return string(policy.ReasonApprovalLimit) + ": " + e.msg }
