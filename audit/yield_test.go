package audit

import (
	"testing"
	"time"
)

// The gate yields while yields bring lines, stops after yieldMisses that
// bring none, probes every yieldProbe-th batch, and turns on again at
// once when writers are concurrent.
func TestYieldGate(t *testing.T) {
	var g yieldGate
	for i := range yieldMisses {
		if !g.worth() {
			t.Fatalf("yield %d skipped before %d misses", i, yieldMisses)
		}
		g.result(false)
	}
	tried := 0
	for range 4 * yieldProbe {
		if g.worth() {
			tried++
			g.result(false)
		}
	}
	if tried != 4 {
		t.Errorf("a lone writer yielded %d times in %d batches; want one probe per %d", tried, 4*yieldProbe, yieldProbe)
	}
	for !g.worth() { // up to the next probe
	}
	g.result(true)
	if !g.worth() {
		t.Error("a yield that brought a line did not turn yields back on")
	}
	for range yieldMisses {
		g.result(false)
	}
	g.shared()
	if !g.worth() {
		t.Error("a writer that met another's write call did not turn yields back on")
	}
}

// A lone writer's Writes mostly skip the yield; Writes whose yields bring
// another line (here, the yield itself queues an outcome line, as a
// runnable request would) yield every time.
func TestLoneWriterStopsYielding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		joins   bool
		atMost  int
		atLeast int
	}{
		{"lone", false, yieldMisses + 200/yieldProbe + 1, 1},
		{"joined", true, 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Log{Dir: t.TempDir(), Now: newFakeClock().Now, SyncInterval: time.Hour}
			yields := 0
			l.yield = func() {
				yields++
				if tc.joins {
					if err := l.WriteDeferred(testEvent(yields)); err != nil {
						t.Error(err)
					}
				}
			}
			if err := l.Open(); err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				if err := l.Write(testEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if yields > tc.atMost || yields < tc.atLeast {
				t.Errorf("200 Writes yielded %d times; want %d to %d", yields, tc.atLeast, tc.atMost)
			}
		})
	}
}
