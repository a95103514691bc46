package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// memAnchor keeps a Mark in memory, as the state database does on disk.
type memAnchor struct {
	mu sync.Mutex
	m  Mark
}

func (a *memAnchor) LoadMark() (Mark, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m, nil
}

func (a *memAnchor) SaveMark(m Mark) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.m = m
	return nil
}

func (a *memAnchor) mark() *Mark {
	m, _ := a.LoadMark()
	return &m
}

func testKey(t testing.TB, b byte) *Key {
	t.Helper()
	k, err := NewKey(bytes.Repeat([]byte{b}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// provableLog is a Log with a key and an anchor, rotating every few lines.
func provableLog(dir string, key *Key, a Anchor) *Log {
	return &Log{Dir: dir, Key: key, Anchor: a, Origin: "test.example/aileron-audit/" + filepath.Base(dir),
		MaxFileBytes: 4 << 10, CheckpointEvery: 10, Now: newFakeClock().Now}
}

// session opens a provable Log, writes n events and closes it.
func session(t testing.TB, l *Log, n int) {
	t.Helper()
	if err := l.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	for i := range n {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		if i%7 == 0 {
			l.autoCheckpoint() // as the background goroutine would
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// trailLines are every line of dir's trail, in order.
func trailLines(t testing.TB, dir string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range mustFiles(t, dir) {
		out = append(out, fileLines(t, f)...)
	}
	return out
}

func TestCheckpointsSignTheTreeOfTheLinesBeforeThem(t *testing.T) {
	dir := t.TempDir()
	key, a := testKey(t, 1), &memAnchor{}
	session(t, provableLog(dir, key, a), 40)
	session(t, provableLog(dir, key, a), 25) // resumes the tree from the last checkpoint
	lines := trailLines(t, dir)
	ref := &storedTree{}
	checkpoints := 0
	for i, line := range lines {
		if bytes.Contains(line, checkpointMarker) {
			ck, err := parseCheckpointLine(line, key.verifier)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			if ck.cp.Size != uint64(i) {
				t.Fatalf("the checkpoint at seq %d signs %d lines, not every line before it", i+1, ck.cp.Size)
			}
			root, err := tlog.TreeHash(int64(ck.cp.Size), ref)
			if err != nil || root != ck.cp.Root {
				t.Fatalf("checkpoint at seq %d signs %v for %d lines; tlog computes %v (%v)", i+1, ck.cp.Root, ck.cp.Size, root, err)
			}
			vkey, _ := key.VerifierKey(ck.cp.Origin)
			v, _ := note.NewVerifier(vkey)
			if _, err := note.Open([]byte(mustDetail(t, line, ckNote)), note.VerifierList(v)); err != nil {
				t.Fatalf("the note does not open with the printed key: %v", err)
			}
			checkpoints++
		}
		sum := sha256.Sum256(line) // leaf i is the digest of line i+1
		ref.add(t, sum[:])
	}
	if checkpoints < 4 {
		t.Fatalf("%d checkpoints over %d lines; want one every 10 lines and one per Close", checkpoints, len(lines))
	}
	if !bytes.Contains(lines[len(lines)-1], checkpointMarker) {
		t.Fatal("Close did not end the trail with a checkpoint")
	}
	if m := a.mark(); m.Seq != uint64(len(lines)) || m.LineHash != lineHash(lines[len(lines)-1]) {
		t.Fatalf("anchor mark %+v does not name the last line (seq %d)", m, len(lines))
	}
	rep, err := VerifyTrail(VerifyOptions{Dir: dir, Key: key, Mark: a.mark()})
	if err != nil || !rep.OK || rep.Checkpoints != checkpoints {
		t.Fatalf("VerifyTrail = %+v, %v; want OK with %d checkpoints", rep, err, checkpoints)
	}
}

func mustDetail(t testing.TB, line []byte, key string) string {
	t.Helper()
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil || ev.Details[key] == "" {
		t.Fatalf("no %s in %s (%v)", key, line, err)
	}
	return ev.Details[key]
}

// TestHeartbeatOfAnIdleTrail: a new trail is named by a checkpoint at
// the first tick; then, with nothing written, the heartbeat hands the
// same checkpoint to the witnesses again every interval without adding
// lines; the first line written is signed at the next interval.
func TestHeartbeatOfAnIdleTrail(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var pushed []uint64
	l := &Log{Dir: dir, Key: testKey(t, 1), CheckpointInterval: 20 * time.Millisecond, SyncInterval: 5 * time.Millisecond,
		Checkpointed: func(s Signed) { mu.Lock(); pushed = append(pushed, s.Seq); mu.Unlock() }}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 10 s", what)
			}
		}
	}
	waitFor("no heartbeat", func() bool { mu.Lock(); defer mu.Unlock(); return len(pushed) >= 3 })
	if s := l.Stats().Seq; s != 1 {
		t.Fatalf("an idle trail holds %d lines; want 1 (the checkpoint that names it)", s)
	}
	mu.Lock()
	for _, seq := range pushed {
		if seq != 1 {
			t.Fatalf("heartbeats pushed %v; want the one checkpoint again and again", pushed)
		}
	}
	mu.Unlock()
	if err := l.Write(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	waitFor("the line written was not signed", func() bool { return l.Stats().Seq == 3 })
}

// damage is a way of changing a trail under a stopped daemon.
type damage struct {
	name string
	do   func(t *testing.T, dir string, key *Key)
	want Problem
}

func damages() []damage {
	return []damage{
		{"cut lines off the end", func(t *testing.T, dir string, _ *Key) {
			files := mustFiles(t, dir)
			last := files[len(files)-1]
			lines := fileLines(t, last)
			n := len(lines) - 1
			for n > 1 && bytes.Contains(lines[n-1], checkpointMarker) {
				n--
			}
			writeLines(t, last, lines[:n])
		}, ProblemTruncated},
		{"delete the newest file", func(t *testing.T, dir string, _ *Key) {
			files := mustFiles(t, dir)
			mustRemove(t, files[len(files)-1])
		}, ProblemFileMissing},
		{"delete every file", func(t *testing.T, dir string, _ *Key) {
			for _, f := range mustFiles(t, dir) {
				mustRemove(t, f)
			}
		}, ProblemTrailMissing},
		{"rewrite a line and recompute the chain", func(t *testing.T, dir string, _ *Key) {
			rechain(t, dir, 5, func(line []byte) []byte {
				return bytes.Replace(line, []byte(`"decision":"allow"`), []byte(`"decision":"deny"`), 1)
			})
		}, ProblemRewritten},
		{"put back an older copy", nil, ProblemRolledBack},
		{"append lines behind a clean stop", func(t *testing.T, dir string, _ *Key) {
			writeLogAppend(t, dir, 2) // chained correctly, as someone with the files but not the key can
		}, ProblemAppended},
		{"swap in another daemon's trail", func(t *testing.T, dir string, _ *Key) {
			other := t.TempDir()
			session(t, provableLog(other, testKey(t, 9), &memAnchor{}), 80)
			for _, f := range mustFiles(t, dir) {
				mustRemove(t, f)
			}
			copyInto(t, other, dir)
		}, ProblemSwapped},
	}
}

func TestTrailDamageIsNamedByTheDaemonAndByVerify(t *testing.T) {
	for _, d := range damages() {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			key, a := testKey(t, 1), &memAnchor{}
			session(t, provableLog(dir, key, a), 30)
			if d.do == nil { // roll back: keep a copy, write on, put the copy back
				old := copyDir(t, dir)
				session(t, provableLog(dir, key, a), 30)
				for _, f := range mustFiles(t, dir) {
					mustRemove(t, f)
				}
				copyInto(t, old, dir)
			} else {
				d.do(t, dir, key)
			}
			err := provableLog(dir, key, a).Open()
			var te *TrailError
			if !errors.As(err, &te) || te.Kind != d.want || !errors.Is(err, ErrTrailBroken) {
				t.Fatalf("Open after %q = %v; want a %s TrailError", d.name, err, d.want)
			}
			rep, err := VerifyTrail(VerifyOptions{Dir: dir, Key: key, Mark: a.mark()})
			if err != nil || rep.OK || rep.Kind != d.want {
				t.Fatalf("VerifyTrail after %q = %+v, %v; want %s", d.name, rep, err, d.want)
			}
		})
	}
}

func TestVerifyFindsARewriteWithoutTheMark(t *testing.T) {
	dir := t.TempDir()
	key := testKey(t, 1)
	session(t, provableLog(dir, key, nil), 30)
	rechain(t, dir, 5, func(line []byte) []byte {
		return bytes.Replace(line, []byte(`"decision":"allow"`), []byte(`"decision":"deny"`), 1)
	})
	if rep, _ := Verify(mustFiles(t, dir)); !rep.OK {
		t.Fatalf("the chain alone should not see a recomputed chain: %+v", rep)
	}
	vkey, _ := key.VerifierKey("test.example/aileron-audit/" + filepath.Base(dir))
	rep, err := VerifyTrail(VerifyOptions{Dir: dir, VerifierKey: vkey})
	if err != nil || rep.OK || rep.Kind != ProblemRewritten || !strings.Contains(rep.Problem, "a line among seq ") {
		t.Fatalf("VerifyTrail = %+v, %v; want rewritten, naming the lines", rep, err)
	}
	other, _ := testKey(t, 2).VerifierKey("someone.else/aileron-audit/1")
	rep, _ = VerifyTrail(VerifyOptions{Dir: dir, VerifierKey: other})
	if rep.OK || rep.Kind != ProblemSwapped {
		t.Fatalf("VerifyTrail with another trail's key = %+v; want swapped", rep)
	}
}

func TestDaemonWithoutAMarkRefusesAForeignTrail(t *testing.T) {
	dir := t.TempDir()
	session(t, provableLog(dir, testKey(t, 9), nil), 12)
	err := provableLog(dir, testKey(t, 1), nil).Open()
	var te *TrailError
	if !errors.As(err, &te) || te.Kind != ProblemBadSignature {
		t.Fatalf("Open of a trail signed by another key = %v; want bad_signature", err)
	}
}

func TestLinesAfterTheLastCheckpointAreSignedAfterRestart(t *testing.T) {
	dir := t.TempDir()
	key, a := testKey(t, 1), &memAnchor{}
	session(t, provableLog(dir, key, a), 12)
	if m := a.mark(); m.EndSeq != m.Seq || m.EndHash != m.LineHash {
		t.Fatalf("a clean Close did not record its checkpoint as the trail's end: %+v", m)
	}
	// A crash: the daemon wrote on after its last checkpoint and never
	// recorded an end.
	m := a.mark()
	m.EndSeq, m.EndHash = 0, ""
	a.SaveMark(*m)
	writeLogAppend(t, dir, 5)
	l := provableLog(dir, key, a)
	if err := l.Open(); err != nil {
		t.Fatalf("Open with unsigned lines after the mark: %v", err)
	}
	l.autoCheckpoint() // due at once
	before := len(trailLines(t, dir))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := trailLines(t, dir)
	if !bytes.Contains(lines[before-1], checkpointMarker) {
		t.Fatal("the first tick after a restart did not sign the lines left unsigned")
	}
	rep, err := VerifyTrail(VerifyOptions{Dir: dir, Key: key, Mark: a.mark()})
	if err != nil || !rep.OK || rep.Signed != uint64(len(lines)-1) {
		t.Fatalf("VerifyTrail = %+v, %v", rep, err)
	}
}

// crash stops l as a killed daemon would: no last checkpoint, no record.
func crash(t *testing.T, l *Log) {
	t.Helper()
	close(l.stop)
	<-l.stopped
	l.mu.Lock()
	for l.flushing {
		l.flushed.Wait()
	}
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.closed = true
	l.mu.Unlock()
	l.unlockDir()
}

// TestTheEndOfARunHoldsUntilTheNextWrites: the record of the line a
// daemon stopped on stays in force through a start that fails, or is
// killed, before writing (a line appended then is still refused), and is
// cleared by the first write of the next run (a crash after it is a
// crash, not an append).
func TestTheEndOfARunHoldsUntilTheNextWrites(t *testing.T) {
	dir := t.TempDir()
	key, a := testKey(t, 1), &memAnchor{}
	session(t, provableLog(dir, key, a), 12)
	l := provableLog(dir, key, a)
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	crash(t, l) // a start that failed after opening the trail
	writeLogAppend(t, dir, 1)
	err := provableLog(dir, key, a).Open()
	var te *TrailError
	if !errors.As(err, &te) || te.Kind != ProblemAppended {
		t.Fatalf("Open after a line appended behind a failed start = %v, want appended", err)
	}

	dir = t.TempDir()
	a = &memAnchor{}
	session(t, provableLog(dir, key, a), 12)
	l = provableLog(dir, key, a)
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(testEvent(99)); err != nil {
		t.Fatal(err)
	}
	if m := a.mark(); m.EndSeq != 0 {
		t.Fatalf("the first write of a run left the previous end in force: %+v", m)
	}
	crash(t, l)
	if err := provableLog(dir, key, a).Open(); err != nil {
		t.Fatalf("Open after a crash = %v, want it to go on (unsigned lines are the documented window)", err)
	}
}

// TestLinesChangedUnderARunningLogAreRefusedAfterRestart: a line appended
// to, or cut from, the live file by someone else makes the running Log
// refuse (its Close then fails); the record keeps the daemon's own last
// line, so the next start refuses the trail instead of signing the forged
// line.
func TestLinesChangedUnderARunningLogAreRefusedAfterRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(t *testing.T, live string)
		want Problem
	}{
		{"appended", func(t *testing.T, live string) {
			lines := fileLines(t, live)
			last := lines[len(lines)-1]
			seq, _, _ := parseHead(last)
			forged := fmt.Sprintf(`{"time":"2026-11-22T05:00:00Z","seq":%d,"prev_hash":"%s","event":"connector.proxy.proxied","host":"forged.example"}`, seq+1, lineHash(last))
			writeLines(t, live, append(lines, []byte(forged)))
		}, ProblemAppended},
		{"cut", func(t *testing.T, live string) {
			lines := fileLines(t, live)
			writeLines(t, live, lines[:len(lines)-2])
		}, ProblemTruncated},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			key, a := testKey(t, 1), &memAnchor{}
			l := provableLog(dir, key, a)
			l.MaxFileBytes = 0
			if err := l.Open(); err != nil {
				t.Fatal(err)
			}
			for i := range 12 {
				if err := l.Write(testEvent(i)); err != nil {
					t.Fatal(err)
				}
				if i == 5 {
					l.autoCheckpoint()
				}
			}
			files := mustFiles(t, dir)
			c.do(t, files[len(files)-1])
			if err := l.Write(testEvent(50)); !errors.Is(err, ErrTrailChanged) {
				t.Fatalf("Write after the live file changed = %v, want ErrTrailChanged", err)
			}
			if err := l.Close(); err == nil {
				t.Fatal("Close over a changed live file succeeded")
			}
			err := provableLog(dir, key, a).Open()
			var te *TrailError
			if !errors.As(err, &te) || te.Kind != c.want {
				t.Fatalf("Open = %v, want %s", err, c.want)
			}
		})
	}
}

