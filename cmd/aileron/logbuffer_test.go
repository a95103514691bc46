package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is stderr for a test: written by the flush timer's
// goroutine, read by the test's.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) state() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

// TestLogBufferGathersInfoLines: info lines wait in the buffer (here the
// interval is an hour), and go out in one write, in order, with the first
// warn or error line after them, or on Close; after Close each line goes
// out at once.
func TestLogBufferGathersInfoLines(t *testing.T) {
	for _, level := range []string{"warn", "error"} {
		t.Run(level, func(t *testing.T) {
			var out lockedBuffer
			logs := newLogBuffer(&out, time.Hour)
			log := newLogger(logs, "info")
			log.Info().Str("event", "proxy.request").Int("n", 1).Msg("allowed")
			log.Info().Str("event", "proxy.request").Int("n", 2).Msg("allowed")
			if got, n := out.state(); got != "" || n != 0 {
				t.Fatalf("info lines written before the interval: %d writes %q", n, got)
			}
			if level == "warn" {
				log.Warn().Str("event", "x.warn").Msg("w")
			} else {
				log.Error().Str("event", "x.error").Msg("e")
			}
			got, n := out.state()
			if n != 1 || strings.Count(got, "\n") != 3 || !strings.Contains(got, `"n":1`) || strings.Index(got, `"n":2`) > strings.Index(got, `"event":"x.`) {
				t.Fatalf("after a %s line: %d writes:\n%s", level, n, got)
			}
			log.Info().Int("n", 3).Msg("allowed")
			if _, n := out.state(); n != 1 {
				t.Fatal("an info line after the flush was written at once")
			}
			if err := logs.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := out.state(); !strings.Contains(got, `"n":3`) {
				t.Fatalf("Close left a line in the buffer:\n%s", got)
			}
			log.Info().Int("n", 4).Msg("late")
			if got, _ := out.state(); !strings.Contains(got, `"n":4`) {
				t.Fatalf("a line after Close was not written:\n%s", got)
			}
		})
	}
}

// TestLogBufferFlushesOnItsOwn: a buffered line goes out after the
// interval with no other line and no Close.
func TestLogBufferFlushesOnItsOwn(t *testing.T) {
	var out lockedBuffer
	logs := newLogBuffer(&out, 10*time.Millisecond)
	defer logs.Close()
	log := newLogger(logs, "info")
	log.Info().Str("event", "proxy.request").Msg("allowed")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, _ := out.state(); strings.Contains(got, "proxy.request") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the line was never written without a Close")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLogBufferBounded: lines past logBufferMax are written without
// waiting, and a line is never split between writes.
func TestLogBufferBounded(t *testing.T) {
	var out lockedBuffer
	logs := newLogBuffer(&out, time.Hour)
	log := newLogger(logs, "info")
	pad := strings.Repeat("x", 1000)
	for range logBufferMax/1000 + 10 {
		log.Info().Str("pad", pad).Msg("allowed")
	}
	got, n := out.state()
	if n == 0 || len(got) < logBufferMax || !strings.HasSuffix(got, "\n") {
		t.Fatalf("%d writes, %d bytes: the buffer grew past its bound", n, len(got))
	}
}

// TestHintsComeAfterTheLinesBefore: the next steps a person reads come
// after the log lines logged before them (the daemon.started line).
func TestHintsComeAfterTheLinesBefore(t *testing.T) {
	var out lockedBuffer
	logs := newLogBuffer(&out, time.Hour)
	log := newLogger(logs, "info")
	log.Info().Str("event", "daemon.started").Msg("ready")
	_, _ = afterLogs{logs: logs, w: &out}.Write([]byte("Next, in another terminal\n"))
	if got, _ := out.state(); strings.Index(got, "daemon.started") < 0 || strings.Index(got, "daemon.started") > strings.Index(got, "Next,") {
		t.Fatalf("the hints came before the line logged first:\n%s", got)
	}
}
