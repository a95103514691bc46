package audit

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// countingFaults counts the write calls reaching the files.
type countingFile struct {
	*faultFile
	writes *int
}

func (f countingFile) Write(b []byte) (int, error) { *f.writes++; return f.faultFile.Write(b) }

// TestDeferredLinesLeaveWithTheNextWrite: outcome lines wait in memory and
// reach the OS in the same write call as the next decision line, in chain
// order; the tick, Close and the queue bound flush them too.
func TestDeferredLinesLeaveWithTheNextWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush func(t *testing.T, l *Log)
		lines int // in the file after flush
		calls int // write calls in all
	}{
		{"next Write", func(t *testing.T, l *Log) {
			if err := l.Write(testEvent(4)); err != nil {
				t.Fatal(err)
			}
		}, 4, 1},
		{"sync tick", func(t *testing.T, l *Log) { l.syncOnce() }, 3, 1},
		{"Close", func(t *testing.T, l *Log) {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writes := 0
			ctl := &faults{writeBudget: -1}
			l := &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Hour,
				openFile: func(name string, flag int, perm os.FileMode) (file, error) {
					f, err := ctl.open(name, flag, perm)
					if err != nil {
						return nil, err
					}
					return countingFile{f.(*faultFile), &writes}, nil
				}}
			if err := l.Open(); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				if err := l.WriteDeferred(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			if writes != 0 || l.Stats().Seq != 0 {
				t.Fatalf("deferred lines were written at once (%d writes, seq %d)", writes, l.Stats().Seq)
			}
			tc.flush(t, l)
			if writes != tc.calls {
				t.Errorf("%d write calls, want %d", writes, tc.calls)
			}
			_ = l.Close()
			mustVerifyOK(t, dir, tc.lines)
		})
	}
}

// TestDeferredQueueDroppedOnFailure: a sink failure during the flush drops
// the queued lines with the failing one, and the chain goes back to the
// last line written, so the log verifies after recovery.
func TestDeferredQueueDroppedOnFailure(t *testing.T) {
	dir := t.TempDir()
	ctl := &faults{writeBudget: -1}
	l := &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Hour, openFile: ctl.open}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= 3; i++ {
		if err := l.WriteDeferred(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctl.set(nil, 30, nil) // a torn write, truncated away
	if err := l.Write(testEvent(4)); !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write under fault = %v, want ErrUnavailable wrapping ENOSPC", err)
	}
	if s := l.Stats(); s.Seq != 1 {
		t.Fatalf("seq = %d after the failed flush, want 1", s.Seq)
	}
	ctl.set(nil, -1, nil)
	if err := l.WriteDeferred(testEvent(5)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerifyOK(t, dir, 2)
}

// TestDeferredQueueIsBounded: the queue is written once it holds
// maxQueueBytes, without waiting for a Write or the tick.
func TestDeferredQueueIsBounded(t *testing.T) {
	dir := t.TempDir()
	l := &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Hour}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := 0
	for l.Stats().Seq == 0 {
		n++
		if err := l.WriteDeferred(testEvent(n)); err != nil {
			t.Fatal(err)
		}
		if n > maxQueueBytes {
			t.Fatal("the queue was never written")
		}
	}
	if got := l.Stats().Seq; got != uint64(n) {
		t.Fatalf("seq %d after %d deferred lines, want all written", got, n)
	}
}

// gateFile holds each write call until the test lets it go, and counts
// the calls.
type gateFile struct {
	*faultFile
	entered chan int // the length of each write call, as it starts
	release chan struct{}
}

func (f gateFile) Write(b []byte) (int, error) {
	f.entered <- len(b)
	<-f.release
	return f.faultFile.Write(b)
}

// gatedLog opens a Log in dir whose files hold every write call at gf
// until the test releases it, with faults ctl.
func gatedLog(t *testing.T, dir string) (*Log, *faults, gateFile) {
	t.Helper()
	ctl := &faults{writeBudget: -1}
	gf := gateFile{entered: make(chan int, 64), release: make(chan struct{})}
	l := &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Hour,
		openFile: func(name string, flag int, perm os.FileMode) (file, error) {
			f, err := ctl.open(name, flag, perm)
			if err != nil {
				return nil, err
			}
			gf.faultFile = f.(*faultFile)
			return gf, nil
		}}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	return l, ctl, gf
}

// TestConcurrentLinesShareOneWrite: lines written while another write call
// is in flight leave together in the next one (shared writes), each Write
// returns only once its own line reached the OS, and the chain verifies.
func TestConcurrentLinesShareOneWrite(t *testing.T) {
	dir := t.TempDir()
	l, _, gf := gatedLog(t, dir)
	first := make(chan error, 1)
	go func() { first <- l.Write(testEvent(0)) }()
	<-gf.entered // the first line's write call is in flight
	const n = 8
	done := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { done <- l.Write(testEvent(i)) }()
	}
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.queued == n })
	select {
	case err := <-done:
		t.Fatalf("a Write returned before its line was written: %v", err)
	default:
	}
	gf.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if size := <-gf.entered; size < n*100 { // the eight queued lines, in one call
		t.Fatalf("the next write call carried %d bytes, want all %d queued lines", size, n)
	}
	gf.release <- struct{}{}
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	go func() { // Close's own write calls, if any
		for range gf.entered {
			gf.release <- struct{}{}
		}
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(gf.entered)
	mustVerifyOK(t, dir, n+1)
}

// TestGroupFailureFailsEveryWaiter: when the shared write call fails,
// every line in it and every line chained on top of it meanwhile is
// refused, the chain goes back to the last line written, and the log
// verifies once the sink recovers.
func TestGroupFailureFailsEveryWaiter(t *testing.T) {
	dir := t.TempDir()
	l, ctl, gf := gatedLog(t, dir)
	go func() { <-gf.entered; gf.release <- struct{}{} }()
	if err := l.Write(testEvent(0)); err != nil {
		t.Fatal(err)
	}
	ctl.set(nil, 0, nil) // the disk is full
	first := make(chan error, 1)
	go func() { first <- l.Write(testEvent(1)) }()
	<-gf.entered
	const n = 4
	done := make(chan error, n)
	for i := 2; i < 2+n; i++ {
		go func() { done <- l.Write(testEvent(i)) }()
	}
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.queued == n })
	gf.release <- struct{}{}
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the failed line: %v", err)
	}
	for range n {
		if err := <-done; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("a line chained onto the failed one: %v, want ErrUnavailable", err)
		}
	}
	if s := l.Stats(); s.Seq != 1 {
		t.Fatalf("seq %d after the failure, want 1", s.Seq)
	}
	ctl.set(nil, -1, nil)
	go func() {
		for range gf.entered {
			gf.release <- struct{}{}
		}
	}()
	if err := l.Write(testEvent(9)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	close(gf.entered)
	mustVerifyOK(t, dir, 2)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
