package audit

import "runtime"

// Before a shared write call its writer yields once, so that requests
// already runnable can queue their lines and share the call (chain). A
// yield is not free: with a processor idle, Go wakes a thread for it (a
// futex call), and a lone writer gains nothing by it. So the yield is
// skipped after yieldMisses yields in a row brought no other line, and
// tried again on every yieldProbe-th batch after that, or as soon as a
// writer finds another's write call on.
const (
	yieldMisses = 4
	yieldProbe  = 16
)

// yieldGate is the Log's record of whether its yields help. Owned by
// l.mu.
type yieldGate struct {
	misses int // yields in a row that brought no other line (capped)
	skips  int // yields skipped since the last one tried
}

// worth says whether to yield before this batch's write call.
func (g *yieldGate) worth() bool {
	if g.misses < yieldMisses {
		return true
	}
	g.skips++
	if g.skips >= yieldProbe {
		g.skips = 0
		return true
	}
	return false
}

// result records what a yield brought: helped, another line joined the
// batch.
func (g *yieldGate) result(helped bool) {
	switch {
	case helped:
		g.misses, g.skips = 0, 0
	case g.misses < yieldMisses:
		g.misses++
	}
}

// shared records a writer that found another's write call on: writers
// are concurrent again, so yields are tried again.
func (g *yieldGate) shared() { g.misses, g.skips = 0, 0 }

// yieldOnce is the yield before a shared write, unless the gate says it
// is not worth it; l.mu is released for it. Called with l.mu held.
func (l *Log) yieldOnce() {
	if !l.gate.worth() {
		return
	}
	before := l.qseq
	l.mu.Unlock()
	if l.yield != nil {
		l.yield()
	} else {
		runtime.Gosched()
	}
	l.mu.Lock()
	l.gate.result(l.qseq != before)
}
