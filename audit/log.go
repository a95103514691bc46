package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Defaults of the zero Log fields.
const (
	DefaultMaxFileBytes = 64 << 20
	DefaultSyncInterval = 100 * time.Millisecond
)

// file is what Log needs of an open log file (*os.File in production).
type file interface {
	io.Writer
	Truncate(size int64) error
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

// Log is the hash-chained audit sink. Set the exported fields, call Open,
// then Write from any number of goroutines (writes are serialized), and
// Close. A Log must not be copied after Open.
//
// Durability: Write returns once the line has been handed to the OS (the
// write system call succeeded); a background goroutine fsyncs every
// SyncInterval (batched fsync) and Close fsyncs a last time. Concurrent
// Writes share write calls (see Write).
//
// Fail closed and recover: when a file cannot be created, reopened or
// appended to (disk full, permission denied, RLIMIT_FSIZE/EFBIG, I/O
// error), Write returns an error wrapping ErrUnavailable and the chain does
// not advance (seq and prev_hash stay at the last complete line). A torn
// (partial) append is truncated away; if that truncation fails the file is
// abandoned, keeps its torn tail (Verify reports it as a partial last
// line: the damage stays visible) unless it held no complete line, in which
// case it is deleted; the next Write starts a new file that chains from the last
// complete line. Every Write after a failure retries, so recording resumes
// by itself when the sink recovers.
type Log struct {
	// Dir holds the log files; Open creates it (0700) if missing.
	Dir string
	// MaxFileBytes starts a new file when the current one would grow past
	// it (a single larger line still gets a file of its own); 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// SyncInterval is the group-commit fsync period; 0 means
	// DefaultSyncInterval.
	SyncInterval time.Duration
	// Mirror, if non-nil, receives a copy of every recorded line (for
	// example os.Stdout). Mirror errors are ignored: it is not the record.
	Mirror io.Writer
	// Now is the clock for event times and file names; nil means time.Now.
	Now func() time.Time

	// Key, when set, makes the trail provable (docs/audit.md): the Log
	// keeps an RFC 6962 Merkle tree over its lines and writes a signed
	// checkpoint line (EventCheckpoint) every CheckpointEvery lines,
	// every CheckpointInterval even when idle, and at Close. nil: a hash
	// chain only.
	Key *Key
	// Origin names a new trail (when Dir holds none); "" means
	// NewOrigin(os.Hostname()). An existing trail keeps its own.
	Origin string
	// Node, when set, is written into every line (Event.Node): the name
	// of the fleet node whose trail this is. "" on a single node.
	Node string
	// CheckpointEvery and CheckpointInterval: 0 means
	// DefaultCheckpointEvery and DefaultCheckpointInterval.
	CheckpointEvery    uint64
	CheckpointInterval time.Duration
	// Anchor keeps the Mark of the last checkpoint outside Dir, and Open
	// checks the trail against it (a trail cut short, rolled back,
	// rewritten, swapped or deleted is a *TrailError). nil: Open checks
	// the trail against itself only.
	Anchor Anchor
	// Checkpointed, if set, gets each checkpoint once its line is
	// written, on the Log's background goroutine (to push it to
	// witnesses); it must not block for long.
	Checkpointed func(Signed)
	// OnError, if set, hears of the failures no Write returns: a
	// checkpoint, or its record with the Anchor, that could not be
	// written (from the background goroutine). nil: they are only
	// counted in Stats.
	OnError func(error)

	// openFile opens log files; nil means os.OpenFile. Tests replace it to
	// inject failures.
	openFile func(name string, flag int, perm os.FileMode) (file, error)
	// yield is the yield before a shared write; nil means runtime.Gosched.
	// Tests replace it to count yields.
	yield func()

	mu     sync.Mutex
	opened bool
	closed bool
	// sealing is Close's last checkpoint while it is chained: the one
	// line taken once closed.
	sealing *Event
	f       file        // nil when no file is open
	fi      os.FileInfo // f's, to notice the path no longer names it
	// pathSuspect: the last path check found the name no longer f's; each
	// write checks again until it is (owned like the file state).
	pathSuspect bool
	name        string // current file path; may be set while f is nil (reuse)
	reuse       bool   // name is clean (ends with a complete line) and may be reopened
	size        int64  // bytes in name
	dirty       bool   // written since the last fsync
	seq         uint64 // seq of the last complete line
	hash        string // hash of the last complete line
	qseq        uint64 // seq of the last line chained, queued or written
	qhash       string // its hash
	queue       []byte // lines chained but not yet written
	queued      int    // how many
	batch       *batch // what the writers of the queued lines wait on
	spare       []byte // the buffer of the last batch written, reused as the next queue
	// flushing: a batch is being written with l.mu released; until it
	// ends, only its writer touches the file state (f, name, reuse, size,
	// dirty, lastTS, files), and inflightEnd is where the file will end.
	flushing    bool
	inflightEnd int64
	// sinkErr is the last write call's failure, when no call succeeded
	// since (at sinkFailedAt): Healthy reports it for a while.
	sinkErr      error
	sinkFailedAt time.Time
	flushed      sync.Cond // broadcast when a batch ends (L is &l.mu)
	files        fileNotes // what the file operations of a batch counted, merged into stats after it
	line         []byte    // the line being built
	tails        sync.Pool // *[]byte: buffers for the lines' tails, encoded outside l.mu
	lastTS       time.Time
	stats        Stats
	gate         yieldGate // whether yields before a write help
	stop         chan struct{}
	stopped      chan struct{}
	lock         *os.File // holds the directory's lock while open

	// With a Key: the tree over the l.seq written lines (the batch
	// writer's while flushing, like the file state), its spare, the
	// trail's origin, and the last checkpoint's tree size, line seq and
	// time. ckDue asks the background goroutine for a checkpoint.
	tree, scratch compactRange
	// qsums are the SHA-256 of the queued lines (their leaves), in
	// step with queue; spareSums the storage of the last batch's.
	qsums, spareSums [][sha256.Size]byte
	origin           string
	ckSize, ckSeq    uint64
	ckAt             time.Time
	ckDue            chan struct{}
	ckMu             sync.Mutex // serializes checkpoint
	lastMark         Mark       // the last checkpoint's (zero: none yet)
	lastSigned       Signed     // the last checkpoint written this run (the idle heartbeat's)
	// unend: the record names the end of the last run, and this run has
	// not written yet; endless is that record without it (goOn).
	unend    bool
	endless  Mark
	newTrail bool // NewTrail: no Mark to check against
	// gone says how the live file went away (and when); back, that it
	// is at its path again: the next tick records both (owned like the
	// file state).
	gone   string
	goneAt time.Time
	back   bool
}

func (l *Log) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Log) maxFileBytes() int64 {
	if l.MaxFileBytes > 0 {
		return l.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (l *Log) open(name string, flag int, perm os.FileMode) (file, error) {
	if l.openFile != nil {
		return l.openFile(name, flag, perm)
	}
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File must not become a non-nil file
	}
	return f, nil
}

// Open prepares the log: it creates Dir if needed and resumes the chain
// from the last line of the newest non-empty file (its seq and hash). It
// does not verify older lines; use Verify for that. A newest file that ends
// in a partial or unparsable line fails with an error wrapping ErrCorrupt
// that names the file; other failures (Dir not creatable or readable, Open
// called twice) are plain errors naming the cause.
//
// With a Key, Open also rebuilds the Merkle tree from the trail's last
// checkpoint on, and with an Anchor checks the trail against the Mark of
// the last checkpoint written: a trail that is not that one fails with a
// *TrailError (errors.Is ErrTrailBroken) saying what happened to it.
// Only one Log at a time may hold Dir (a lock file); another fails.
func (l *Log) Open() error {
	if err := l.lockDir(); err != nil {
		return err
	}
	return l.start()
}

// start is Open once Dir is locked; it releases the lock on failure.
func (l *Log) start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.opened {
		return errors.New("audit: Log.Open called twice; use one Log per directory")
	}
	if err := l.load(); err != nil {
		l.unlockDir()
		return err
	}
	l.qseq, l.qhash = l.seq, l.hash
	l.flushed.L = &l.mu
	interval := l.SyncInterval
	if interval <= 0 {
		interval = DefaultSyncInterval
	}
	l.stop, l.stopped, l.ckDue = make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	go l.syncLoop(interval, l.stop, l.stopped)
	l.opened = true
	return nil
}

