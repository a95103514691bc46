package dataplane

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"time"
)

// HTTP/2's libraries flush every frame on its own: a unary gRPC answer's
// HEADERS, DATA and trailers are three flushes, each a write system call
// (and on the upstream leg, a TLS record each). batchConn turns the
// flushes that come in a burst into one write: a Write copies its bytes
// into a buffer and returns, and one writer goroutine sends what the
// buffer holds. Before sending a batch smaller than batchMin it yields
// once (runtime.Gosched), so the goroutines about to write the rest of a
// burst can add it, as grpc-go's own writer does. It never waits for
// bytes that may not come: a yield is not a timer, and whatever is in the
// buffer then goes out, so a streamed answer's pieces leave as they come.
const (
	batchMin = 1 << 10  // below this a batch waits for one yield
	batchMax = 64 << 10 // a Write waits while this much is unsent (the peer's pace is kept)
	// batchCloseGrace is how long Close lets the bytes already taken reach
	// the peer (a GOAWAY before the close) before the connection closes.
	batchCloseGrace = time.Second
)

// batchConn is a net.Conn whose writes leave in batches (above). A write
// error is returned by the Write after it (and every one later). It is
// off (each Write goes straight through) until on is called, so a
// connection can turn it on once it knows it speaks HTTP/2.
type batchConn struct {
	net.Conn
	mu      sync.Mutex
	room    sync.Cond // signalled when the writer sent a batch or stopped
	on      bool
	buf     []byte // bytes taken, not yet handed to the writer
	spare   []byte // the writer's last batch, reused
	busy    bool   // the writer goroutine is running
	closed  bool   // Close was called: no Write is taken
	closing bool   // Close came while busy: the writer closes the connection
	// late closes the connection batchCloseGrace after a Close that came
	// while busy, if the writer has not by then.
	late *time.Timer
	err  error // the first write error
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	b.room.L = &b.mu
	return b
}

// batch turns batching on.
func (b *batchConn) batch() {
	b.mu.Lock()
	b.on = true
	b.mu.Unlock()
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if !b.on {
		b.mu.Unlock()
		return b.Conn.Write(p)
	}
	for b.err == nil && !b.closed && len(b.buf) >= batchMax {
		b.room.Wait()
	}
	if err := b.err; err != nil || b.closed {
		b.mu.Unlock()
		if err == nil {
			err = errBatchClosed
		}
		return 0, err
	}
	b.buf = append(b.buf, p...)
	if !b.busy {
		b.busy = true
		go b.send()
	}
	b.mu.Unlock()
	return len(p), nil
}

// send writes the buffer's bytes in batches until it is empty.
func (b *batchConn) send() {
	yielded := false
	b.mu.Lock()
	for len(b.buf) > 0 && b.err == nil {
		if !yielded && len(b.buf) < batchMin {
			yielded = true
			b.mu.Unlock()
			runtime.Gosched() // let the rest of a burst join this batch
			b.mu.Lock()
			continue
		}
		batch := b.buf
		b.buf, b.spare = b.spare[:0], nil
		b.mu.Unlock()
		_, err := b.Conn.Write(batch)
		b.mu.Lock()
		b.spare, yielded = batch[:0], false
		if err != nil {
			b.err = err
		}
		b.room.Broadcast()
	}
	if b.err != nil {
		b.buf = nil
	}
	b.busy = false
	b.room.Broadcast()
	closing, late := b.closing, b.late
	b.mu.Unlock()
	if closing {
		late.Stop()
		_ = b.Conn.Close()
	}
}

// errBatchClosed is a write after Close.
var errBatchClosed = errors.New("dataplane: write on a closed connection")

// Close closes the connection; bytes already taken still go out first,
// for at most batchCloseGrace.
func (b *batchConn) Close() error {
	b.mu.Lock()
	b.closed = true
	b.room.Broadcast()
	if b.busy {
		if !b.closing {
			b.closing = true
			b.late = time.AfterFunc(batchCloseGrace, func() { _ = b.Conn.Close() })
		}
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	return b.Conn.Close()
}
