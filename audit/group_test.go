package audit

import (
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSharedWritesUnderFaults: concurrent Write/WriteDeferred with faults
// toggling and rotation; every nil Write must be in the log, no failed
// Write may be, and the chain must verify.
func TestSharedWritesUnderFaults(t *testing.T) {
	for round := range 20 {
		dir := t.TempDir()
		ctl := &faults{writeBudget: -1}
		l := &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Millisecond, MaxFileBytes: 4000, openFile: ctl.open}
		if err := l.Open(); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var fwg sync.WaitGroup
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			r := rand.New(rand.NewSource(int64(round)))
			for {
				select {
				case <-stop:
					ctl.set(nil, -1, nil)
					return
				default:
				}
				switch r.Intn(4) {
				case 0:
					ctl.set(nil, r.Intn(500), nil)
				case 1:
					ctl.set(syscall.ENOSPC, -1, nil)
				default:
					ctl.set(nil, -1, nil)
				}
				time.Sleep(time.Duration(r.Intn(300)) * time.Microsecond)
			}
		}()
		var mu sync.Mutex
		ok := map[string]bool{}
		failed := map[string]bool{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 60 {
					ev := testEvent(g*1000 + i)
					if i%3 == 0 {
						_ = l.WriteDeferred(ev) // deferred lines may be dropped
						continue
					}
					err := l.Write(ev)
					mu.Lock()
					if err == nil {
						ok[ev.AuditID] = true
					} else {
						failed[ev.AuditID] = true
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(stop)
		fwg.Wait()
		_ = l.Close()
		rep, err := VerifyDir(dir)
		if err != nil || !rep.OK {
			t.Fatalf("round %d: verify %+v %v", round, rep, err)
		}
		seen := map[string]bool{}
		for _, f := range mustFiles(t, dir) {
			for _, line := range fileLines(t, f) {
				var ev Event
				if json.Unmarshal(line, &ev) == nil {
					seen[ev.AuditID] = true
				}
			}
		}
		for id := range ok {
			if !seen[id] {
				t.Fatalf("round %d: Write of %s returned nil but the line is not in the log", round, id)
			}
		}
		for id := range failed {
			if seen[id] {
				t.Fatalf("round %d: Write of %s failed but its line is in the log", round, id)
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// TestFailedBatchKeepsCompleteLinesOnRecord: two decision lines share one
// write call; the disk fills after the first of them and the torn tail
// cannot be cut, so the file is abandoned with the first line complete in
// it. That line is on record: its Write succeeds (its request goes on),
// the other fails, and the chain goes on from it, with no seq used twice.
func TestFailedBatchKeepsCompleteLinesOnRecord(t *testing.T) {
	dir := t.TempDir()
	l, ctl, gf := gatedLog(t, dir)
	first := make(chan error, 1)
	go func() { first <- l.Write(testEvent(1)) }()
	<-gf.entered // line 1 in flight
	second, third := make(chan error, 1), make(chan error, 1)
	go func() { second <- l.Write(testEvent(2)) }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.queued == 1 })
	go func() { third <- l.Write(testEvent(3)) }()
	waitFor(t, func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.queued == 2 })
	gf.release <- struct{}{}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	size := <-gf.entered // lines 2 and 3, one call
	ctl.set(nil, size/2+5, syscall.EIO)
	gf.release <- struct{}{}
	if err := <-second; err != nil {
		t.Fatalf("line 2 is complete on record, yet its Write failed: %v", err)
	}
	if err := <-third; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("line 3 was torn, yet its Write returned %v", err)
	}
	ctl.set(nil, -1, nil)
	go func() {
		for range gf.entered {
			gf.release <- struct{}{}
		}
	}()
	if err := l.Write(testEvent(4)); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	close(gf.entered)
	seqs := map[uint64]string{}
	for _, f := range mustFiles(t, dir) {
		for _, line := range fileLines(t, f) {
			var ev Event
			if json.Unmarshal(line, &ev) != nil {
				continue // the torn tail
			}
			if had, dup := seqs[ev.Seq]; dup {
				t.Fatalf("seq %d used twice: %s and %s", ev.Seq, had, ev.AuditID)
			}
			seqs[ev.Seq] = ev.AuditID
		}
	}
	if seqs[1] != "a_0001" || seqs[2] != "a_0002" || seqs[3] != "a_0004" || len(seqs) != 3 {
		t.Fatalf("lines on record %v, want a_0001, a_0002, then a_0004 at seq 3", seqs)
	}
}
