package audit

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tearFile tears a write call carrying more than one line, once armed:
// the first line goes down whole, then 5 bytes of the next, then ENOSPC;
// Truncate fails (the torn tail stays: the file is abandoned).
type tearFile struct {
	*os.File
	armed *bool
	mu    *sync.Mutex
}

func (f *tearFile) Write(b []byte) (int, error) {
	f.mu.Lock()
	armed := *f.armed
	f.mu.Unlock()
	if i := bytes.IndexByte(b, '\n'); armed && i >= 0 && i < len(b)-1 {
		n, _ := f.File.Write(b[:i+1+5])
		return n, syscall.ENOSPC
	}
	return f.File.Write(b)
}

func (f *tearFile) Truncate(int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *f.armed {
		return syscall.EIO
	}
	return nil
}

// TestCheckpointInATornBatchNamesItsFile: a checkpoint whose write call
// also carries a line chained while it yielded, torn after the checkpoint
// line in a file that cannot be cut back, is on record (its line is whole)
// and its Mark names the file and offset it stays at; the torn line's
// request is refused.
func TestCheckpointInATornBatchNamesItsFile(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// The two lines share a call only when the Write is scheduled during
	// the checkpoint's yield, which GOMAXPROCS 1 makes all but certain; an
	// attempt where they did not is tried again.
	for range 10 {
		if tornCheckpointAttempt(t) {
			return
		}
	}
	t.Fatal("in 10 attempts the checkpoint never shared its write call with the line chained during its yield")
}

// tornCheckpointAttempt runs the scenario once; it reports false when the
// checkpoint and the line went out in separate calls (nothing tested).
func tornCheckpointAttempt(t *testing.T) bool {
	dir := t.TempDir()
	key, a := testKey(t, 1), &memAnchor{}
	var mu sync.Mutex
	armed := false
	l := provableLog(dir, key, a)
	l.SyncInterval = time.Hour
	l.CheckpointInterval = time.Hour
	l.openFile = func(name string, flag int, perm os.FileMode) (file, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return &tearFile{File: f, armed: &armed, mu: &mu}, nil
	}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	for i := range 3 {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	var ckErr, wErr error
	var wg sync.WaitGroup
	l.mu.Lock()
	wg.Add(2)
	go func() { defer wg.Done(); ckErr = l.checkpoint(false) }() // due: no checkpoint yet
	time.Sleep(20 * time.Millisecond)
	go func() { defer wg.Done(); wErr = l.Write(testEvent(99)) }()
	time.Sleep(20 * time.Millisecond)
	l.mu.Unlock()
	wg.Wait()
	if ckErr == nil && wErr == nil {
		return false
	}
	if ckErr != nil || wErr == nil {
		t.Fatalf("checkpoint: %v, write: %v; want the checkpoint on record and the torn line refused", ckErr, wErr)
	}
	m := a.mark()
	if m.File == "" || m.File == "." {
		t.Fatalf("checkpoint on record at seq %d, but its Mark names file %q", m.Seq, m.File)
	}
	if _, err := os.Stat(filepath.Join(dir, m.File)); err != nil {
		t.Fatal(err)
	}
	return true
}