// load resumes the chain, and the tree with a Key.
func (l *Log) load() error {
	if err := l.resume(); err != nil {
		return err
	}
	if l.Key == nil {
		return nil
	}
	return l.loadTree()
}

// resume recovers seq and hash from the newest non-empty file, and reuses
// that file for appending when no newer (empty) file exists.
func (l *Log) resume() error {
	files, err := ListFiles(l.Dir)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	if ts, _, ok := parseFileName(filepath.Base(files[len(files)-1])); ok {
		l.lastTS = ts
	}
	for i := len(files) - 1; i >= 0; i-- {
		line, err := lastLine(files[i])
		if err != nil {
			if errors.Is(err, ErrCorrupt) {
				return err
			}
			return fmt.Errorf("audit: read %s: %w", files[i], err)
		}
		if line == nil {
			continue // empty file
		}
		seq, _, problem := parseHead(line)
		if problem != "" {
			return fmt.Errorf("%w: %s: last line: %s; run `aileron audit verify`", ErrCorrupt, files[i], problem)
		}
		l.seq, l.hash = seq, lineHash(line)
		if i == len(files)-1 {
			st, err := os.Stat(files[i])
			if err != nil {
				return fmt.Errorf("audit: stat %s: %w", files[i], err)
			}
			l.name, l.size, l.reuse = files[i], st.Size(), true
		}
		return nil
	}
	return nil
}

