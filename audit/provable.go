package audit

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Defaults of the zero checkpoint fields of Log.
const (
	DefaultCheckpointEvery    = 5000
	DefaultCheckpointInterval = 10 * time.Second
)

// Signed is a checkpoint as written to the trail: the signed note and the
// seq of the line that carries it.
type Signed struct {
	Checkpoint
	Note []byte
	Seq  uint64
	// File and Offset: where the line starts (the base name of its file;
	// ProveConsistency starts reading there).
	File   string
	Offset int64
}

func (l *Log) checkpointEvery() uint64 {
	if l.CheckpointEvery > 0 {
		return l.CheckpointEvery
	}
	return DefaultCheckpointEvery
}

func (l *Log) checkpointInterval() time.Duration {
	if l.CheckpointInterval > 0 {
		return l.CheckpointInterval
	}
	return DefaultCheckpointInterval
}

// addSums adds the leaves of lines whose SHA-256 are sums to r.
func addSums(r *compactRange, sums [][sha256.Size]byte) {
	for _, sum := range sums {
		r.add(leafOfSum(sum))
	}
}

// loadTree rebuilds the tree of the trail Open resumed, checks the trail
// against the Anchor's Mark, and picks the trail's origin. A trail that
// is not the one the daemon signed fails with a *TrailError.
func (l *Log) loadTree() error {
	var mark Mark
	if l.Anchor != nil && !l.newTrail {
		var err error
		if mark, err = l.Anchor.LoadMark(); err != nil {
			return fmt.Errorf("audit: read the last checkpoint's record: %w", err)
		}
	}
	files, err := ListFiles(l.Dir)
	if err != nil {
		return err
	}
	ts, err := scanTail(files, l.Key.trailVerifier(mark.Origin), mark.Seq, mark.EndSeq)
	if err != nil {
		return err
	}
	if ts.lastSeq != l.seq {
		return fmt.Errorf("%w: the trail's last line has seq %d, but reading it through gives %d; run `aileron audit verify`", ErrCorrupt, l.seq, ts.lastSeq)
	}
	l.tree = ts.tree
	if ts.last != nil {
		l.origin, l.ckSize, l.ckSeq = ts.last.cp.Origin, ts.last.cp.Size, ts.last.seq
	}
	if mark.Seq != 0 {
		end := trailEnd{dir: l.Dir, lines: l.seq > 0, lastSeq: l.seq, origin: l.origin, last: ts.last, markHash: ts.markHash, endHash: ts.endHash}
		if terr := againstMark(end, mark); terr != nil {
			return terr
		}
	}
	if l.origin == "" {
		l.origin = mark.Origin
	}
	// This run writes on past the end the record names: the first write
	// clears it (goOn), so that a crash later does not read as lines
	// appended behind the daemon's back, while a start that fails before
	// writing leaves it in force.
	l.unend = mark.EndSeq != 0
	mark.EndSeq, mark.EndHash = 0, ""
	l.endless = mark
	if mark.Seq != 0 && mark.Seq == l.ckSeq {
		l.lastMark = mark
	}
	if l.origin == "" {
		if l.origin, err = l.newOrigin(); err != nil {
			return err
		}
	}
	l.ckAt = l.now()
	if l.ckSeq != l.seq || l.ckSeq == 0 {
		// lines no checkpoint covers yet, or a trail not named by one:
		// sign at the first tick
		l.ckAt = time.Time{}
	}
	return nil
}

