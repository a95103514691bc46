package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Design budgets from DESIGN.md §5, for the aileron column only.
const (
	budgetKeepAlive  = 0.50 // keep-alive req/s through aileron ÷ direct, at least
	budgetNewConn    = 0.60 // new-connection req/s through aileron ÷ direct, at least
	budgetAddedP50Ms = 0.25 // aileron p50 − direct p50 at one client, at most (ms)
	// budgetAuditCost is issue 4's: keep-alive req/s with audit on ÷ off,
	// at least (audit costs at most 10 % of throughput).
	budgetAuditCost   = 0.90
	directTargetName  = "direct"
	aileronTargetName = "aileron"
	// injectTargetName is aileron on /v1/secure/{id}, where the daemon
	// injects the bench API key; it measures keep-alive and latency only.
	injectTargetName = "aileron+inject"
	// auditOffTargetName is a second daemon with audit.enabled false, on
	// /v1/items/{id}; it measures keep-alive only, interleaved with aileron.
	auditOffTargetName = "aileron-audit-off"
	auditCostBudget    = "audit cost on÷off"
)

// targetResult is every phase's figures for one target.
type targetResult struct {
	Name       string           `json:"name"`
	KeepAlive  throughputResult `json:"keep_alive"`
	NewConn    throughputResult `json:"new_connection,omitzero"`
	Latency    latencyResult    `json:"latency"`
	Stream     streamResult     `json:"stream,omitzero"`
	PeakRSSKiB int64            `json:"peak_rss_kib,omitempty"`
}

// budgetResult is one §5 budget checked against the aileron column (and,
// for the keep-alive and latency budgets, the aileron+inject column: §5's
// keep-alive budget is for MITM + policy + injection + audit).
type budgetResult struct {
	Name   string  `json:"name"`
	Limit  float64 `json:"limit"`
	Value  float64 `json:"value"`
	Status string  `json:"status"` // PASS, MISS, or ERR when the figure is missing
}

// results is the whole run, as printed and as --json emits it.
type results struct {
	Duration    string         `json:"duration_per_phase"`
	Warmup      string         `json:"warmup_per_phase"`
	Concurrency int            `json:"concurrency"`
	BlobBytes   int64          `json:"blob_bytes"`
	GOMAXPROCS  int            `json:"gomaxprocs"`
	NumCPU      int            `json:"num_cpu"`
	Upstream    string         `json:"upstream"`
	Targets     []targetResult `json:"targets"`
	Budgets     []budgetResult `json:"budgets"`
	// AuditWritten is what the aileron daemon appended to its audit trail
	// during the phases (Files: how many files hold the trail afterwards).
	AuditWritten auditUsage `json:"audit_written,omitzero"`
	// Fleet is the two-node row (fleet.go); nil when not measured.
	Fleet  *fleetResult `json:"two_nodes,omitempty"`
	Notes  []string     `json:"notes,omitempty"`
	failed bool         // a direct or aileron phase had errors
}

// byName returns the named target's results, or nil.
func (r *results) byName(name string) *targetResult {
	for i := range r.Targets {
		if r.Targets[i].Name == name {
			return &r.Targets[i]
		}
	}
	return nil
}