// Write records ev as the next line of the chain. It fills ev.Time (when
// zero; always converted to UTC), ev.Seq and ev.PrevHash, encodes one
// line and appends it, after any lines WriteDeferred queued, in one write
// system call; it returns after that call succeeded. Lines that concurrent
// Writes queue while a call is in flight share the next call, so a Write
// also fails when the call that carried its line failed. Failures wrap
// ErrUnavailable (sink failure, also wrapping the os error such as
// syscall.ENOSPC or syscall.EFBIG; or the Log is not open: then also
// ErrClosed) or ErrInvalidEvent (ev is nil, does not encode, or its line
// exceeds MaxLineBytes); in both cases nothing was recorded and the chain
// did not advance (a sink failure also drops the queued lines).
func (l *Log) Write(ev *Event) error {
	_, err := l.writeLine(ev, false)
	return err
}

// WriteDeferred records ev like Write, except that its line may wait in
// memory: it reaches the OS with the next Write's line (in the same write
// call), at the next SyncInterval tick, when the queue reaches
// maxQueueBytes, or at Close, whichever comes first. It is for lines that
// nothing waits on (a request's outcome): a crash loses at most the lines
// of one SyncInterval, and a sink failure drops the queue (counted in
// Stats.Errors). Its errors are those of Write for an event that cannot be
// encoded, or of the flush it triggered.
func (l *Log) WriteDeferred(ev *Event) error {
	_, err := l.writeLine(ev, true)
	return err
}

// maxQueueBytes bounds the lines WriteDeferred holds in memory.
const maxQueueBytes = 64 << 10

// writeLine is Write and WriteDeferred; it also returns the line's chain
// hash.
func (l *Log) writeLine(ev *Event, deferred bool) (hash string, err error) {
	start := time.Now()
	if ev == nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		return "", l.fail(fmt.Errorf("%w: nil event", ErrInvalidEvent))
	}
	if l.Node != "" {
		ev.Node = l.Node
	}
	tb := l.tailBuf()
	tail, terr := appendTail((*tb)[:0], ev) // the costly part, outside the lock
	*tb = tail
	defer l.tails.Put(tb)
	l.mu.Lock()
	defer l.mu.Unlock()
	hash, _, err = l.chain(ev, tail, terr, deferred, start)
	return hash, err
}

