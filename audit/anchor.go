package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Mark is what the daemon keeps outside the trail of the last checkpoint
// it wrote: enough to tell, at the next start, whether the trail on disk
// is still the one it signed.
type Mark struct {
	Origin string
	// Size and Root are the checkpoint's tree.
	Size uint64
	Root string // base64
	// Seq and LineHash are the checkpoint line's own seq and chain hash.
	Seq      uint64
	LineHash string
	// File is the base name of the file the checkpoint line went to.
	File string
	Time time.Time
	// EndSeq and EndHash, when set, are the last line the daemon wrote
	// as it stopped (the final checkpoint's line after a clean stop): the
	// trail must end with that very line until the next run writes on.
	// Zero after a crash (lines after the checkpoint are then unsigned,
	// see docs/audit.md).
	EndSeq  uint64
	EndHash string
}

// Anchor keeps the Mark of the trail outside the trail's directory (the
// daemon keeps it in its state database). Load returns the zero Mark
// when none was saved.
type Anchor interface {
	LoadMark() (Mark, error)
	SaveMark(Mark) error
}

// ErrTrailBroken: the trail on disk is not the one the daemon last
// signed (see TrailError). Open refuses it, so the daemon forwards
// nothing until an operator puts the trail back or starts a new one
// (NewTrail), which records the break.
var ErrTrailBroken = errors.New("audit trail is not the one the daemon signed")

// Problem names what is wrong with a trail. The set is closed; Verify's
// Report and TrailError use it.
type Problem string

// Problems of a trail, from a single line to the whole trail.
const (
	ProblemUnparsable   Problem = "unparsable_line"  // a line that is not an audit line
	ProblemPartialLine  Problem = "partial_line"     // a last line without its newline
	ProblemEditedLine   Problem = "edited_line"      // a line that no longer matches the next one's prev_hash
	ProblemLinesMissing Problem = "lines_missing"    // seq jumps: lines cut out of the middle
	ProblemReordered    Problem = "reordered"        // seq goes back
	ProblemRewritten    Problem = "rewritten"        // the chain was recomputed: a signed root no longer matches
	ProblemBadSignature Problem = "bad_signature"    // a checkpoint that does not verify under the trail's key
	ProblemBadCheck     Problem = "bad_checkpoint"   // a checkpoint line that does not parse or claims the impossible
	ProblemSwapped      Problem = "swapped"          // the trail of another daemon (or another trail)
	ProblemTruncated    Problem = "truncated"        // lines cut off the end
	ProblemFileMissing  Problem = "file_missing"     // the newest file deleted
	ProblemRolledBack   Problem = "rolled_back"      // an older copy of the trail put back
	ProblemTrailMissing Problem = "trail_missing"    // every file gone
	ProblemForked       Problem = "witness_conflict" // the trail differs from what a witness cosigned
	ProblemAppended     Problem = "appended"         // lines after the last line the daemon wrote as it stopped
)

// TrailError says what is wrong with a trail, precisely. It matches
// ErrTrailBroken.
type TrailError struct {
	Kind   Problem
	Seq    uint64 // the line it is about, when there is one
	Detail string
}

func (e *TrailError) Error() string { return string(e.Kind) + ": " + e.Detail }

// Is makes errors.Is(err, ErrTrailBroken) hold.
func (e *TrailError) Is(target error) bool { return target == ErrTrailBroken }

// trailEnd is what a check of a trail against a Mark needs to know.
type trailEnd struct {
	dir      string
	lines    bool   // the trail holds at least one line
	lastSeq  uint64 // its last line's seq
	origin   string // of its last checkpoint ("" when none)
	last     *ckLine
	markHash string // hash of its line at the Mark's seq ("" when it has none)
	endHash  string // hash of its line at the Mark's EndSeq ("" when it has none)
}