func (l *Log) newOrigin() (string, error) {
	if l.Origin != "" {
		return l.Origin, nil
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return NewOrigin(host)
}

// checkpointDue says whether a checkpoint line should be written now.
// Called with l.mu held and no batch in flight.
func (l *Log) checkpointDue(final bool) bool {
	switch {
	case l.Key == nil || !l.opened:
		return false
	case final:
		return l.seq > l.ckSeq
	}
	return l.seq-l.ckSize >= l.checkpointEvery() || l.now().Sub(l.ckAt) >= l.checkpointInterval()
}

// checkpoint writes a signed checkpoint line of every line before it when
// one is due (final: at Close, when any line follows the last one),
// records its Mark with the Anchor and hands it to Checkpointed. The
// queue is written first and the line chained with l.mu held from the
// tree's root to its seq, so a checkpoint at seq S always signs the S-1
// lines before it.
func (l *Log) checkpoint(final bool) error {
	l.ckMu.Lock() // one at a time: marks are saved in seq order
	defer l.ckMu.Unlock()
	l.mu.Lock()
	for l.flushing || len(l.queue) > 0 {
		if l.flushing {
			l.flushed.Wait()
		} else if err := l.flush(); err != nil {
			l.mu.Unlock()
			return err
		}
	}
	if !final && l.ckSeq != 0 && l.seq == l.ckSeq && l.checkpointDue(false) {
		// Idle: the last checkpoint's line still ends the trail, and the
		// record names it. The heartbeat hands it to the witnesses again
		// (a fresh cosignature) instead of growing the trail.
		l.ckAt = l.now()
		sg := l.lastSigned
		l.mu.Unlock()
		if sg.Seq != 0 && l.Checkpointed != nil {
			l.Checkpointed(sg)
		}
		return nil
	}
	if !l.checkpointDue(final) || l.closed && !final {
		last := l.lastMark
		l.mu.Unlock()
		if final && last.Seq != 0 && last.Seq == l.seq && l.Anchor != nil { // the trail ends with its checkpoint: say so
			last.EndSeq, last.EndHash = last.Seq, last.LineHash
			return l.saveMark(last)
		}
		return nil
	}
	start := time.Now()
	cp := Checkpoint{Origin: l.origin, Size: l.seq, Root: l.tree.root()}
	rng := l.tree.clone()
	l.ckAt = l.now()
	signed, err := l.Key.Sign(cp)
	if err != nil {
		l.mu.Unlock()
		return fmt.Errorf("audit: sign checkpoint: %w", err)
	}
	ev := &Event{Name: EventCheckpoint, Node: l.Node, Details: checkpointDetails(cp, &rng, signed)}
	tail, terr := appendTail(nil, ev)
	if final {
		l.sealing = ev // Close refuses other lines already: this one goes
	}
	hash, b, err := l.chain(ev, tail, terr, false, start)
	l.sealing = nil
	if err != nil {
		l.mu.Unlock()
		return err
	}
	sg := Signed{Checkpoint: cp, Note: signed, Seq: ev.Seq, File: filepath.Base(b.file), Offset: b.start}
	m := Mark{Origin: cp.Origin, Size: cp.Size, Root: base64.StdEncoding.EncodeToString(cp.Root[:]),
		Seq: ev.Seq, LineHash: hash, File: sg.File, Time: ev.Time}
	if final {
		m.EndSeq, m.EndHash = ev.Seq, hash
	}
	l.ckSize, l.ckSeq, l.lastMark, l.lastSigned = cp.Size, ev.Seq, m, sg
	l.stats.Checkpoints++
	l.mu.Unlock()
	if l.Anchor != nil {
		if err := l.saveMark(m); err != nil && final {
			return err
		}
	}
	if l.Checkpointed != nil {
		l.Checkpointed(sg)
	}
	return nil
}

// noteResumed records, once the live file is back at its path, that it
// was gone and for how long: the trail says when nothing was recorded
// (and nothing forwarded).
func (l *Log) noteResumed() {
	l.mu.Lock()
	for l.flushing {
		l.flushed.Wait()
	}
	if !l.back {
		l.mu.Unlock()
		return
	}
	what, since := l.gone, l.goneAt
	l.gone, l.back = "", false
	name := filepath.Base(l.name)
	l.mu.Unlock()
	ev := &Event{Name: EventTrailResumed, Details: map[string]string{
		"file": name, "problem": what, "since": since.UTC().Format(time.RFC3339Nano),
	}}
	if err := l.Write(ev); err != nil {
		l.mu.Lock()
		l.gone, l.goneAt, l.back = what, since, true // try again at the next tick
		l.mu.Unlock()
	}
}

// saveMark records m with the Anchor; a failure is counted in Stats and
// reported (OnError): the record lags, and a trail cut back to it would
// go unnoticed at the next start.
func (l *Log) saveMark(m Mark) error {
	err := l.Anchor.SaveMark(m)
	if err != nil {
		err = fmt.Errorf("audit: record the checkpoint at seq %d outside the trail: %w", m.Seq, err)
		l.mu.Lock()
		l.fail(err)
		l.mu.Unlock()
		l.report(err)
	}
	return err
}

// report hands a failure no Write returns to OnError.
func (l *Log) report(err error) {
	if l.OnError != nil {
		l.OnError(err)
	}
}

// goOn clears the end the record names, before this run's first write:
// from now on the trail goes past it. Called by the batch writer.
func (l *Log) goOn() error {
	if !l.unend || l.Anchor == nil {
		return nil
	}
	if err := l.Anchor.SaveMark(l.endless); err != nil {
		return fmt.Errorf("%w: cannot record that the trail goes on past the end the daemon recorded as it stopped: %w", ErrUnavailable, err)
	}
	l.unend = false
	return nil
}

// sealEnd records, when Close could not end the trail with a checkpoint
// (the sink failed, or the file changed under it), the last line the
// daemon did write: the next start then refuses a trail that ends
// anywhere else. Called by Close with l.mu held and no batch in flight.
func (l *Log) sealEnd() {
	m := l.lastMark
	if l.Anchor == nil || m.Seq == 0 || l.seq < m.Seq {
		return
	}
	m.EndSeq, m.EndHash = l.seq, l.hash
	if err := l.Anchor.SaveMark(m); err != nil {
		l.fail(fmt.Errorf("audit: record the trail's last line outside it: %w", err))
	}
}

// autoCheckpoint writes a checkpoint when one is due; a failure is
// counted in Stats and retried at the next tick.
func (l *Log) autoCheckpoint() {
	if err := l.checkpoint(false); err != nil {
		l.mu.Lock()
		l.fail(err)
		l.mu.Unlock()
		l.report(err)
	}
}

// TrailOrigin is the name of the trail being written ("" before Open or
// without a Key).
func (l *Log) TrailOrigin() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.origin
}

