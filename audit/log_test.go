package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestChainAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	const n = 20
	writeLog(t, dir, n, 700) // a line is ~300 bytes: 2 lines per file
	files := mustFiles(t, dir)
	if len(files) < 5 {
		t.Fatalf("got %d files, want rotation into many", len(files))
	}
	var prevHash string
	seq := uint64(0)
	for _, f := range files {
		_, first, ok := parseFileName(filepath.Base(f))
		if !ok || first != seq+1 {
			t.Errorf("%s: name does not carry first seq %d", f, seq+1)
		}
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := fileLines(t, f)
		if st.Size() > 700 && len(lines) > 1 {
			t.Errorf("%s is %d bytes with %d lines, over MaxFileBytes", f, st.Size(), len(lines))
		}
		for _, line := range lines {
			var ev Event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(err)
			}
			seq++
			if ev.Seq != seq || ev.PrevHash != prevHash {
				t.Fatalf("%s: seq %d prev %q, want seq %d prev %q", f, ev.Seq, ev.PrevHash, seq, prevHash)
			}
			prevHash = lineHash(line)
		}
	}
	if seq != n {
		t.Fatalf("read %d lines, want %d", seq, n)
	}
	mustVerifyOK(t, dir, n)
}

func TestOpenResumesChain(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 3, 0)
	l := openLog(t, dir, 0)
	if s := l.Stats(); s.Seq != 3 {
		t.Fatalf("resumed at seq %d, want 3", s.Seq)
	}
	ev := testEvent(4)
	if err := l.Write(ev); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 4 {
		t.Errorf("Write set seq %d, want 4", ev.Seq)
	}
	if files := mustFiles(t, dir); len(files) != 1 {
		t.Errorf("got files %v, want the first file resumed", files)
	}
	mustVerifyOK(t, dir, 4)
}

func TestOpenRefusesCorruptTail(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"partial last line", func(b []byte) []byte { return b[:len(b)-5] }, "partial line"},
		{"unparsable last line", func(b []byte) []byte { return append(b, "{oops\n"...) }, "not a valid JSON"},
		{"no seq", func(b []byte) []byte { return append(b, "{\"prev_hash\":\"\"}\n"...) }, "no seq"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLog(t, dir, 2, 0)
			f := mustFiles(t, dir)[0]
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, c.edit(b), 0o600); err != nil {
				t.Fatal(err)
			}
			err = (&Log{Dir: dir}).Open()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), f) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open = %v, want ErrCorrupt naming %s and %q", err, f, c.want)
			}
		})
	}
}