// chain puts ev's line, its head made of the chain's state and its
// encoded tail, at the end of the queue and, unless deferred, waits until
// the write call that carries it ends; it returns the line's hash and the
// batch it went in. Called with l.mu held.
func (l *Log) chain(ev *Event, tail []byte, terr error, deferred bool, start time.Time) (hash string, b *batch, err error) {
	if err := l.takes(ev); err != nil {
		return "", nil, err
	}
	if ev.Time.IsZero() {
		ev.Time = l.now()
	}
	ev.Time = ev.Time.UTC()
	ev.Seq, ev.PrevHash = l.qseq+1, l.qhash
	line, err := appendHead(l.line[:0], ev.Time, ev.Seq, ev.PrevHash)
	if terr != nil || err != nil {
		return "", nil, l.fail(fmt.Errorf("%w: event %q does not encode: %v", ErrInvalidEvent, ev.Name, errors.Join(terr, err)))
	}
	line = append(line, tail...) // ends in '\n'
	l.line = line
	if len(line)-1 > MaxLineBytes {
		return "", nil, l.fail(fmt.Errorf("%w: event %q is %d bytes, over the %d-byte line limit; trim Fields/Details", ErrInvalidEvent, ev.Name, len(line)-1, MaxLineBytes))
	}
	end := l.inflightEnd // where the file ends once the batch in flight is written
	if !l.flushing {
		end = l.size
	}
	if len(l.queue) > 0 && end+int64(len(l.queue)+len(line)) > l.maxFileBytes() {
		if err := l.flush(); err != nil { // the queue keeps to the file it was chained in
			return "", nil, err
		}
		// flush released l.mu while it waited for a write in flight, and
		// other lines may have been chained meanwhile (or Close begun):
		// chain this one anew.
		if err := l.takes(ev); err != nil {
			return "", nil, err
		}
		ev.Seq, ev.PrevHash = l.qseq+1, l.qhash
		if line, err = appendHead(l.line[:0], ev.Time, ev.Seq, ev.PrevHash); err != nil {
			return "", nil, l.fail(fmt.Errorf("%w: event %q does not encode: %v", ErrInvalidEvent, ev.Name, err))
		}
		line = append(line, tail...)
		l.line = line
	}
	l.queue = append(l.queue, line...)
	l.queued++
	l.qseq++
	sum := sha256.Sum256(line[:len(line)-1])
	var hx [2 * sha256.Size]byte
	hex.Encode(hx[:], sum[:])
	l.qhash = string(hx[:]) // one allocation (EncodeToString makes two)
	if l.Key != nil {
		l.qsums = append(l.qsums, sum) // the tree's leaves, added once written
	}
	hash = l.qhash
	if l.batch == nil {
		l.batch = &batch{}
	}
	b = l.batch
	l.stats.LastWriteLatency = time.Since(start)
	if deferred && len(l.queue) < maxQueueBytes {
		return hash, b, nil
	}
	// Shared writes: while a batch is being written, more lines queue up;
	// the first of their writers to find the sink free writes them all in
	// one call, and the others return when it ends. Before that call it
	// yields once, so that writers runnable on this P queue their lines
	// first and share it: the write call is the audit's main cost (about
	// 1.6 decision lines per call at 8 clients instead of 1.0, see
	// bench/README.md). A lone writer stops yielding (yieldGate).
	for yielded := false; !b.done; {
		if !l.flushing {
			if !yielded {
				yielded = true
				l.yieldOnce() // skipped while yields bring nothing (yield.go)
				continue
			}
			_ = l.flush() // its error is b.err
			continue
		}
		l.gate.shared() // another writer's call is on: writers are concurrent
		l.flushed.Wait()
	}
	if b.err != nil && ev.Seq <= b.okThrough {
		return hash, b, nil
	}
	return hash, b, b.err
}

