package main

import (
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// logFlushInterval is the longest an info or debug line waits in the
// daemon's log buffer before it is written.
const logFlushInterval = 100 * time.Millisecond

// logBufferMax is the most the log buffer holds; a line that fills it
// flushes it at once.
const logBufferMax = 64 << 10

// logBuffer gathers the daemon's log lines so that a busy proxy does not
// pay one write to stderr per request: lines are written together at most
// interval after the first of them, at once when a warn, error or fatal
// line comes (with every line before it, in order), when logBufferMax is
// reached, and on Close. A panic in a request is recovered and logged as
// an error line, which flushes. Safe for concurrent use.
type logBuffer struct {
	w        io.Writer
	interval time.Duration

	mu     sync.Mutex
	buf    []byte
	timer  *time.Timer // flushes; armed while buf holds lines
	closed bool        // after Close each line is written at once
}

// newLogBuffer buffers lines for w, written at most interval after they
// came. Close it to write what is left.
func newLogBuffer(w io.Writer, interval time.Duration) *logBuffer {
	b := &logBuffer{w: w, interval: interval}
	b.timer = time.AfterFunc(time.Hour, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.flushLocked()
	})
	b.timer.Stop()
	return b
}

// Write buffers p, one whole line (zerolog writes one per call).
func (b *logBuffer) Write(p []byte) (int, error) {
	return b.WriteLevel(zerolog.NoLevel, p)
}

// WriteLevel buffers p, or writes it and everything before it at once
// when level is warn or above (zerolog.LevelWriter).
func (b *logBuffer) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 && !b.closed {
		b.timer.Reset(b.interval)
	}
	b.buf = append(b.buf, p...)
	if b.closed || len(b.buf) >= logBufferMax || level >= zerolog.WarnLevel && level < zerolog.NoLevel {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// flushLocked writes what is buffered; b.mu is held. A failed write
// drops the lines: stderr that fails has nowhere else to go.
func (b *logBuffer) flushLocked() error {
	b.timer.Stop()
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	if cap(b.buf) > logBufferMax {
		b.buf = nil // one huge line: do not keep its memory
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

// Close writes what is buffered; later lines are written at once.
func (b *logBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	return b.flushLocked()
}

// Flush writes what is buffered now.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

// afterLogs writes to w after the log lines buffered before it, so that
// text for a person (the next steps) comes after the lines logged first.
type afterLogs struct {
	logs *logBuffer
	w    io.Writer
}

func (a afterLogs) Write(p []byte) (int, error) {
	_ = a.logs.Flush()
	return a.w.Write(p)
}
