package dataplane

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// writeCounter counts the writes that reach the connection under a
// batchConn, and says when the first one began.
type writeCounter struct {
	net.Conn
	mu      sync.Mutex
	writes  int
	started chan struct{} // closed when the first write begins
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.writes++
	if w.writes == 1 {
		close(w.started)
	}
	w.mu.Unlock()
	return w.Conn.Write(p)
}

func (w *writeCounter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes
}

// batchPair is a batchConn over one end of a pipe (whose writes wait for
// the other end to read), its write counter, and the other end.
func batchPair(t *testing.T, on bool) (*batchConn, *writeCounter, net.Conn) {
	t.Helper()
	near, far := net.Pipe()
	t.Cleanup(func() { _ = near.Close(); _ = far.Close() })
	wc := &writeCounter{Conn: near, started: make(chan struct{})}
	b := newBatchConn(wc)
	if on {
		b.batch()
	}
	return b, wc, far
}

func mustWrite(t *testing.T, w io.Writer, p string) {
	t.Helper()
	if _, err := w.Write([]byte(p)); err != nil {
		t.Fatalf("Write(%q): %v", p, err)
	}
}

func readN(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	got := make([]byte, n)
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatalf("reading %d bytes: %v", n, err)
	}
	return string(got)
}

// The frames a burst writes while a batch is on the wire (a unary answer's
// DATA and trailers behind its HEADERS) leave together, in order, in the
// next write; off, every Write is a write of its own.
func TestBatchConnJoinsTheWritesOfABurst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		on     bool
		writes int
	}{
		{"batching", true, 2},
		{"off", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, wc, far := batchPair(t, tc.on)
			parts := []string{"HEADERS;", "DATA;", "TRAILERS;", "PING;"}
			var all string
			for _, p := range parts {
				all += p
			}
			wrote := make(chan error, 1)
			go func() { // off, each Write waits for the reader below
				_, err := b.Write([]byte(parts[0]))
				<-wc.started // the first batch is on the wire, held by the pipe
				for _, p := range parts[1:] {
					if err == nil {
						_, err = b.Write([]byte(p))
					}
				}
				wrote <- err
			}()
			if tc.on {
				select { // every Write returns before a byte is read
				case err := <-wrote:
					if err != nil {
						t.Fatalf("Write: %v", err)
					}
					wrote <- nil
				case <-time.After(10 * time.Second):
					t.Fatal("the Writes waited for the peer to read")
				}
			}
			if got := readN(t, far, len(all)); got != all {
				t.Fatalf("read %q, want %q", got, all)
			}
			if err := <-wrote; err != nil {
				t.Fatalf("Write: %v", err)
			}
			if got := wc.count(); got != tc.writes {
				t.Errorf("%d writes reached the connection, want %d", got, tc.writes)
			}
		})
	}
}

// A piece written on its own (a streamed answer's event) leaves without
// waiting for another.
func TestBatchConnSendsALonePieceAtOnce(t *testing.T) {
	b, _, far := batchPair(t, true)
	for _, ev := range []string{"data: one\n\n", "data: two\n\n"} {
		mustWrite(t, b, ev)
		if got := readN(t, far, len(ev)); got != ev {
			t.Fatalf("read %q, want %q", got, ev)
		}
	}
}

// Close lets the bytes already taken out before the connection closes
// (an HTTP/2 GOAWAY followed by the close); a Write after it fails.
func TestBatchConnCloseSendsWhatItTookFirst(t *testing.T) {
	b, wc, far := batchPair(t, true)
	mustWrite(t, b, "SETTINGS;")
	<-wc.started
	mustWrite(t, b, "GOAWAY;")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, errBatchClosed) {
		t.Errorf("Write after Close: %v, want errBatchClosed", err)
	}
	rest, err := io.ReadAll(far)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("reading: %v", err)
	}
	if string(rest) != "SETTINGS;GOAWAY;" {
		t.Errorf("read %q before the close, want %q", rest, "SETTINGS;GOAWAY;")
	}
}

// A write the connection refused is the error of the Writes after it, and
// no byte is taken past it.
func TestBatchConnReportsAFailedWrite(t *testing.T) {
	b, _, far := batchPair(t, true)
	_ = far.Close() // the peer is gone: the writer's write fails
	mustWrite(t, b, "HEADERS;")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := b.Write([]byte("DATA;"))
		if errors.Is(err, io.ErrClosedPipe) {
			break
		}
		if err != nil {
			t.Fatalf("Write: %v, want the pipe's error", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no Write reported the failed write")
		}
		time.Sleep(time.Millisecond)
	}
	_ = b.Close()
}

// A peer that takes nothing holds the writers at batchMax unsent bytes,
// not more: memory follows the peer's pace.
func TestBatchConnBoundsWhatItHolds(t *testing.T) {
	b, wc, far := batchPair(t, true)
	mustWrite(t, b, "x")
	<-wc.started // on the wire until far reads
	chunk := bytes.Repeat([]byte("y"), 16<<10)
	held := make(chan int, 1)
	go func() {
		n := 0
		for n < 2*batchMax {
			if _, err := b.Write(chunk); err != nil {
				break
			}
			n += len(chunk)
		}
		held <- n
	}()
	select {
	case n := <-held:
		t.Fatalf("%d bytes taken while the peer read nothing, want a wait at %d", n, batchMax)
	case <-time.After(100 * time.Millisecond):
	}
	b.mu.Lock()
	pending := len(b.buf)
	b.mu.Unlock()
	if pending > batchMax+len(chunk) {
		t.Errorf("%d bytes held, want at most %d", pending, batchMax+len(chunk))
	}
	_ = far.Close()
	<-held
	_ = b.Close()
}
