package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tailPoll is how often a following Tail looks for appended lines and new
// files.
const tailPoll = 200 * time.Millisecond

// Filter selects events for Tail. Empty fields match everything.
type Filter struct {
	// Session, Connector and Decision match exactly.
	Session, Connector, Decision string
	// Run matches an action run's lines (run_id) exactly.
	Run string
	// Event matches exactly, or by prefix when it ends in ".*"
	// ("approval.*" matches approval.requested and approval.denied).
	Event string
	// Since drops events whose time is before it.
	Since time.Time
	// FromSeq drops lines whose seq is below it.
	FromSeq uint64
}

// Match reports whether ev passes the filter.
func (f Filter) Match(ev *Event) bool {
	switch {
	case f.Session != "" && ev.Session != f.Session,
		f.Connector != "" && ev.Connector != f.Connector,
		f.Decision != "" && ev.Decision != f.Decision,
		f.Run != "" && ev.RunID != f.Run,
		!f.Since.IsZero() && ev.Time.Before(f.Since),
		ev.Seq < f.FromSeq:
		return false
	}
	if prefix, ok := strings.CutSuffix(f.Event, "*"); ok {
		return strings.HasPrefix(string(ev.Name), prefix)
	}
	return f.Event == "" || string(ev.Name) == f.Event
}

// RunTree places the lines of action runs, read in chain order, in their
// call trees. The zero value is ready to use.
type RunTree struct {
	depth map[string]int // by audit_id
}

// Depth returns ev's depth in its run's call tree: one more than the line
// its parent_audit_id names, 0 for a root (action.started) or a line whose
// parent was not seen. It remembers ev's audit_id at that depth (a
// request's decision and outcome lines share one).
func (t *RunTree) Depth(ev *Event) int {
	if t.depth == nil {
		t.depth = map[string]int{}
	}
	d := 0
	if p, ok := t.depth[ev.ParentAuditID]; ok && ev.ParentAuditID != "" {
		d = p + 1
	}
	if _, ok := t.depth[ev.AuditID]; !ok && ev.AuditID != "" {
		t.depth[ev.AuditID] = d
	}
	return d
}

// Tail calls out for every line of dir's log, in chain order, whose event
// passes filter, with the line's bytes (without newline; out may keep them)
// and its parsed Event. Files whose successor was created before
// filter.Since are skipped unread. With follow false it returns nil after
// the last complete line; with follow true it keeps polling for appended
// lines and new (rotated) files until ctx ends, and then returns
// ctx.Err(). A partial last line is not delivered until it is complete,
// and torn bytes that Log truncates away are skipped (a truncation racing
// with one read can still surface as ErrCorrupt; Verify is the authority).
// An error from out stops Tail and is returned as is; an unparsable or
// over-long line stops it with an error wrapping ErrCorrupt naming the file
// and line; other failures wrap the os error.
func Tail(ctx context.Context, dir string, follow bool, filter Filter, out func(line []byte, ev *Event) error) error {
	t := &tailer{dir: dir, filter: filter, out: out}
	defer t.closeFile()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.drain(); err != nil {
			return err
		}
		next, err := t.nextFile()
		if err != nil {
			return err
		}
		if next != "" {
			if err := t.drain(); err != nil { // lines written before the rotation
				return err
			}
			if err := t.openFile(next); err != nil {
				return err
			}
			continue
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tailPoll):
		}
	}
}

// tailer is the state of one Tail call.
type tailer struct {
	dir    string
	filter Filter
	out    func([]byte, *Event) error
	name   string // current file path ("" before the first)
	f      *os.File
	lr     *lineReader
	off    int64 // offset of the first byte not yet returned as a line
	lineNo int
}

// nextFile returns the file after the current one ("" if none yet).
func (t *tailer) nextFile() (string, error) {
	files, err := ListFiles(t.dir)
	if err != nil {
		return "", err
	}
	for i, f := range files {
		if f <= t.name {
			continue
		}
		if t.name == "" && !t.filter.Since.IsZero() && i+1 < len(files) {
			if ts, _, ok := parseFileName(filepath.Base(files[i+1])); ok && ts.Before(t.filter.Since) {
				continue // every line of f predates its successor's creation
			}
		}
		return f, nil
	}
	return "", nil
}

func (t *tailer) openFile(name string) error {
	t.closeFile()
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("audit: tail: %w", err)
	}
	t.name, t.f, t.off, t.lineNo = name, f, 0, 0
	t.lr = newLineReader(f)
	return nil
}

func (t *tailer) closeFile() {
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
}

// drain delivers every complete line now in the current file.
func (t *tailer) drain() error {
	if t.f == nil {
		return nil
	}
	if err := t.resync(); err != nil {
		return err
	}
	for {
		line, err := t.lr.next()
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, errLineTooLong):
			return fmt.Errorf("%w: %s line %d is longer than %d bytes", ErrCorrupt, t.name, t.lineNo+1, MaxLineBytes)
		case err != nil:
			return fmt.Errorf("audit: tail: read %s: %w", t.name, err)
		}
		t.lineNo++
		t.off += int64(len(line)) + 1
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("%w: %s line %d: %v; run `aileron audit verify`", ErrCorrupt, t.name, t.lineNo, err)
		}
		if !t.filter.Match(&ev) {
			continue
		}
		if err := t.out(append([]byte(nil), line...), &ev); err != nil {
			return err
		}
	}
}

// resync handles a writer that truncated away a torn append we had partly
// read (and maybe appended a different line since): when the bytes at the
// pending line's offset no longer match, read again from there. A file
// that shrank below the last complete line is corrupt.
func (t *tailer) resync() error {
	p := t.lr.partial()
	if p == 0 {
		return nil
	}
	buf := make([]byte, p)
	if n, _ := t.f.ReadAt(buf, t.off); n == p && bytes.Equal(buf, t.lr.pending[:p]) {
		return nil
	}
	st, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: tail: %w", err)
	}
	if st.Size() < t.off {
		return fmt.Errorf("%w: %s shrank below line %d while being read", ErrCorrupt, t.name, t.lineNo)
	}
	if _, err := t.f.Seek(t.off, io.SeekStart); err != nil {
		return fmt.Errorf("audit: tail: %w", err)
	}
	t.lr.reset(t.f)
	return nil
}
