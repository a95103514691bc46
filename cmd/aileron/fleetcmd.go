package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/aileronhq/aileron/state"
)

// fleetNodeInfo is one row of `aileron fleet status`.
type fleetNodeInfo struct {
	Node      string    `json:"node"`
	Instance  string    `json:"instance"`
	Version   string    `json:"version"`
	Proxy     string    `json:"proxy"`
	StartedAt time.Time `json:"started_at"`
	SeenAt    time.Time `json:"seen_at"`
	// Alive: seen within the last minute (a node records itself every 5 s).
	Alive bool `json:"alive"`
}

// cmdFleet is `aileron fleet status`: the nodes the shared state knows.
func cmdFleet(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "status" {
		if len(args) == 0 {
			return usagef("want a subcommand: status")
		}
		return unknownSubcommand("fleet", args[0])
	}
	fs := newFlags("fleet status", "fleet status [--config FILE] [--json]   (the nodes on the fleet's shared state)", stderr)
	_, cfgFile := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("want no arguments")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	if cfg.State.Backend != "postgres" {
		return usagef("this configuration has no shared state (state.backend is %s): pass a fleet node's --config, or AILERON_STATE__BACKEND=postgres and AILERON_STATE__DSN", cfg.State.Backend)
	}
	nodes, err := fleetNodes(context.Background(), cfg.State.DSN)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, map[string]any{"nodes": nodes})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tALIVE\tSEEN\tSTARTED\tPROXY\tVERSION\tINSTANCE")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%v\t%s ago\t%s\t%s\t%s\t%s\n", n.Node, n.Alive, time.Since(n.SeenAt).Round(time.Second),
			n.StartedAt.Local().Format(time.DateTime), n.Proxy, n.Version, n.Instance)
	}
	return tw.Flush()
}

// fleetNodes reads the fleet_nodes table.
func fleetNodes(ctx context.Context, dsn string) ([]fleetNodeInfo, error) {
	db, err := state.OpenPostgres(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT node, instance, version, proxy, started_at, seen_at FROM fleet_nodes ORDER BY node`)
	if err != nil {
		return nil, db.Unavailable(fmt.Errorf("reading the fleet's nodes: %w", err))
	}
	defer rows.Close()
	out := []fleetNodeInfo{}
	for rows.Next() {
		var n fleetNodeInfo
		var started, seen string
		if err := rows.Scan(&n.Node, &n.Instance, &n.Version, &n.Proxy, &started, &seen); err != nil {
			return nil, err
		}
		if n.StartedAt, err = db.ParseTime("fleet_nodes.started_at", started); err != nil {
			return nil, err
		}
		if n.SeenAt, err = db.ParseTime("fleet_nodes.seen_at", seen); err != nil {
			return nil, err
		}
		n.Alive = time.Since(n.SeenAt) < nodeAlive
		out = append(out, n)
	}
	return out, rows.Err()
}
