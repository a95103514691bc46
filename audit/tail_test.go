package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
)

// collect runs a non-following Tail and returns the seqs it delivered.
func collect(t *testing.T, dir string, f Filter) []uint64 {
	t.Helper()
	var seqs []uint64
	err := Tail(context.Background(), dir, false, f, func(line []byte, ev *Event) error {
		if lineHash(line) == "" || ev.Seq == 0 {
			return fmt.Errorf("bad delivery %q", line)
		}
		seqs = append(seqs, ev.Seq)
		return nil
	})
	if err != nil {
		t.Fatalf("Tail: %v", err)
	}
	return seqs
}

func TestTailFilters(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 1000)
	evs := []*Event{
		{Name: "connector.proxy.proxied", Session: "s1", Connector: "github://o/r", Decision: "allow"},
		{Name: "connector.proxy.rejected", Session: "s2", Decision: "deny"},
		{Name: "approval.requested", Session: "s1", Connector: "github://o/r"},
		{Name: "approval.denied", Session: "s2"},
		{Name: "store.installed", Details: map[string]string{"fqn": "github://o/r"}},
		{Name: "action.started", Session: "s1", RunID: "ar_1", AuditID: "a_run"},
		{Name: "connector.proxy.proxied", Session: "s1", RunID: "ar_1", ParentAuditID: "a_run", AuditID: "a_1"},
		{Name: "connector.proxy.proxied", Session: "s1", RunID: "ar_2", AuditID: "a_2"},
	}
	for _, ev := range evs {
		if err := l.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		filter Filter
		want   []uint64
	}{
		{"all", Filter{}, []uint64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"session", Filter{Session: "s1"}, []uint64{1, 3, 6, 7, 8}},
		{"run", Filter{Run: "ar_1"}, []uint64{6, 7}},
		{"run and event", Filter{Run: "ar_1", Event: "action.*"}, []uint64{6}},
		{"connector", Filter{Connector: "github://o/r"}, []uint64{1, 3}},
		{"decision", Filter{Decision: "deny"}, []uint64{2}},
		{"event", Filter{Event: "approval.denied"}, []uint64{4}},
		{"event prefix", Filter{Event: "approval.*"}, []uint64{3, 4}},
		{"since", Filter{Since: evs[3].Time}, []uint64{4, 5, 6, 7, 8}},
		{"combined", Filter{Session: "s2", Event: "approval.*"}, []uint64{4}},
		{"nothing", Filter{Session: "nobody"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := collect(t, dir, c.filter); !slices.Equal(got, c.want) {
				t.Errorf("seqs = %v, want %v", got, c.want)
			}
		})
	}
}

// TestRunTreeDepth: a line sits one below the line its parent_audit_id
// names; a root, or a line whose parent was not seen, at the top.
func TestRunTreeDepth(t *testing.T) {
	var tree RunTree
	for i, c := range []struct {
		ev   Event
		want int
	}{
		{Event{Name: EventActionStarted, AuditID: "a_run"}, 0},
		{Event{Name: EventProxied, AuditID: "a_1", ParentAuditID: "a_run"}, 1},
		{Event{Name: EventCompleted, AuditID: "a_1", ParentAuditID: "a_run"}, 1},
		{Event{Name: EventProxied, AuditID: "a_nested", ParentAuditID: "a_1"}, 2},
		{Event{Name: EventActionCompleted, ParentAuditID: "a_run"}, 1},
		{Event{Name: EventProxied, AuditID: "a_x", ParentAuditID: "a_unseen"}, 0},
		{Event{Name: EventActionPending}, 0},
	} {
		if got := tree.Depth(&c.ev); got != c.want {
			t.Errorf("line %d (%s %s): depth %d, want %d", i, c.ev.Name, c.ev.AuditID, got, c.want)
		}
	}
}

func TestTailFollowsAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 700) // two lines per file
	defer l.Close()
	const n = 9
	for i := 1; i <= 3; i++ {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan uint64, n)
	done := make(chan error, 1)
	go func() {
		done <- Tail(ctx, dir, true, Filter{}, func(_ []byte, ev *Event) error {
			got <- ev.Seq
			return nil
		})
	}()
	next := func(want uint64) {
		t.Helper()
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("Tail delivered seq %d, want %d", seq, want)
			}
		case err := <-done:
			t.Fatalf("Tail returned early: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatalf("Tail did not deliver seq %d", want)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		next(seq)
	}
	for i := 4; i <= n; i++ {
		if err := l.Write(testEvent(i)); err != nil {
			t.Fatal(err)
		}
		next(uint64(i))
	}
	if files := mustFiles(t, dir); len(files) < 4 {
		t.Fatalf("only %d files: the test did not rotate", len(files))
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Tail after cancel = %v, want context.Canceled", err)
	}
}

func TestTailErrors(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 3, 0)
	stop := errors.New("stop")
	calls := 0
	err := Tail(context.Background(), dir, false, Filter{}, func([]byte, *Event) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Tail with failing out = %v after %d calls, want stop after 1", err, calls)
	}
	f := mustFiles(t, dir)[0]
	tamper(t, f, func(ls [][]byte) []byte { ls[1] = []byte("garbage"); return join(ls) })
	err = Tail(context.Background(), dir, false, Filter{}, func([]byte, *Event) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("Tail over a garbage line = %v, want ErrCorrupt", err)
	}
	if err := Tail(context.Background(), dir+"/missing", false, Filter{}, nil); err == nil {
		t.Error("Tail of a missing directory succeeded")
	}
}

// A follower that read part of a torn append re-reads from the last
// complete line once the writer truncates the torn bytes away.
func TestTailSurvivesTruncatedTornWrite(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 2, 0)
	name := mustFiles(t, dir)[0]
	lines := fileLines(t, name)
	if err := os.WriteFile(name, join(lines[:1]), 0o600); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	tl := &tailer{dir: dir, out: func(_ []byte, ev *Event) error { seqs = append(seqs, ev.Seq); return nil }}
	defer tl.closeFile()
	if err := tl.openFile(name); err != nil {
		t.Fatal(err)
	}
	appendBytes := func(b []byte) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	appendBytes([]byte(`{"torn":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx`))
	if err := tl.drain(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(name, int64(len(lines[0])+1)); err != nil {
		t.Fatal(err)
	}
	appendBytes(join(lines[1:2]))
	if err := tl.drain(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []uint64{1, 2}) {
		t.Errorf("delivered %v, want [1 2]", seqs)
	}
}