// takes says whether a line may be chained now: the Log is open, or
// closing and ev is its last checkpoint. Called with l.mu held.
func (l *Log) takes(ev *Event) error {
	if !l.opened || l.closed && ev != l.sealing {
		return l.fail(fmt.Errorf("%w: %w: Write before Open or after Close", ErrUnavailable, ErrClosed))
	}
	return nil
}

// tailBuf is a buffer for a line's tail, reused line after line.
func (l *Log) tailBuf() *[]byte {
	if b, ok := l.tails.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1<<10)
	return &b
}

// batch is the lines of one write call: its writers wait until done, then
// return err, unless their line's seq is at most okThrough (a failed call
// that still left their line complete on record).
type batch struct {
	done      bool
	err       error
	okThrough uint64
	// file and start: where the call wrote (set once it succeeded).
	file  string
	start int64
}

// fileNotes are the counts of a batch's file operations, kept apart from
// stats while l.mu is released.
type fileNotes struct {
	syncs, rotations uint64
	errs             []error
}

// flush appends the queued lines with one write call, made with l.mu
// released so that more lines can queue up meanwhile (shared writes). On
// failure the chain goes back to the last line written, and the queue is
// dropped, with the lines chained onto the failed ones meanwhile. Called
// with l.mu held; returns with it held.
func (l *Log) flush() error {
	for l.flushing {
		l.flushed.Wait()
	}
	if len(l.queue) == 0 {
		return nil
	}
	buf, n, b, sums := l.queue, l.queued, l.batch, l.qsums
	seq, hash := l.qseq, l.qhash
	l.queue, l.queued, l.batch, l.spare = l.spare[:0], 0, nil, nil
	l.qsums, l.spareSums = l.spareSums[:0], nil
	l.flushing, l.inflightEnd = true, l.sizeAfter(int64(len(buf)))
	l.mu.Unlock()
	kept := 0
	err := l.goOn()
	if err == nil {
		err = l.ensureFile(int64(len(buf)))
	}
	file, start := l.name, l.size
	if err == nil {
		kept, err = l.appendLine(buf)
	}
	if err == nil && l.Key != nil { // the tree is the batch writer's, like the file
		l.scratch.copyFrom(&l.tree)
		addSums(&l.scratch, sums)
	}
	l.mu.Lock()
	l.flushing = false
	l.mergeFileNotes()
	defer l.flushed.Broadcast()
	if err != nil {
		if k := l.keepComplete(buf[:kept], sums, b); k > 0 {
			n -= k
			b.file, b.start = file, start // where its complete lines stay (a checkpoint among them names it)
		}
		l.qseq, l.qhash = l.seq, l.hash
		if l.batch != nil { // chained onto the failed lines: dropped too
			l.batch.done, l.batch.err = true, err
			n += l.queued
			l.queue, l.queued, l.batch, l.qsums = l.queue[:0], 0, nil, l.qsums[:0]
		}
		if n > 1 {
			err = fmt.Errorf("%w (%d queued lines dropped with it)", err, n-1)
		}
		l.sinkErr, l.sinkFailedAt = err, time.Now()
		b.done, b.err = true, err
		return l.fail(err)
	}
	l.seq, l.hash = seq, hash
	l.sinkErr = nil
	b.file, b.start = file, start
	if l.Key != nil {
		l.tree, l.scratch = l.scratch, l.tree
		if l.seq-l.ckSize >= l.checkpointEvery() {
			select {
			case l.ckDue <- struct{}{}:
			default:
			}
		}
	}
	l.dirty = true
	if l.Mirror != nil {
		_, _ = l.Mirror.Write(buf)
	}
	l.stats.Lines += uint64(n)
	l.spareSums = sums[:0]
	if cap(buf) <= 4*maxQueueBytes {
		l.spare = buf // one huge line does not stay allocated
	}
	b.done = true
	return nil
}