// NewTrail starts a new trail in l.Dir on purpose, for an operator who
// means it (`aileron audit new-trail`): it moves every file of the
// current trail, whatever its state, into a new subdirectory
// archive-<UTC time> (nothing is deleted), opens l on a fresh origin and
// writes as the new trail's first line an EventTrailStarted that records
// the reason, the previous trail's last Mark, what was wrong with it, and
// where its files went; then a checkpoint. l must have a Key and not be
// open; it is left open. Another Log holding Dir makes it fail.
func (l *Log) NewTrail(reason string) (archive string, err error) {
	if l.Key == nil {
		return "", errors.New("audit: NewTrail needs the signing key")
	}
	if err := l.lockDir(); err != nil {
		return "", err
	}
	probe := &Log{Dir: l.Dir, Key: l.Key, Anchor: l.Anchor, Now: l.Now}
	problem := "none: the previous trail checked out"
	if perr := probe.load(); perr != nil {
		problem = perr.Error()
	}
	var mark Mark
	if l.Anchor != nil {
		mark, _ = l.Anchor.LoadMark()
	}
	archive, err = l.archiveFiles()
	if err != nil {
		l.unlockDir()
		return "", err
	}
	l.newTrail = true
	if err := l.start(); err != nil {
		return archive, err
	}
	ev := &Event{Name: EventTrailStarted, Details: map[string]string{
		"reason": reason, "problem": problem, "archive": filepath.Base(archive),
		"previous_origin": mark.Origin, "previous_size": fmt.Sprint(mark.Size), "previous_root": mark.Root,
		"previous_seq": fmt.Sprint(mark.Seq),
	}}
	if mark.Origin != "" && l.signed(archive) { // what checks the archived trail, should no copy of it be at hand
		if vkey, err := l.Key.VerifierKey(mark.Origin); err == nil {
			ev.Details["previous_key"] = vkey
		}
	}
	if err := l.Write(ev); err != nil {
		return archive, err
	}
	if err := l.checkpoint(true); err != nil {
		return archive, err
	}
	// l stays open: its next write clears the end that checkpoint recorded.
	l.mu.Lock()
	l.endless, l.unend = l.lastMark, true
	l.endless.EndSeq, l.endless.EndHash = 0, ""
	l.mu.Unlock()
	return archive, nil
}

// archiveFiles moves the trail's files into a new archive-<time>
// subdirectory of Dir.
func (l *Log) archiveFiles() (string, error) {
	files, err := ListFiles(l.Dir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(l.Dir, "archive-"+l.now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("audit: archive the previous trail: %w", err)
	}
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(dir, filepath.Base(f))); err != nil {
			return dir, fmt.Errorf("audit: archive %s: %w (the files moved so far are in %s)", f, err, dir)
		}
	}
	return dir, nil
}

// signed reports whether l.Key signed the checkpoints of the trail archived
// in dir (a key made after the old one was lost did not: its verifier key
// would check nothing).
func (l *Log) signed(dir string) bool {
	rep, err := VerifyTrail(VerifyOptions{Dir: dir, Key: l.Key})
	return err == nil && rep.Checkpoints > 0 && rep.Kind != ProblemBadSignature
}