func TestWriteRefusals(t *testing.T) {
	l := &Log{Dir: t.TempDir()}
	if err := l.Write(testEvent(1)); !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrClosed) {
		t.Errorf("Write before Open = %v, want ErrUnavailable and ErrClosed", err)
	}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	if err := l.Open(); err == nil {
		t.Error("second Open succeeded")
	}
	big := testEvent(2)
	big.Details = map[string]string{"x": strings.Repeat("x", MaxLineBytes)}
	bad := testEvent(3)
	bad.Fields = map[string]any{"c": make(chan int)}
	for _, ev := range []*Event{nil, big, bad} {
		if err := l.Write(ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("Write(invalid) = %v, want ErrInvalidEvent", err)
		}
	}
	if err := l.Write(testEvent(4)); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Seq != 1 || s.Lines != 1 || s.Errors != 4 {
		t.Errorf("Stats = %+v, want seq 1, 1 line, 4 errors", s)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := l.Write(testEvent(5)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	mustVerifyOK(t, l.Dir, 1)
}

func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	var mirror bytes.Buffer
	l := &Log{Dir: dir, MaxFileBytes: 4096, Mirror: &mirror}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				if err := l.Write(testEvent(w*each + i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerifyOK(t, dir, workers*each)
	var all []byte
	for _, f := range mustFiles(t, dir) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	if !bytes.Equal(all, mirror.Bytes()) {
		t.Error("Mirror did not receive exactly the recorded lines")
	}
	if s := l.Stats(); s.Lines != workers*each || s.Rotations == 0 || s.Syncs == 0 {
		t.Errorf("Stats = %+v, want %d lines, rotations and syncs", s, workers*each)
	}
}

// faultFile wraps a real file and fails writes past a byte budget.
type faultFile struct {
	*os.File
	ctl *faults
}

// faults controls the files of one Log.
type faults struct {
	mu          sync.Mutex
	createErr   error // fail creating new files
	writeBudget int   // bytes a write may still put down; <0 = unlimited
	truncateErr error // fail Truncate
}

func (f *faultFile) Write(b []byte) (int, error) {
	f.ctl.mu.Lock()
	budget := f.ctl.writeBudget
	f.ctl.mu.Unlock()
	if budget < 0 || budget >= len(b) {
		return f.File.Write(b)
	}
	n, _ := f.File.Write(b[:budget])
	return n, syscall.ENOSPC
}

func (f *faultFile) Truncate(size int64) error {
	f.ctl.mu.Lock()
	err := f.ctl.truncateErr
	f.ctl.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (c *faults) set(create error, budget int, trunc error) {
	c.mu.Lock()
	c.createErr, c.writeBudget, c.truncateErr = create, budget, trunc
	c.mu.Unlock()
}

func (c *faults) open(name string, flag int, perm os.FileMode) (file, error) {
	c.mu.Lock()
	err := c.createErr
	c.mu.Unlock()
	if err != nil && flag&os.O_CREATE != 0 {
		return nil, err
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, ctl: c}, nil
}

func TestFailClosedAndRecover(t *testing.T) {
	for _, c := range []struct {
		name      string
		createErr error
		budget    int
		truncErr  error
		maxBytes  int64 // small: the failing write needs a new file
		wantFiles int   // after recovery
		wantTorn  bool  // the first file keeps a torn tail
	}{
		{"write fails cleanly", nil, 0, nil, 0, 1, false},
		{"torn write truncated away", nil, 40, nil, 0, 1, false},
		{"torn write not removable", nil, 40, syscall.EIO, 0, 2, true},
		{"cannot create the next file", syscall.ENOSPC, -1, nil, 700, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ctl := &faults{writeBudget: -1}
			l := &Log{Dir: dir, MaxFileBytes: c.maxBytes, Now: newFakeClock().Now, openFile: ctl.open}
			if err := l.Open(); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 2; i++ {
				if err := l.Write(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			ctl.set(c.createErr, c.budget, c.truncErr)
			for try := 0; try < 3; try++ {
				ev := testEvent(3)
				err := l.Write(ev)
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Write under fault = %v, want ErrUnavailable wrapping ENOSPC", err)
				}
				if s := l.Stats(); s.Seq != 2 {
					t.Fatalf("seq advanced to %d on a failed write", s.Seq)
				}
			}
			ctl.set(nil, -1, nil)
			for i := 3; i <= 4; i++ {
				if err := l.Write(testEvent(i)); err != nil {
					t.Fatalf("Write after recovery: %v", err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			files := mustFiles(t, dir)
			if len(files) != c.wantFiles {
				t.Fatalf("files = %v, want %d", files, c.wantFiles)
			}
			if !c.wantTorn {
				mustVerifyOK(t, dir, 4)
				return
			}
			rep, err := VerifyDir(dir)
			if err != nil || rep.OK || rep.File != files[0] || rep.Line != 3 || !strings.Contains(rep.Problem, "partial last line") {
				t.Fatalf("VerifyDir = %+v, %v; want the torn line 3 of %s", rep, err, files[0])
			}
			// The new file chains from the last complete line.
			old, next := fileLines(t, files[0]), fileLines(t, files[1])
			var ev Event
			if err := json.Unmarshal(next[0], &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq != 3 || ev.PrevHash != lineHash(old[1]) {
				t.Errorf("new file starts at seq %d prev %s, want seq 3 chained to line 2", ev.Seq, ev.PrevHash)
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	l := &Log{Dir: b.TempDir()}
	if err := l.Open(); err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ev := testEvent(1)
	ev.Fields = map[string]any{"q": "is:open", "to": "sha256:0123"}
	b.ReportAllocs()
	for b.Loop() {
		ev.Time = ev.Time.AddDate(0, 0, 0)
		if err := l.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTrailChangedUnderTheLog: the file the chain continues in, deleted
// while the Log writes (noticed at the next write), or moved away or
// replaced (noticed at the next sync tick), refuses every line
// (ErrUnavailable, ErrTrailChanged) instead of feeding a file nobody will
// read; moved back, the chain goes on.
func TestTrailChangedUnderTheLog(t *testing.T) {
	l, live := oneLineLog(t)
	refused := func(what string, i int) {
		t.Helper()
		err := l.Write(testEvent(i))
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrTrailChanged) || !strings.Contains(err.Error(), filepath.Base(live)) {
			t.Fatalf("%s: Write = %v, want ErrUnavailable and ErrTrailChanged naming the file", what, err)
		}
	}
	if err := os.Rename(live, live+".moved"); err != nil {
		t.Fatal(err)
	}
	l.syncOnce() // a move keeps the file's lines (under its new name): noticed at the tick
	refused("moved away", 2)
	if err := os.WriteFile(live, nil, 0o600); err != nil { // another file at the path
		t.Fatal(err)
	}
	refused("replaced", 3)
	if err := errors.Join(os.Remove(live), os.Rename(live+".moved", live)); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(testEvent(4)); err != nil {
		t.Fatalf("back at its path: %v", err)
	}
	l.noteResumed() // the next tick records the gap
	lines := fileLines(t, live)
	if last := string(lines[len(lines)-1]); !strings.Contains(last, `"event":"audit.trail_resumed"`) || !strings.Contains(last, "moved away") {
		t.Fatalf("the trail does not record that it was gone: %s", last)
	}
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	refused("deleted", 5)
	if s := l.Stats(); s.Seq != 3 {
		t.Fatalf("seq %d, want 3: refused lines must not advance the chain", s.Seq)
	}
}

// TestForeignWriteToTheLiveFileIsRefused: a line appended (or bytes cut)
// by another process under the running Log is noticed at the next write,
// which is refused like a deleted file's: the chain would otherwise go on
// past a line the daemon did not write.
func TestForeignWriteToTheLiveFileIsRefused(t *testing.T) {
	l, live := oneLineLog(t)
	f, err := os.OpenFile(live, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"seq":2,"prev_hash":"","event":"forged"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = l.Write(testEvent(2))
	if !errors.Is(err, ErrTrailChanged) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("Write after a foreign append = %v, want ErrTrailChanged naming another process", err)
	}
}

// oneLineLog is an open Log (no sync ticks) with one line written, and
// its live file; the test's cleanup closes it.
func oneLineLog(t *testing.T) (l *Log, live string) {
	t.Helper()
	dir := t.TempDir()
	l = &Log{Dir: dir, Now: newFakeClock().Now, SyncInterval: time.Hour}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Write(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	return l, mustFiles(t, dir)[0]
}