// keepComplete puts on record the complete lines at the start of a failed
// batch that stay in an abandoned file (its torn tail could not be cut):
// the chain goes on from the last of them, and their writers are told
// they were recorded (b.okThrough), so no line on record belongs to a
// request that was refused, and no seq is used twice. It returns how many
// lines it kept.
func (l *Log) keepComplete(written []byte, sums [][sha256.Size]byte, b *batch) (kept int) {
	end := bytes.LastIndexByte(written, '\n')
	if end < 0 {
		return 0
	}
	lines := written[:end+1]
	last := lines[bytes.LastIndexByte(lines[:end], '\n')+1 : end]
	k := uint64(bytes.Count(lines, []byte{'\n'}))
	l.seq, l.hash = l.seq+k, lineHash(last)
	if l.Key != nil {
		addSums(&l.tree, sums[:k])
	}
	b.okThrough = l.seq
	l.stats.Lines += k
	if l.Mirror != nil {
		_, _ = l.Mirror.Write(lines)
	}
	return int(k)
}

// sizeAfter is where the current file will end once n more bytes are
// appended to it, or to the new file ensureFile starts for them.
func (l *Log) sizeAfter(n int64) int64 {
	if l.name == "" || l.rotates(n) {
		return n
	}
	return l.size + n
}

// rotates reports whether n more bytes start a new file: the current one
// holds lines and would grow past MaxFileBytes.
func (l *Log) rotates(n int64) bool {
	return l.name != "" && l.size > 0 && l.size+n > l.maxFileBytes()
}

// mergeFileNotes adds what the file operations counted to stats. Called
// with l.mu held and no batch in flight.
func (l *Log) mergeFileNotes() {
	l.stats.Syncs += l.files.syncs
	l.stats.Rotations += l.files.rotations
	for _, err := range l.files.errs {
		l.fail(err)
	}
	l.files = fileNotes{}
}

// fail counts err and returns it. Called with l.mu held.
func (l *Log) fail(err error) error {
	l.stats.Errors++
	l.stats.LastError = err.Error()
	return err
}

// ensureFile makes l.f ready for a line of n bytes: rotating when the line
// would not fit, reopening a clean file closed by an earlier failure, or
// creating a new file.
func (l *Log) ensureFile(n int64) error {
	if l.rotates(n) {
		if err := l.closeFile(); err != nil {
			l.files.errs = append(l.files.errs, err) // the lines are in the OS; report, then carry on
		}
		l.name, l.reuse, l.size = "", false, 0
		l.files.rotations++
	}
	if l.f != nil {
		return l.stillThere()
	}
	var reopenErr error
	if l.name != "" && l.reuse {
		f, err := l.open(l.name, os.O_WRONLY|os.O_APPEND, 0)
		if err == nil {
			l.f, l.fi = f, statOf(f)
			return l.stillThere() // written to since it was closed: not ours to go on
		}
		if errors.Is(err, fs.ErrNotExist) {
			return l.changed("was deleted") // its lines are the chain's: never start over silently
		}
		reopenErr = err // the old file is broken: start a new one
		l.name, l.reuse, l.size = "", false, 0
	}
	ts := l.now().UTC()
	if !ts.After(l.lastTS) {
		ts = l.lastTS.Add(time.Nanosecond) // names must sort in chain order
	}
	name := filepath.Join(l.Dir, fileName(ts, l.seq+1))
	f, err := l.open(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		if reopenErr != nil {
			err = fmt.Errorf("%w (after reopening the previous file failed: %v)", err, reopenErr)
		}
		return fmt.Errorf("%w: cannot create %s: %w; check free space, permissions and file-size limits", ErrUnavailable, name, err)
	}
	l.lastTS = ts
	l.f, l.name, l.size, l.reuse, l.fi = f, name, 0, false, statOf(f)
	return nil
}

