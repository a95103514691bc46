package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aileronhq/aileron/internal/pgserver"
)

// The two-node row: a fleet of two daemons on a private Postgres server
// (internal/pgserver, unix socket only), against the SQLite daemon of the
// rest of the bench. Keep-alive throughput through node A on Postgres is
// measured interleaved with the SQLite daemon (ABBA), and the time from an
// approval decided on node A to the release of the request held on node B
// against the same on one SQLite node.

// fleetCycles is how many approvals each release measurement makes.
const fleetCycles = 11

// fleetEnv is the fleet under measurement.
type fleetEnv struct {
	pg   *pgserver.Server
	a, b *daemon
	viaA target // node A, with a session created on node A
	viaB target // the same session through node B
}

// fleetResult is the two-node row's figures.
type fleetResult struct {
	// SQLite and Postgres are keep-alive req/s and CPU through the SQLite
	// daemon and through fleet node A, interleaved.
	SQLite   throughputResult `json:"sqlite_keep_alive"`
	Postgres throughputResult `json:"postgres_keep_alive"`
	// ReleaseOneNodeMs and ReleaseAcrossMs are the medians of the time
	// from `aileron approvals approve` to the held request's answer: on
	// one SQLite node, and decided on node A for a request held on B.
	ReleaseOneNodeMs float64 `json:"release_one_node_p50_ms"`
	ReleaseAcrossMs  float64 `json:"release_across_nodes_p50_ms"`
}

// fleetConfig is a fleet node's state section, after the bench's config.
const fleetConfig = `state:
  backend: postgres
  dsn: %q
  fleet_key_file: %q
  vault_key_file: %q
  node: %s
`

// startFleet starts Postgres and two nodes on it, installs the bench
// connector and creates a session through node A. A failure (no
// Postgres here) is returned for a note; the rest of the bench goes on.
func (e *env) startFleet(ctx context.Context, o options, rootPath string, stderr io.Writer) (*fleetEnv, error) {
	fmt.Fprintln(stderr, "bench: starting Postgres and a fleet of two daemons on it")
	pg, err := pgserver.Start()
	if err != nil {
		return nil, err
	}
	f := &fleetEnv{pg: pg}
	dsn, err := pg.NewDatabase()
	if err != nil {
		f.stop()
		return nil, err
	}
	keys := filepath.Join(e.dir, "fleet-keys")
	base := fmt.Sprintf(benchConfig, rootPath, upstreamIP, o.logLevel, true)
	for _, n := range []struct {
		name string
		d    **daemon
	}{{"node-a", &f.a}, {"node-b", &f.b}} {
		cfg := base + fmt.Sprintf(fleetConfig, dsn, filepath.Join(keys, "fleet.key"), filepath.Join(keys, "vault.key"), n.name)
		if *n.d, err = startDaemonConfig(ctx, o.aileron, filepath.Join(e.dir, n.name), cfg); err != nil {
			f.stop()
			return nil, err
		}
	}
	if f.viaA, err = e.aileronTarget(ctx, f.a); err != nil {
		f.stop()
		return nil, err
	}
	f.viaA.name = "aileron-fleet"
	f.viaB = f.viaA
	u := *f.viaA.proxy
	u.Host = f.b.info.ProxyAddr
	f.viaB.proxy, f.viaB.pid = &u, f.b.cmd.Process.Pid
	return f, nil
}

// stop stops the nodes and Postgres.
func (f *fleetEnv) stop() {
	for _, d := range []*daemon{f.a, f.b} {
		if d != nil {
			_ = d.stop(10 * time.Second)
		}
	}
	f.pg.Close()
}

