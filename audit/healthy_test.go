package audit

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// failingAnchor is the fleet's Postgres gone: loads work (cached mark), saves fail.
type failingAnchor struct {
	mu   sync.Mutex
	m    Mark
	fail bool
}

func (a *failingAnchor) LoadMark() (Mark, error) { a.mu.Lock(); defer a.mu.Unlock(); return a.m, nil }
func (a *failingAnchor) SaveMark(m Mark) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return errors.New("connection refused")
	}
	a.m = m
	return nil
}

// TestHealthyWhileTheAnchorCannotBeWritten: after a clean restart, a Log
// whose anchor (a fleet's Postgres) cannot be written refuses every line;
// Healthy, which /readyz reports, says so instead of "ok".
func TestHealthyWhileTheAnchorCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	a := &failingAnchor{}
	session(t, provableLog(dir, testKey(t, 1), a), 5) // clean stop: the mark names the end
	if a.m.EndSeq == 0 {
		t.Fatal("setup: want the mark to name the end")
	}
	l := provableLog(dir, testKey(t, 1), a)
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a.mu.Lock()
	a.fail = true // Postgres goes away after the start
	a.mu.Unlock()
	if err := l.Write(testEvent(1)); err == nil {
		t.Fatal("setup: the Write went through without its anchor")
	}
	if l.Healthy() == nil {
		t.Fatal("every Write fails, but Healthy says the trail takes lines (/readyz: audit ok)")
	}
	a.mu.Lock()
	a.fail = false
	a.mu.Unlock()
	if err := l.Write(testEvent(2)); err != nil || l.Healthy() != nil {
		t.Fatalf("with the anchor back: Write %v, Healthy %v; want both nil", err, l.Healthy())
	}
}

// fullFile: the disk is full (every write ENOSPC, nothing lands).
type fullFile struct {
	*os.File
	full *atomic.Bool
}

func (f *fullFile) Write(b []byte) (int, error) {
	if f.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(b)
}

// TestHealthyOnAFullDisk: while every write fails (ENOSPC, every request
// refused), Healthy says so; a write that succeeds again clears it.
func TestHealthyOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	var full atomic.Bool
	l := provableLog(dir, testKey(t, 1), &memAnchor{})
	l.openFile = func(name string, flag int, perm os.FileMode) (file, error) {
		f, err := os.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return &fullFile{File: f, full: &full}, nil
	}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Write(testEvent(0)); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	var werr error
	for i := range 3 {
		werr = l.Write(testEvent(i + 1))
	}
	if werr == nil || !errors.Is(l.Healthy(), syscall.ENOSPC) {
		t.Fatalf("writes fail (%v) but Healthy = %v; want the failure", werr, l.Healthy())
	}
	full.Store(false)
	if err := l.Write(testEvent(9)); err != nil || l.Healthy() != nil {
		t.Fatalf("with room again: Write %v, Healthy %v; want both nil", err, l.Healthy())
	}
}
