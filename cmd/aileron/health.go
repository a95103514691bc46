package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

const healthSynopsis = "health [--ready] [--home DIR] [--config FILE] [--timeout D]"

// cmdHealth exits 0 when the daemon of the home answers on its admin
// socket, and 1 (saying why) when it does not: a container's HEALTHCHECK,
// which needs no shell, curl or open port.
func cmdHealth(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("health", healthSynopsis, stderr)
	_, cfgFile := clientFlags(fs)
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the daemon's answer")
	ready := fs.Bool("ready", false, "also require the node to be ready: its audit trail takes lines and, in a fleet, its sessions are not stale")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := newClient(cfg).Health(ctx); err != nil {
		return err
	}
	if *ready {
		rd, err := newClient(cfg).Ready(ctx)
		if err != nil {
			return err
		}
		if !rd.Ready {
			return fmt.Errorf("node %s is not ready: state: %s; audit: %s", rd.Node, rd.State, rd.Audit)
		}
		if rd.State != "ok" {
			fmt.Fprintf(stdout, "ok: node %s is ready, degraded: state: %s\n", rd.Node, rd.State)
			return nil
		}
		fmt.Fprintf(stdout, "ok: node %s is ready (state and audit trail answer)\n", rd.Node)
		return nil
	}
	fmt.Fprintf(stdout, "ok: the daemon answers on %s\n", cfg.Admin.Socket)
	return nil
}