// TestLinesDuringCloseDoNotFollowItsCheckpoint: Writes racing with Close
// are refused once it begins, so its checkpoint stays the last line and
// the next start takes the trail.
func TestLinesDuringCloseDoNotFollowItsCheckpoint(t *testing.T) {
	for round := range 10 {
		dir := t.TempDir()
		key, a := testKey(t, 1), &memAnchor{}
		l := provableLog(dir, key, a)
		if err := l.Open(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if l.WriteDeferred(testEvent(g*1000+i)) != nil {
						return
					}
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := provableLog(dir, key, a).Open(); err != nil {
			lines := trailLines(t, dir)
			for _, l := range lines[max(0, len(lines)-4):] {
				t.Logf("%.160s", l)
			}
			t.Fatalf("round %d: Open after a Close raced with writes = %v", round, err)
		}
	}
}

func TestNewTrailRecordsTheBreakAndArchivesTheOldFiles(t *testing.T) {
	dir := t.TempDir()
	key, a := testKey(t, 1), &memAnchor{}
	session(t, provableLog(dir, key, a), 20)
	old := a.mark()
	files := mustFiles(t, dir)
	mustRemove(t, files[len(files)-1])
	l := provableLog(dir, key, a)
	l.Origin = "test.example/aileron-audit/second"
	archive, err := l.NewTrail("the newest file was lost with a disk")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := ListFiles(archive); len(left) != len(files)-1 {
		t.Fatalf("archive %s holds %d files, want the %d that were left", archive, len(left), len(files)-1)
	}
	lines := trailLines(t, dir)
	first := string(lines[0])
	for _, want := range []string{`"event":"audit.trail_started"`, `"seq":1,`, "file_missing", "lost with a disk", old.Origin, fmt.Sprintf(`"previous_seq":"%d"`, old.Seq)} {
		if !strings.Contains(first, want) {
			t.Fatalf("the new trail's first line lacks %q: %s", want, first)
		}
	}
	if a.mark().Origin != "test.example/aileron-audit/second" {
		t.Fatalf("mark = %+v, want the new trail's", a.mark())
	}
	session(t, provableLog(dir, key, a), 3)
	if rep, err := VerifyTrail(VerifyOptions{Dir: dir, Key: key, Mark: a.mark()}); err != nil || !rep.OK {
		t.Fatalf("VerifyTrail of the new trail = %+v, %v", rep, err)
	}
}

func TestASecondLogOnTheDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	defer l.Close()
	if err := (&Log{Dir: dir}).Open(); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second Log on a held directory: %v", err)
	}
}

