package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestSplitTablePeers checks the split table's layout: without peers the
// three columns as before; with peers, each figure for aileron and then
// each peer, and a peer that is not measured says why in its own cells.
func TestSplitTablePeers(t *testing.T) {
	var noPeers strings.Builder
	printSplitHeader(&noPeers, nil)
	if want := "row                        proxy CPU/req ÷ direct    throughput ÷ direct   added p50 (c=1; SSE)\n"; noPeers.String() != want {
		t.Errorf("header without peers:\n%q\nwant\n%q", noPeers.String(), want)
	}
	squid := &peer{splitPath: splitPath{name: "squid ssl-bump"}, unable: func(r splitRow) string {
		if r.h2 {
			return "n/a (no h2)"
		}
		return ""
	}, failed: map[string]string{}}
	peers := []*peer{
		{splitPath: splitPath{name: "bare goproxy"}, failed: map[string]string{}},
		squid,
		{splitPath: splitPath{name: "mitmdump"}, absent: "not installed", failed: map[string]string{"x": "boom"}},
	}
	samples := map[string][]splitSample{
		"direct":       {{rps: 100, client: 40 * time.Microsecond, upstream: 60 * time.Microsecond}},
		"aileron":      {{rps: 30, prx: 150 * time.Microsecond}},
		"bare goproxy": {{rps: 50, prx: 120 * time.Microsecond}},
	}
	for _, tc := range []struct {
		row   splitRow
		cells []string
	}{
		{splitRow{name: "keep-alive", conc: 8, keepAlive: true}, []string{"1.50×", "1.20×", "n/a", "not installed", "0.30", "0.50", "n/a", "not installed", "-"}},
		{splitRow{name: "h2", conc: 100, h2: true}, []string{"1.50×", "1.20×", "n/a (no h2)", "not installed", "0.30", "0.50", "n/a (no h2)", "not installed", "-"}},
	} {
		var out strings.Builder
		printSplitRow(&out, tc.row, samples, peers)
		line := out.String()
		at := 0
		for _, c := range tc.cells {
			i := strings.Index(line[at:], c)
			if i < 0 {
				t.Fatalf("row %s: cell %q missing or out of order in\n%s", tc.row.name, c, line)
			}
			at += i + len(c)
		}
	}
	var h strings.Builder
	printSplitHeader(&h, peers)
	names := strings.Split(h.String(), "\n")[1]
	if got := strings.Count(names, "bare goproxy"); got != 2 {
		t.Errorf("header names the bare goproxy column %d times, want 2 (CPU, throughput):\n%s", got, h.String())
	}
	squid.failed["keep-alive"] = "refused"
	var out strings.Builder
	printSplitRow(&out, splitRow{name: "keep-alive", conc: 8, keepAlive: true}, samples, peers)
	if strings.Count(out.String(), "ERR") != 2 {
		t.Errorf("a row squid failed shows no ERR in its two cells:\n%s", out.String())
	}
}

// TestPeersNotInstalled checks that squid and mitmdump missing from PATH
// leave their columns saying so, without starting anything.
func TestPeersNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	e := &splitEnv{dir: t.TempDir()}
	for _, p := range []*peer{e.startSquid(t.Context(), options{}, io.Discard), e.startMitmdump(t.Context(), options{}, io.Discard)} {
		if p.absent != "not installed" || p.stop != nil || p.pid != 0 {
			t.Errorf("%s: absent %q, running %v; want \"not installed\" and nothing started", p.name, p.absent, p.stop != nil)
		}
		if c := p.cell(splitRow{name: "keep-alive"}); c != "not installed" {
			t.Errorf("%s: cell %q, want \"not installed\"", p.name, c)
		}
	}
}

// TestSplitLegend checks the lines under the split table: a line for each
// column, no claim that 1.0× is a floor the figures cannot go under, and
// the SSE line only when the SSE row ran.
func TestSplitLegend(t *testing.T) {
	for _, sse := range []bool{false, true} {
		var b strings.Builder
		printSplitLegend(&b, sse)
		out := b.String()
		for _, want := range []string{"proxy CPU/req ÷ direct:", "throughput ÷ direct:", "added p50:"} {
			if !strings.Contains(out, want) {
				t.Errorf("sse=%v: legend does not explain %q:\n%s", sse, want, out)
			}
		}
		if strings.Contains(out, "floor") {
			t.Errorf("sse=%v: legend calls 1.0× a floor, which the new-connection row goes under:\n%s", sse, out)
		}
		if got := strings.Contains(out, "The SSE row"); got != sse {
			t.Errorf("sse=%v: SSE line shown %v:\n%s", sse, got, out)
		}
	}
}

// TestSpreadOneRound checks that a cell of one round is its figure alone,
// and of several the median with its spread.
func TestSpreadOneRound(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{nil, "n/a"},
		{[]float64{1.45}, "1.45×"},
		{[]float64{1.6, 1.4, 1.5}, "1.50× [1.40×–1.60×]"},
	} {
		if got := spread(tc.v, "%.2f×"); got != tc.want {
			t.Errorf("spread(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := plural(1, "round") + ", " + plural(3, "round"); got != "1 round, 3 rounds" {
		t.Errorf("plural: %q", got)
	}
}
