package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// auditRounds is how many measured slices the keep-alive phase splits the
// duration into for aileron and aileron-audit-off each, run in ABBA order
// (on off, off on, on off, …) so drift in the machine's load falls evenly on
// both. Even, so the order is balanced.
const auditRounds = 6

// addAuditOff starts a second daemon under dir/audit-off with
// audit.enabled false, installs the same connector, stores and binds the
// same credential and adds it as the aileron-audit-off target. A failure
// becomes a note and the bench carries on without the audit-cost figures.
func (e *env) addAuditOff(ctx context.Context, o options, rootPath string, stderr io.Writer) {
	fmt.Fprintln(stderr, "bench: starting a second daemon with audit.enabled false")
	d, err := startDaemon(ctx, o.aileron, filepath.Join(e.dir, "audit-off"), rootPath, upstreamIP, o.logLevel, false)
	if err != nil {
		e.notes = append(e.notes, "audit cost skipped: "+auditOffTargetName+": "+err.Error())
		return
	}
	t, err := e.aileronTarget(ctx, d)
	if err == nil {
		err = d.setCredential(ctx, e.up.apiKey)
	}
	if err != nil {
		_ = d.stop(5 * time.Second)
		e.notes = append(e.notes, "audit cost skipped: "+auditOffTargetName+": "+err.Error())
		return
	}
	t.name = auditOffTargetName
	e.off = d
	e.targets = append(e.targets, t)
}

// runInterleaved measures keep-alive throughput through on and off in
// auditRounds slices of dur/auditRounds each, in ABBA order, and sums each
// side's slices into one result. Before the first slice each side warms up
// for warmup; before every later slice it settles for warmup/5 (both
// unmeasured). Workers stop between requests, so kept-alive connections
// survive from one slice to the next. conns counts the upstream's accepted
// connections; each side's UpstreamConns is the sum over its slices.
func runInterleaved(ctx context.Context, on, off target, urls []string, conc int, warmup, dur time.Duration, conns *atomic.Int64) (rOn, rOff throughputResult) {
	type side struct {
		t   target
		c   *http.Client
		sum sliceSum
	}
	sides := [2]*side{{t: on, c: on.client(conc, true)}, {t: off, c: off.client(conc, true)}}
	slice := dur / auditRounds
	for i := range auditRounds {
		settle := warmup / 5
		if i == 0 {
			settle = warmup
		}
		for j := range sides {
			if ctx.Err() != nil {
				break
			}
			s := sides[(i+j)%2] // ABBA: on off, off on, …
			c0 := conns.Load()
			s.sum.run(ctx, s.c, s.t.cpu, urls, conc, settle, slice)
			s.sum.conns += conns.Load() - c0
		}
	}
	for _, s := range sides {
		s.c.CloseIdleConnections()
	}
	return sides[0].sum.result(), sides[1].sum.result()
}

// sliceSum accumulates the slices of one side of runInterleaved.
type sliceSum struct {
	requests int64
	elapsed  time.Duration
	cpu      time.Duration
	conns    int64 // upstream connections accepted, settle included
	errs     errRecorder
}

// run drives conc workers over urls through c, lets them settle, then counts
// completions and CPU time for dur. Workers finish their request in flight
// before stopping, so their connections go back to c's idle pool.
func (s *sliceSum) run(ctx context.Context, c *http.Client, cpu func() time.Duration, urls []string, conc int, settle, dur time.Duration) {
	counters := make([]paddedCounter, conc)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for i := w; !stop.Load() && ctx.Err() == nil; i += conc {
				if _, err := get(ctx, c, urls[i%len(urls)]); err != nil {
					if ctx.Err() == nil {
						s.errs.record(err)
					}
					continue
				}
				counters[w].n.Add(1)
			}
		})
	}
	sum := func() int64 {
		var n int64
		for i := range counters {
			n += counters[i].n.Load()
		}
		return n
	}
	sleepCtx(ctx, settle)
	n0, t0, cpu0 := sum(), time.Now(), cpu()
	sleepCtx(ctx, dur)
	n1, t1, cpu1 := sum(), time.Now(), cpu()
	stop.Store(true)
	wg.Wait()
	s.requests += n1 - n0
	s.elapsed += t1.Sub(t0)
	s.cpu += cpu1 - cpu0
}

// result is the accumulated slices as one throughput result.
func (s *sliceSum) result() throughputResult {
	r := throughputResult{Requests: s.requests, Seconds: s.elapsed.Seconds(), UpstreamConns: s.conns}
	if r.Seconds > 0 {
		r.ReqPerSec = float64(r.Requests) / r.Seconds
	}
	if r.Requests > 0 {
		r.CPUPerReqUs = float64(s.cpu) / float64(time.Microsecond) / float64(r.Requests)
	}
	r.Errors, r.FirstErr = s.errs.snapshot()
	return r
}

// auditUsage is what an audit directory holds: *.jsonl files, their bytes
// and their lines.
type auditUsage struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	Lines int64 `json:"lines"`
	// Checkpoints counts the signed checkpoint lines among them.
	Checkpoints int64 `json:"checkpoints"`
}

// readAuditUsage counts the audit files under dir (AILERON_HOME/audit); a
// missing directory is empty.
func readAuditUsage(dir string) (auditUsage, error) {
	var u auditUsage
	err := filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == dir {
				return nil
			}
			return err
		}
		if !de.Type().IsRegular() || filepath.Ext(path) != ".jsonl" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		u.Files++
		u.Bytes += int64(len(b))
		u.Lines += int64(bytes.Count(b, []byte{'\n'}))
		u.Checkpoints += int64(bytes.Count(b, []byte(`"event":"audit.checkpoint"`)))
		return nil
	})
	if err != nil {
		return u, fmt.Errorf("audit usage of %s: %w", dir, err)
	}
	return u, nil
}

// auditNotes describes what the audit-on daemon wrote during the measured
// phases (from before to after) and checks the audit-off daemon wrote none.
func (e *env) auditNotes(before auditUsage) (written auditUsage, notes []string) {
	after, err := readAuditUsage(filepath.Join(e.d.home, "audit"))
	if err != nil {
		return auditUsage{}, []string{err.Error()}
	}
	written = auditUsage{Files: after.Files, Bytes: after.Bytes - before.Bytes, Lines: after.Lines - before.Lines,
		Checkpoints: after.Checkpoints - before.Checkpoints}
	perLine := 0.0
	if written.Lines > 0 {
		perLine = float64(written.Bytes) / float64(written.Lines)
	}
	notes = append(notes, fmt.Sprintf("audit: during the phases the aileron daemon appended %d audit lines (%d of them signed checkpoints), %.1f MiB (%.0f B/line); "+
		"its $AILERON_HOME/audit then held %d file(s), %d lines, %.1f MiB",
		written.Lines, written.Checkpoints, float64(written.Bytes)/(1<<20), perLine, after.Files, after.Lines, float64(after.Bytes)/(1<<20)))
	if e.off != nil {
		off, err := readAuditUsage(filepath.Join(e.off.home, "audit"))
		if err != nil {
			notes = append(notes, err.Error())
		} else if off.Lines > 0 {
			notes = append(notes, fmt.Sprintf("contract: %s (audit.enabled false) wrote %d audit lines under %s/audit",
				auditOffTargetName, off.Lines, e.off.home))
		}
	}
	return written, notes
}