// writeLogAppend appends n lines with a Log that keeps no tree (as a
// daemon that crashed before its next checkpoint leaves them).
func writeLogAppend(t testing.TB, dir string, n int) {
	t.Helper()
	l := &Log{Dir: dir, MaxFileBytes: 4 << 10}
	if err := l.Open(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := l.Write(testEvent(100 + i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeLines(t testing.TB, path string, lines [][]byte) {
	t.Helper()
	var b []byte
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustRemove(t testing.TB, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func copyInto(t testing.TB, src, dst string) {
	t.Helper()
	for _, f := range mustFiles(t, src) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// rechain edits line seq with edit and recomputes every later prev_hash,
// as someone who can write the files but not sign would.
func rechain(t testing.TB, dir string, seq int, edit func([]byte) []byte) {
	t.Helper()
	n, prev := 0, ""
	for _, f := range mustFiles(t, dir) {
		lines := fileLines(t, f)
		for i, line := range lines {
			n++
			if n == seq {
				line = edit(line)
				if bytes.Equal(line, lines[i]) {
					t.Fatalf("the edit changed nothing in %s", line)
				}
			}
			if n > seq {
				old := mustDetailHead(t, line)
				line = bytes.Replace(line, []byte(`"prev_hash":"`+old+`"`), []byte(`"prev_hash":"`+prev+`"`), 1)
			}
			lines[i] = line
			prev = lineHash(line)
		}
		writeLines(t, f, lines)
	}
}

func mustDetailHead(t testing.TB, line []byte) string {
	t.Helper()
	_, prev, problem := parseHead(line)
	if problem != "" {
		t.Fatal(problem)
	}
	return prev
}

// TestReviewedEdgesOfTheEndRecord: the first write of a run checks the
// live file as every later one does; a Log left open after NewTrail
// clears the end its checkpoint recorded at its first write; proofs
// refuse files that do not start the trail.
func TestReviewedEdgesOfTheEndRecord(t *testing.T) {
	key := testKey(t, 1)
	t.Run("first write after a clean stop", func(t *testing.T) {
		dir, a := t.TempDir(), &memAnchor{}
		session(t, provableLog(dir, key, a), 12)
		l := provableLog(dir, key, a)
		if err := l.Open(); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		files := mustFiles(t, dir)
		lines := fileLines(t, files[len(files)-1])
		writeLines(t, files[len(files)-1], append(lines, []byte(`{"seq":99,"prev_hash":"","event":"forged"}`)))
		if err := l.Write(testEvent(1)); !errors.Is(err, ErrTrailChanged) {
			t.Fatalf("the first write after a foreign append = %v, want ErrTrailChanged", err)
		}
	})
	t.Run("new trail, writes, crash", func(t *testing.T) {
		dir, a := t.TempDir(), &memAnchor{}
		session(t, provableLog(dir, key, a), 12)
		l := provableLog(dir, key, a)
		if _, err := l.NewTrail("test"); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := l.Write(testEvent(i)); err != nil {
				t.Fatal(err)
			}
		}
		crash(t, l)
		if err := provableLog(dir, key, a).Open(); err != nil {
			t.Fatalf("Open after NewTrail, writes and a crash = %v, want the crash window", err)
		}
	})
	t.Run("proof from files that skip the start", func(t *testing.T) {
		dir := t.TempDir()
		var last Signed
		l := provableLog(dir, key, nil)
		l.Checkpointed = func(s Signed) { last = s }
		session(t, l, 60)
		files := mustFiles(t, dir)
		if _, err := ProveIn(files[1:], 1, last.Checkpoint, last.Note); err == nil || !strings.Contains(err.Error(), "start at seq") {
			t.Fatalf("ProveIn over files that skip the start = %v", err)
		}
		if _, err := Prove(files[1:], 30); err == nil || !strings.Contains(err.Error(), "start at seq") {
			t.Fatalf("Prove over files that skip the start = %v", err)
		}
	})
}