// measureFleet runs the two-node row's measurements.
func (e *env) measureFleet(ctx context.Context, o options, f *fleetEnv, single target, stderr io.Writer) (fleetResult, error) {
	var r fleetResult
	items := make([]string, 64)
	for i := range items {
		items[i] = e.up.itemURL(i + 1)
	}
	fmt.Fprintf(stderr, "bench: %-14s %s, interleaved with %s\n", "keep-alive", f.viaA.name, single.name)
	r.SQLite, r.Postgres = runInterleaved(ctx, single, f.viaA, items, o.conc, o.warmup, o.duration, e.up.conns)
	fmt.Fprintf(stderr, "bench: %-14s held on one node, approved on it; held on node B, approved on node A\n", "release")
	var err error
	if r.ReleaseOneNodeMs, err = e.releaseP50(ctx, e.d, e.d, single, 1000); err != nil {
		return r, err
	}
	if r.ReleaseAcrossMs, err = e.releaseP50(ctx, f.a, f.b, f.viaB, 2000); err != nil {
		return r, err
	}
	return r, nil
}

// releaseP50 holds fleetCycles requests through t (on node holder), each
// approved on node decider once it is pending, and returns the median time
// from the start of the approve command to the held request's answer.
func (e *env) releaseP50(ctx context.Context, decider, holder *daemon, t target, firstID int) (float64, error) {
	c := t.client(1, true)
	defer c.CloseIdleConnections()
	var took []float64
	for i := range fleetCycles {
		done := make(chan error, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodDelete, e.up.itemURL(firstID+i), nil)
			if err == nil {
				var resp *http.Response
				if resp, err = c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			done <- err
		}()
		id, err := pendingApproval(ctx, holder)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if _, err := decider.cli(ctx, "approvals", "approve", id); err != nil {
			return 0, err
		}
		if err := <-done; err != nil {
			return 0, fmt.Errorf("the held request: %w", err)
		}
		took = append(took, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}

// pendingApproval polls node d until one approval is pending and returns
// its id.
func pendingApproval(ctx context.Context, d *daemon) (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, err := d.cli(ctx, "approvals", "list", "--state", "pending", "--json")
		if err != nil {
			return "", err
		}
		var list struct {
			Approvals []struct {
				ID string `json:"id"`
			} `json:"approvals"`
		}
		if json.Unmarshal(out, &list) == nil && len(list.Approvals) == 1 {
			return list.Approvals[0].ID, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "", fmt.Errorf("no pending approval on %s within 10s", d.home)
}

// fleetRows are the two-node rows, in the aileron column only.
func fleetRows(o options, f *fleetResult) []row {
	dashOne := func(*targetResult) string { return "-" }
	only := func(cell func() string) func(p, d *targetResult) string {
		return func(p, _ *targetResult) string {
			if p.Name != aileronTargetName {
				return "-"
			}
			return cell()
		}
	}
	cpu := func() string {
		if f.SQLite.CPUPerReqUs == 0 || f.Postgres.CPUPerReqUs == 0 {
			return "-"
		}
		return strconv.FormatFloat(f.Postgres.CPUPerReqUs/f.SQLite.CPUPerReqUs, 'f', 2, 64) + "x"
	}
	release := func() string {
		if f.ReleaseOneNodeMs == 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f÷%.0f ms = %.2fx", f.ReleaseAcrossMs, f.ReleaseOneNodeMs, f.ReleaseAcrossMs/f.ReleaseOneNodeMs)
	}
	return []row{
		{label: fmt.Sprintf("two nodes: Postgres ÷ SQLite req/s (c=%d)", o.conc), direct: dashOne, ratio: dash, budget: "-",
			value: only(func() string {
				return frac(ratio(f.Postgres.ReqPerSec, f.SQLite.ReqPerSec), f.Postgres.Errors+f.SQLite.Errors)
			})},
		{label: "two nodes: Postgres ÷ SQLite CPU µs/req", direct: dashOne, ratio: dash, budget: "-", value: only(cpu)},
		{label: "two nodes: approval release p50, across ÷ one", direct: dashOne, ratio: dash, budget: "-", value: only(release)},
	}
}

// fleetNote explains the two-node rows.
func fleetNote(f *fleetResult) string {
	return strings.Join([]string{
		"two nodes: keep-alive through a fleet node on Postgres, interleaved with the SQLite daemon (allowed requests read no state: the figures should match);",
		fmt.Sprintf("approval release: median of %d, from `aileron approvals approve` on node A (a process start included) to the answer of the request held on node B,", fleetCycles),
		"against the same on one SQLite node",
	}, " ")
}