// finish evaluates the budgets and turns phase errors into notes.
func (r *results) finish() {
	for _, t := range r.Targets {
		for _, pe := range []struct {
			phase string
			n     int64
			first string
		}{
			{"keep-alive", t.KeepAlive.Errors, t.KeepAlive.FirstErr},
			{"new-connection", t.NewConn.Errors, t.NewConn.FirstErr},
			{"latency", t.Latency.Errors, t.Latency.FirstErr},
			{"stream", t.Stream.Errors, t.Stream.FirstErr},
		} {
			if pe.n == 0 {
				continue
			}
			r.Notes = append(r.Notes, fmt.Sprintf("%s %s: %d failed requests; first: %s", t.Name, pe.phase, pe.n, pe.first))
			if t.Name != "mitmdump" {
				r.failed = true
			}
		}
	}
	d, a := r.byName(directTargetName), r.byName(aileronTargetName)
	if d == nil || a == nil {
		return
	}
	if ka := a.KeepAlive; ka.UpstreamConns > int64(4*r.Concurrency) {
		r.Notes = append(r.Notes, fmt.Sprintf("aileron keep-alive: the upstream accepted %d connections for %d clients "+
			"(direct: %d): the daemon does not reuse upstream connections", ka.UpstreamConns, r.Concurrency, d.KeepAlive.UpstreamConns))
	}
	r.Budgets = []budgetResult{
		atLeast("keep-alive ratio", budgetKeepAlive, ratio(a.KeepAlive.ReqPerSec, d.KeepAlive.ReqPerSec), a.KeepAlive.Errors+d.KeepAlive.Errors),
		atLeast("new-connection ratio", budgetNewConn, ratio(a.NewConn.ReqPerSec, d.NewConn.ReqPerSec), a.NewConn.Errors+d.NewConn.Errors),
		atMost("added p50 latency ms", budgetAddedP50Ms, a.Latency.P50ms-d.Latency.P50ms, a.Latency.Errors+d.Latency.Errors, a.Latency.Samples*d.Latency.Samples),
	}
	if in := r.byName(injectTargetName); in != nil {
		r.Budgets = append(r.Budgets,
			atLeast("keep-alive ratio (inject)", budgetKeepAlive, ratio(in.KeepAlive.ReqPerSec, d.KeepAlive.ReqPerSec), in.KeepAlive.Errors+d.KeepAlive.Errors),
			atMost("added p50 latency ms (inject)", budgetAddedP50Ms, in.Latency.P50ms-d.Latency.P50ms, in.Latency.Errors+d.Latency.Errors, in.Latency.Samples*d.Latency.Samples),
		)
	}
	if off := r.byName(auditOffTargetName); off != nil {
		r.Budgets = append(r.Budgets,
			atLeast(auditCostBudget, budgetAuditCost, ratio(a.KeepAlive.ReqPerSec, off.KeepAlive.ReqPerSec), a.KeepAlive.Errors+off.KeepAlive.Errors))
	}
}

func atLeast(name string, limit, v float64, errs int64) budgetResult {
	b := budgetResult{Name: name, Limit: limit, Value: v, Status: "PASS"}
	switch {
	case errs > 0 || v == 0:
		b.Status = "ERR"
	case v < limit:
		b.Status = "MISS"
	}
	return b
}