// againstMark compares a trail with the Mark of the last checkpoint its
// daemon signed; nil means the trail still holds that checkpoint line,
// unchanged, under the same origin.
func againstMark(t trailEnd, m Mark) *TrailError {
	signed := fmt.Sprintf("the daemon last signed a checkpoint of %d lines at seq %d (trail %s, file %s, %s)",
		m.Size, m.Seq, m.Origin, m.File, m.Time.UTC().Format(time.RFC3339))
	switch {
	case !t.lines:
		return &TrailError{Kind: ProblemTrailMissing, Detail: fmt.Sprintf("%s holds no audit line, but %s: every file of the trail was deleted", t.dir, signed)}
	case t.origin != "" && t.origin != m.Origin:
		return &TrailError{Kind: ProblemSwapped, Detail: fmt.Sprintf("the trail's checkpoints are signed as %s, but %s: these files come from another daemon or another trail", t.origin, signed)}
	case t.lastSeq < m.Seq:
		return shortTrail(t, m, signed)
	case t.markHash != m.LineHash:
		return &TrailError{Kind: ProblemRewritten, Seq: m.Seq, Detail: fmt.Sprintf("line seq %d is not the checkpoint line the daemon wrote there, and %s: lines up to it were rewritten and the chain recomputed", m.Seq, signed)}
	case m.EndSeq != 0:
		return againstEnd(t, m)
	}
	return nil
}

// againstEnd compares the trail's end with the last line the daemon
// wrote as it stopped.
func againstEnd(t trailEnd, m Mark) *TrailError {
	stopped := fmt.Sprintf("the daemon's last line as it stopped was seq %d", m.EndSeq)
	switch {
	case t.lastSeq > m.EndSeq:
		return &TrailError{Kind: ProblemAppended, Seq: m.EndSeq + 1, Detail: fmt.Sprintf("%d line(s) follow seq %d, but %s: they were written while it was stopped, or behind its back, not by it", t.lastSeq-m.EndSeq, m.EndSeq, stopped)}
	case t.lastSeq < m.EndSeq:
		return &TrailError{Kind: ProblemTruncated, Seq: t.lastSeq, Detail: fmt.Sprintf("the trail ends at seq %d, but %s: %d line(s) were cut off its end", t.lastSeq, stopped, m.EndSeq-t.lastSeq)}
	case t.endHash != m.EndHash:
		return &TrailError{Kind: ProblemRewritten, Seq: m.EndSeq, Detail: fmt.Sprintf("line seq %d is not the line the daemon wrote there (%s): lines after its last checkpoint were rewritten", m.EndSeq, stopped)}
	}
	return nil
}

// shortTrail names how a trail came to end before the Mark's line: the
// files from the Mark's on deleted (the trail ends just before it), an
// older copy put back (it ends with an older checkpoint), or cut.
func shortTrail(t trailEnd, m Mark, signed string) *TrailError {
	gone := false
	if m.File != "" {
		_, err := os.Stat(filepath.Join(t.dir, m.File))
		gone = errors.Is(err, os.ErrNotExist)
	}
	_, first, named := parseFileName(m.File)
	fileMissing := &TrailError{Kind: ProblemFileMissing, Seq: t.lastSeq, Detail: fmt.Sprintf("file %s is missing and the trail ends at seq %d, but %s: the newest file(s) were deleted", m.File, t.lastSeq, signed)}
	switch {
	case gone && named && first == t.lastSeq+1:
		return fileMissing
	case t.last != nil && t.last.seq == t.lastSeq && t.last.cp.Size < m.Size:
		return &TrailError{Kind: ProblemRolledBack, Seq: t.lastSeq, Detail: fmt.Sprintf("the trail ends with its checkpoint of %d lines at seq %d, but %s: an older copy of the trail was put back", t.last.cp.Size, t.lastSeq, signed)}
	case gone:
		return fileMissing
	}
	return &TrailError{Kind: ProblemTruncated, Seq: t.lastSeq, Detail: fmt.Sprintf("the trail ends at seq %d, but %s: at least %d line(s) were cut off its end", t.lastSeq, signed, m.Seq-t.lastSeq)}
}