// appendLine writes line (one or more lines) with one write call. On
// failure it removes a torn tail (truncating back to the last complete
// line) and closes the file: a clean file is reopened by the next Write, a
// file whose torn tail could not be removed is abandoned for a new one (or
// deleted, when it held no complete line). kept is how many bytes of line
// stay in a file: all of them on success, what the failed call wrote when
// its file was abandoned, else 0.
func (l *Log) appendLine(line []byte) (kept int, err error) {
	n, err := l.f.Write(line)
	if err == nil && n == len(line) {
		l.size += int64(n)
		return n, nil
	}
	if err == nil {
		err = io.ErrShortWrite
	}
	clean := n == 0
	if n > 0 {
		clean = l.f.Truncate(l.size) == nil
	}
	if cerr := l.closeFile(); cerr != nil {
		l.files.errs = append(l.files.errs, cerr)
	}
	name := l.name
	switch {
	case clean:
		l.reuse = true
	case l.size == 0 && os.Remove(name) == nil:
		l.name, l.reuse = "", false // held no complete line: nothing to keep
	default:
		l.name, l.reuse, l.size = "", false, 0
		kept = n // abandoned with what was written: its complete lines are on record
	}
	return kept, fmt.Errorf("%w: cannot append to %s: %w; check free space, permissions and file-size limits", ErrUnavailable, name, err)
}

// closeFile fsyncs and closes l.f. Called by the batch in flight, or with
// l.mu held and none in flight.
func (l *Log) closeFile() error {
	if l.f == nil {
		return nil
	}
	// Always fsync: a background fsync racing with this close may have
	// cleared dirty and then found the file closed.
	err := l.f.Sync()
	if err == nil {
		l.files.syncs++
	}
	l.dirty = false
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("audit: sync/close %s: %w", l.name, err)
	}
	return nil
}

// syncLoop is the batched fsync: one per interval when lines were
// written, outside the lock so writers never wait for the disk.
func (l *Log) syncLoop(interval time.Duration, stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.syncOnce()
			l.noteResumed()
			l.autoCheckpoint()
		case <-l.ckDue:
			l.autoCheckpoint()
		}
	}
}

func (l *Log) syncOnce() {
	l.mu.Lock()
	_ = l.flush() // counted in Stats on failure; the next Write retries the sink
	if l.f != nil && l.fi != nil {
		if err := l.pathCheck(); err != nil { // moved away or replaced: the next writes check again and refuse
			l.fail(err)
		}
	}
	f, dirty, name := l.f, l.dirty, l.name
	l.dirty = false
	l.mu.Unlock()
	if !dirty || f == nil {
		return
	}
	err := f.Sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.stats.Syncs++
	case errors.Is(err, os.ErrClosed):
		// rotated or failed meanwhile; closeFile synced it
	default:
		l.fail(fmt.Errorf("audit: fsync %s: %w", name, err))
	}
}

// Close stops the background fsync, fsyncs and closes the current file.
// Later Writes fail with ErrClosed. Closing twice, or a Log never opened,
// returns nil. The error is the final fsync/close failure, if any.
func (l *Log) Close() error {
	l.mu.Lock()
	if !l.opened || l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true // no line but the last checkpoint from now on
	l.mu.Unlock()
	ckErr := l.checkpoint(true) // the last lines signed too, when the sink takes it
	close(l.stop)
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	ferr := l.flush()
	err := l.closeFile()
	l.mergeFileNotes()
	if ckErr != nil && l.Key != nil {
		l.sealEnd()
	}
	l.unlockDir()
	if err != nil {
		return l.fail(err)
	}
	if ferr != nil {
		return ferr
	}
	return ckErr
}

// Stats returns a snapshot of the counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing { // the file state is the batch writer's until it ends
		l.flushed.Wait()
	}
	s := l.stats
	s.Seq = l.seq // written lines only; queued ones are not yet in the file
	s.Signed = l.ckSize
	if l.f != nil {
		s.File = l.name
	}
	return s
}
