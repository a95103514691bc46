package dataplane

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// defaultBodyIdle is Timeouts.BodyIdle when zero.
const defaultBodyIdle = 30 * time.Second

// bodyClock bounds how slowly a client may send its request body: every
// read must get a byte within idle of the one before, and once the body has
// had idle, it must average at least rate bytes a second (rate 0: no rate
// check), the way Apache's mod_reqtimeout does, counting only the time the
// proxy waits on the client (not the upstream's pauses in reading it). It sets the connection's
// read deadline before each read, so a body that stops mid-way ends in a
// *stalledError and releases its connection, goroutine and upstream
// exchange, instead of holding them until the client leaves.
type bodyClock struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	rate int64
	off  bool // the connection takes no deadline (an Execute call's body is in memory)
	// Read runs on the transport's goroutine, stalled on the handler's:
	waited atomic.Int64                 // ns spent waiting for the client in Read: the upstream's pauses are not the client's time
	n      atomic.Int64                 // bytes read
	dl     atomic.Int64                 // the read deadline in force (Unix ns); 0: none
	byRate atomic.Bool                  // that deadline is the minimum rate's, not the idle one
	err    atomic.Pointer[stalledError] // set once the body stalled
	// gate keeps the deadlines off the connection once the request path
	// returned (stop): a body goroutine still reading then (the upstream
	// answered before taking the whole body) must not reach an HTTP/2
	// stream's finished writer, or the next request's HTTP/1.1 read.
	gate    sync.RWMutex
	stopped bool
}

// errRequestOver is a body read after its request path returned.
var errRequestOver = errors.New("dataplane: request body read after the request ended")

// setDeadline sets the connection's read deadline, unless stop came first.
func (b *bodyClock) setDeadline(t time.Time) error {
	b.gate.RLock()
	defer b.gate.RUnlock()
	if b.stopped {
		return errRequestOver
	}
	return b.rc.SetReadDeadline(t)
}

// stop ends the clock's use of the connection: the request path is
// returning. A read in flight keeps its deadline; later ones fail.
func (b *bodyClock) stop() {
	if b == nil {
		return
	}
	b.gate.Lock()
	b.stopped = true
	b.gate.Unlock()
}

// clockBody puts r's body under the body deadlines of the proxy's
// timeouts, and returns the clock (nil for a request without a body).
func (p *Proxy) clockBody(w http.ResponseWriter, r *http.Request) *bodyClock {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b := &bodyClock{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: p.t.BodyIdle, rate: int64(p.t.BodyMinRate)}
	r.Body = b
	// Bound the body's first byte too: a request refused before its body is
	// read has it discarded after its answer (serveH1), under this deadline.
	// The first Read sets the body's own deadline.
	if err := b.rc.SetReadDeadline(time.Now().Add(b.idle)); err != nil {
		b.off = true
	}
	return b
}

func (b *bodyClock) Read(p []byte) (int, error) {
	if e := b.err.Load(); e != nil {
		return 0, e
	}
	now := time.Now()
	if !b.off {
		dl, byRate := b.deadline(now)
		switch err := b.setDeadline(dl); {
		case errors.Is(err, errRequestOver):
			return 0, err
		case err != nil:
			b.off = true
		default:
			b.dl.Store(dl.UnixNano())
			b.byRate.Store(byRate)
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.waited.Add(int64(time.Since(now)))
	b.n.Add(int64(n))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && !b.off:
		e := b.stall()
		b.err.Store(e)
		return n, e
	case err == io.EOF && !b.off:
		// The whole body is in: the deadline must not cut the server's
		// watch for a client that goes away while the answer streams.
		b.dl.Store(0)
		_ = b.setDeadline(time.Time{})
	}
	return n, err
}

// deadline is the earlier of now+idle and, with a rate, when the client's
// time runs out: it may have waited idle + n/rate in all for the n bytes
// read so far (time the upstream took to read them is not counted);
// byRate says the latter.
func (b *bodyClock) deadline(now time.Time) (dl time.Time, byRate bool) {
	if b.rate > 0 {
		left := b.idle + time.Duration(float64(b.n.Load())/float64(b.rate)*float64(time.Second)) - time.Duration(b.waited.Load())
		if left < b.idle {
			return now.Add(left), true
		}
	}
	return now.Add(b.idle), false
}

func (b *bodyClock) stall() *stalledError {
	return &stalledError{got: b.n.Load(), idle: b.idle, rate: b.rate, byRate: b.byRate.Load(), took: time.Duration(b.waited.Load())}
}

// bytes is how many body bytes the client has sent so far (0 without a
// body).
func (b *bodyClock) bytes() int64 {
	if b == nil {
		return 0
	}
	return b.n.Load()
}

// stalled returns the body's stall, if it stalled: the read deadline
// passed before the body ended. It holds even before Read has returned the
// deadline's error (an HTTP/2 stream's context may end first).
func (b *bodyClock) stalled() *stalledError {
	if b == nil {
		return nil
	}
	if e := b.err.Load(); e != nil {
		return e
	}
	if dl := b.dl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return b.stall()
	}
	return nil
}

// stalledError is a request body the client stopped sending, or sent too
// slowly: refused 408 body_stalled, and its connection closed.
type stalledError struct {
	got    int64
	idle   time.Duration
	rate   int64
	byRate bool          // the minimum rate, not a pause, ended it
	took   time.Duration // how long the proxy waited on the client for it
}

func (e *stalledError) Error() string {
	if e.byRate {
		return fmt.Sprintf("the request body arrived too slowly: %d bytes in %s (%.0f bytes a second), under the %d bytes a second "+
			"that proxy.body_min_rate asks of a body once it has had proxy.body_idle_timeout (%s); send it faster, "+
			"or have the operator lower proxy.body_min_rate (0 turns the check off)",
			e.got, e.took.Round(time.Millisecond), float64(e.got)/max(e.took.Seconds(), 0.001), e.rate, e.idle)
	}
	return fmt.Sprintf("the request body stalled: no byte came for %s (proxy.body_idle_timeout) after %d bytes; "+
		"send the body without pausing, or have the operator raise proxy.body_idle_timeout", e.idle, e.got)
}

func stalledRefusal(e *stalledError) Refusal {
	return mkRefusal(http.StatusRequestTimeout, ClassBadRequest, policy.ReasonBodyStalled, e.Error())
}
