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