func atMost(name string, limit, v float64, errs int64, samples int) budgetResult {
	b := budgetResult{Name: name, Limit: limit, Value: v, Status: "PASS"}
	switch {
	case errs > 0 || samples == 0:
		b.Status = "ERR"
	case v > limit:
		b.Status = "MISS"
	}
	return b
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// printReport writes the table: one row per phase, one value column per
// target, each proxy followed by its ratio against direct; aileron+inject
// also gets a "vs aileron" column (its cost over aileron without injection).
func printReport(w io.Writer, o options, r results) {
	fmt.Fprintf(w, "\naileron bench: %s per phase after %s warm-up, %d clients, GOMAXPROCS %d, upstream %s\n",
		r.Duration, r.Warmup, r.Concurrency, r.GOMAXPROCS, r.Upstream)
	fmt.Fprintln(w, "ratios: throughput = proxy ÷ direct (1.00 = as fast as direct); CPU and latency = proxy ÷ direct (×, lower is better)")
	ail, inj, off := r.byName(aileronTargetName), r.byName(injectTargetName), r.byName(auditOffTargetName)
	if inj != nil {
		fmt.Fprintln(w, "aileron+inject: aileron with an API key injected (GET /v1/secure/{id}); \"vs aileron\" = aileron+inject ÷ aileron on /v1/items/{id}")
	}
	if off != nil {
		fmt.Fprintf(w, "%s: a second daemon with audit.enabled false, keep-alive only, measured in %d slices interleaved with aileron; "+
			"\"audit cost\" rows = aileron ÷ %s\n", auditOffTargetName, auditRounds, auditOffTargetName)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	direct := r.byName(directTargetName)
	proxies := make([]*targetResult, 0, 3)
	header := "phase\tdirect"
	for i := range r.Targets {
		if t := &r.Targets[i]; t.Name != directTargetName {
			proxies = append(proxies, t)
			header += "\t" + t.Name + "\tratio"
			if t == inj {
				header += "\tvs aileron"
			}
		}
	}
	fmt.Fprintln(tw, header+"\tbudget")
	if direct == nil {
		_ = tw.Flush()
		return
	}
	for _, row := range tableRows(o, r) {
		line := row.label + "\t" + row.direct(direct)
		for _, p := range proxies {
			switch {
			case p == off && !row.auditOff:
				line += "\t-\t-"
			case p != inj:
				line += "\t" + row.value(p, direct) + "\t" + row.ratio(p, direct)
			case !row.inject || ail == nil:
				line += "\t-\t-\t-"
			default:
				line += "\t" + row.value(p, direct) + "\t" + row.ratio(p, direct) + "\t" + row.vsAileron(p, ail)
			}
		}
		fmt.Fprintln(tw, line+"\t"+row.budget)
	}
	_ = tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// row is one line of the table and how to render each cell.
type row struct {
	label  string
	direct func(d *targetResult) string
	value  func(p, d *targetResult) string
	ratio  func(p, d *targetResult) string
	budget string
	// inject is set on the rows the aileron+inject target measures;
	// vsAileron renders its cell against aileron (a, in place of direct).
	inject    bool
	vsAileron func(p, a *targetResult) string
	// auditOff is set on the rows the aileron-audit-off target measures.
	auditOff bool
}

// withAuditOff marks r as measured for aileron-audit-off.
func (r row) withAuditOff() row {
	r.auditOff = true
	return r
}

// withInject marks r as measured for aileron+inject, compared with aileron
// by vs, or by r.ratio when vs is nil.
func (r row) withInject(vs func(p, a *targetResult) string) row {
	r.inject, r.vsAileron = true, vs
	if vs == nil {
		r.vsAileron = r.ratio
	}
	return r
}

// tableRows defines the table's rows.
func tableRows(o options, r results) []row {
	ka := func(t *targetResult) throughputResult { return t.KeepAlive }
	nc := func(t *targetResult) throughputResult { return t.NewConn }
	rows := []row{
		throughputRow(fmt.Sprintf("keep-alive req/s (c=%d)", o.conc), ka,
			r.budgetCell("keep-alive ratio")+r.injectBudgetCell("keep-alive ratio (inject)")).withInject(nil).withAuditOff(),
		throughputRow(fmt.Sprintf("new-conn req/s (c=%d)", o.conc), nc, r.budgetCell("new-connection ratio")),
		cpuRow("CPU µs/req keep-alive", ka).withInject(nil).withAuditOff(),
		cpuRow("CPU µs/req new-conn", nc),
		latencyRow("latency p50 ms (c=1)", func(l latencyResult) float64 { return l.P50ms }).withInject(nil),
		latencyRow("latency p99 ms (c=1)", func(l latencyResult) float64 { return l.P99ms }).withInject(nil),
		addedRow(r.budgetCell("added p50 latency ms") + r.injectBudgetCell("added p50 latency ms (inject)")).withInject(addedVs),
		streamRow(fmt.Sprintf("stream %d MiB MB/s", o.blobMiB)),
		rssRow(),
	}
	if off := r.byName(auditOffTargetName); off != nil {
		rows = append(rows, auditCostRows(o, off, r.budgetCell(auditCostBudget))...)
	}
	if r.Fleet != nil {
		rows = append(rows, fleetRows(o, r.Fleet)...)
	}
	return rows
}

// auditCostRows are the "audit cost: on ÷ off" rows: keep-alive req/s and
// CPU µs/req of aileron ÷ those of off, in the aileron column only.
func auditCostRows(o options, off *targetResult, budget string) []row {
	onlyAileron := func(cell func(a *targetResult) string) func(p, d *targetResult) string {
		return func(p, _ *targetResult) string {
			if p.Name != aileronTargetName {
				return "-"
			}
			return cell(p)
		}
	}
	dashOne := func(*targetResult) string { return "-" }
	tput := row{
		label: fmt.Sprintf("audit cost: on ÷ off req/s (c=%d)", o.conc), direct: dashOne, ratio: dash, budget: budget,
		value: onlyAileron(func(a *targetResult) string {
			return frac(ratio(a.KeepAlive.ReqPerSec, off.KeepAlive.ReqPerSec), a.KeepAlive.Errors+off.KeepAlive.Errors)
		}),
	}
	cpu := row{
		label: "audit cost: on ÷ off CPU µs/req", direct: dashOne, ratio: dash, budget: "-",
		value: onlyAileron(func(a *targetResult) string {
			if a.KeepAlive.CPUPerReqUs == 0 || off.KeepAlive.CPUPerReqUs == 0 {
				return "-"
			}
			return strconv.FormatFloat(a.KeepAlive.CPUPerReqUs/off.KeepAlive.CPUPerReqUs, 'f', 2, 64) + "x"
		}),
	}
	return []row{tput, cpu}
}

// budgetCell renders the named budget as "≥0.50 PASS", or "-".
func (r results) budgetCell(name string) string {
	for _, b := range r.Budgets {
		if b.Name == name {
			prefix := "≥"
			if strings.HasPrefix(b.Name, "added p50 latency ms") {
				prefix = "≤"
			}
			return prefix + strconv.FormatFloat(b.Limit, 'f', 2, 64) + " " + b.Status
		}
	}
	return "-"
}

// injectBudgetCell renders the named aileron+inject budget as
// ", inject PASS", or "" when there is no injection column.
func (r results) injectBudgetCell(name string) string {
	for _, b := range r.Budgets {
		if b.Name == name {
			return ", inject " + b.Status
		}
	}
	return ""
}

func dash(*targetResult, *targetResult) string { return "-" }

func throughputRow(label string, get func(*targetResult) throughputResult, budget string) row {
	return row{
		label:  label,
		direct: func(d *targetResult) string { return reqs(get(d)) },
		value:  func(p, _ *targetResult) string { return reqs(get(p)) },
		ratio: func(p, d *targetResult) string {
			return frac(ratio(get(p).ReqPerSec, get(d).ReqPerSec), get(p).Errors+get(d).Errors)
		},
		budget: budget,
	}
}

func cpuRow(label string, get func(*targetResult) throughputResult) row {
	cell := func(t *targetResult) string {
		if get(t).Requests == 0 {
			return "ERR"
		}
		return strconv.FormatFloat(get(t).CPUPerReqUs, 'f', 0, 64)
	}
	return row{
		label:  label,
		direct: cell,
		value:  func(p, _ *targetResult) string { return cell(p) },
		ratio: func(p, d *targetResult) string {
			if get(p).CPUPerReqUs == 0 || get(d).CPUPerReqUs == 0 {
				return "-"
			}
			return strconv.FormatFloat(get(p).CPUPerReqUs/get(d).CPUPerReqUs, 'f', 2, 64) + "x"
		},
		budget: "-",
	}
}

func latencyRow(label string, get func(latencyResult) float64) row {
	return row{
		label:  label,
		direct: func(d *targetResult) string { return msec(d.Latency, get(d.Latency)) },
		value:  func(p, _ *targetResult) string { return msec(p.Latency, get(p.Latency)) },
		ratio: func(p, d *targetResult) string {
			if p.Latency.Samples == 0 || d.Latency.Samples == 0 {
				return "-"
			}
			return strconv.FormatFloat(ratio(get(p.Latency), get(d.Latency)), 'f', 2, 64) + "x"
		},
		budget: "-",
	}
}

func addedRow(budget string) row {
	return row{
		label:  "added p50 ms (c=1)",
		direct: func(*targetResult) string { return "-" },
		value: func(p, d *targetResult) string {
			if p.Latency.Samples == 0 || d.Latency.Samples == 0 {
				return "ERR"
			}
			return strconv.FormatFloat(p.Latency.P50ms-d.Latency.P50ms, 'f', 3, 64)
		},
		ratio:  dash,
		budget: budget,
	}
}

// addedVs renders aileron+inject p50 − aileron p50: what injection adds
// to a typical request, in ms, signed.
func addedVs(p, a *targetResult) string {
	if p.Latency.Samples == 0 || a.Latency.Samples == 0 {
		return "ERR"
	}
	return strconv.FormatFloat(p.Latency.P50ms-a.Latency.P50ms, 'f', 3, 64)
}

func streamRow(label string) row {
	return row{
		label:  label,
		direct: func(d *targetResult) string { return mbps(d.Stream) },
		value:  func(p, _ *targetResult) string { return mbps(p.Stream) },
		ratio: func(p, d *targetResult) string {
			return frac(ratio(p.Stream.MBps, d.Stream.MBps), p.Stream.Errors+d.Stream.Errors)
		},
		budget: "-",
	}
}

func rssRow() row {
	return row{
		label:  "peak RSS MiB (VmHWM)",
		direct: func(*targetResult) string { return "-" },
		value: func(p, _ *targetResult) string {
			if p.PeakRSSKiB == 0 {
				return "?"
			}
			return strconv.FormatFloat(float64(p.PeakRSSKiB)/1024, 'f', 1, 64)
		},
		ratio:  dash,
		budget: "-",
	}
}

func reqs(t throughputResult) string {
	if t.Requests == 0 {
		return "ERR"
	}
	return strconv.FormatFloat(t.ReqPerSec, 'f', 0, 64)
}

func msec(l latencyResult, v float64) string {
	if l.Samples == 0 {
		return "ERR"
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func mbps(s streamResult) string {
	if s.Errors > 0 {
		return "ERR"
	}
	return strconv.FormatFloat(s.MBps, 'f', 0, 64)
}

func frac(v float64, errs int64) string {
	if errs > 0 && v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// printJSON writes r as indented JSON.
func printJSON(w io.Writer, r results) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("json output: %w", err)
	}
	return nil
}
