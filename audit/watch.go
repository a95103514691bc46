package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The Log holds its directory (a lock file), and watches the file the
// chain continues in: deleted, moved away or replaced under it, it
// refuses every line until the file is back.

// lockDir checks Dir, creates it if needed and takes its lock.
func (l *Log) lockDir() error {
	if l.Dir == "" {
		return errors.New("audit: Log.Dir is empty; set it to the audit directory")
	}
	if l.lock != nil || l.opened {
		return errors.New("audit: Log.Open called twice; use one Log per directory")
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return fmt.Errorf("audit: create directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(l.Dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("audit: lock %s: %w", l.Dir, err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return fmt.Errorf("audit: %s is in use by another process (a running daemon?): %w; stop it first", l.Dir, err)
	}
	l.lock = f
	return nil
}

func (l *Log) unlockDir() {
	if l.lock != nil {
		l.lock.Close() // closing releases the lock
		l.lock = nil
	}
}

// stillThere checks, before each write call, that the open file still
// has a name (one statx of the open descriptor, see facts): a trail
// deleted under the daemon would otherwise take lines nobody will ever
// read while requests go on. Whether the name is still the file's (not
// moved away or replaced) costs a stat of the path, so it is checked at
// each SyncInterval tick (pathCheck), and before every write once a tick
// found it changed.
func (l *Log) stillThere() error {
	if l.fi == nil {
		return nil // the file could not be statted when opened: nothing to compare
	}
	if l.pathSuspect {
		return l.pathCheck()
	}
	ff, err := facts(l.f)
	if err != nil {
		return fmt.Errorf("%w: cannot check %s: %w", ErrUnavailable, l.name, err)
	}
	if ff.linksKnown && ff.links == 0 {
		return l.changed("was deleted")
	}
	if ff.regular && ff.size != l.size {
		return l.changed(fmt.Sprintf("was written to or cut by another process (it holds %d bytes, the daemon wrote %d)", ff.size, l.size))
	}
	return nil
}

// pathCheck checks that l.name still names the open file; it keeps
// pathSuspect set while it does not.
func (l *Log) pathCheck() error {
	st, err := os.Stat(l.name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = l.changed("was deleted or moved away")
	case err != nil:
		err = fmt.Errorf("%w: cannot check %s: %w", ErrUnavailable, l.name, err)
	case !os.SameFile(st, l.fi):
		err = l.changed("was replaced by another file")
	}
	if err == nil && l.gone != "" {
		l.back = true // recorded by the next tick (EventTrailResumed)
	}
	l.pathSuspect = err != nil
	return err
}

// changed is the failure of a trail that changed under the daemon.
func (l *Log) changed(what string) error {
	if l.gone == "" {
		l.gone, l.goneAt = what, l.now()
	}
	return fmt.Errorf("%w: %w: %s, the file the chain continues in, %s while the daemon wrote it; "+
		"nothing is recorded, and no request forwarded, until it is back at that path as it was; a restarted daemon checks the trail against the last line it wrote",
		ErrUnavailable, ErrTrailChanged, l.name, what)
}

// statOf is f's FileInfo, nil when it cannot be had.
func statOf(f file) os.FileInfo {
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	return fi
}

// unhealthyAfterFailure is how long Healthy reports a failed write call
// that no successful one followed: long enough for a load balancer's check
// to see it, short enough that a node which can write again (the disk
// freed) is tried again without any line having to succeed first.
const unhealthyAfterFailure = 10 * time.Second

// Healthy reports whether the Log takes lines now: nil when it is open,
// its live file is still the one it writes, and no write call failed in the
// last unhealthyAfterFailure without one succeeding since; else the error
// the next write would fail with, or the last one's (for a readiness check;
// it writes nothing).
func (l *Log) Healthy() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.flushing { // the file state is the batch writer's until it ends
		l.flushed.Wait()
	}
	if !l.opened || l.closed {
		return fmt.Errorf("%w: %w: the audit trail is not open", ErrUnavailable, ErrClosed)
	}
	if l.sinkErr != nil && time.Since(l.sinkFailedAt) < unhealthyAfterFailure {
		return l.sinkErr
	}
	if l.f == nil {
		return nil
	}
	return l.stillThere()
}
