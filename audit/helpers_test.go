package audit

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// fakeClock is a deterministic Log.Now: each call advances by a millisecond.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// testEvent is a typical proxy event; i makes each one distinct.
func testEvent(i int) *Event {
	return &Event{
		Name:     EventProxied,
		AuditID:  fmt.Sprintf("a_%04d", i),
		Session:  "s1",
		Method:   "GET",
		Host:     fmt.Sprintf("h%d.example.com", i),
		Port:     443,
		Path:     fmt.Sprintf("/repos/o/r/issues/%d", i),
		Decision: "allow",
		Reason:   "matched_operation",
		Status:   200,
	}
}

// openLog opens a Log on dir with a fake clock.
func openLog(t testing.TB, dir string, maxBytes int64) *Log {
	t.Helper()
	l := &Log{Dir: dir, MaxFileBytes: maxBytes, Now: newFakeClock().Now}
	if err := l.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// writeLog writes n test events to a new log in dir and closes it.
func writeLog(t testing.TB, dir string, n int, maxBytes int64) {
	t.Helper()
	l := openLog(t, dir, maxBytes)
	for i := 1; i <= n; i++ {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// mustFiles lists dir's audit files, failing the test if there are none.
func mustFiles(t testing.TB, dir string) []string {
	t.Helper()
	files, err := ListFiles(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("ListFiles(%s) = %v, %v", dir, files, err)
	}
	return files
}

// fileLines returns the lines of path without newlines (a partial last
// line is included as is).
func fileLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte("\n"))
	}
	return lines
}

// mustVerifyOK verifies dir and fails the test unless the chain is intact
// with want lines.
func mustVerifyOK(t testing.TB, dir string, want int) {
	t.Helper()
	rep, err := VerifyDir(dir)
	if err != nil {
		t.Fatalf("VerifyDir: %v", err)
	}
	if !rep.OK || rep.Lines != want {
		t.Fatalf("VerifyDir = %+v, want OK with %d lines", rep, want)
	}
}

// copyDir copies the audit files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	copyInto(t, src, dst)
	return dst
}
