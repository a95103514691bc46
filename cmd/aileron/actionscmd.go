package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/actions"
	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
)

// runCanceller is the admin API's admin.RunCanceller: the daemon's action
// runner, for any session.
type runCanceller struct{ r *actions.Runner }

func (c runCanceller) CancelRun(ctx context.Context, id, by string) (admin.RunCancel, error) {
	res, cancelled, err := c.r.Cancel(ctx, nil, id, by)
	if err != nil {
		return admin.RunCancel{}, err
	}
	out := admin.RunCancel{RunID: res.RunID, Status: res.Status, Cancelled: cancelled, Message: res.Message}
	if res.Error != nil {
		out.Step = res.Error.Step
	}
	return out, nil
}

// cmdActions runs `aileron actions cancel RUN`.
func cmdActions(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: %s", orList(subcommands("actions")))
	}
	sub, rest := args[0], args[1:]
	if sub != "cancel" {
		return unknownSubcommand("actions", sub)
	}
	fs := newFlags("actions cancel", "actions cancel RUN   (RUN: a result's run_id, or the approval_id a run waits on; a running run's id= is on its action.started line: aileron audit tail --event action.started)", stderr)
	_, cfgFile := clientFlags(fs)
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	return actionsCancel(fs, cfg, stdout)
}

// actionsCancel cancels one run and says what it cancelled, or how the run
// had already ended.
func actionsCancel(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one run ID (a result's run_id, or the approval_id a run waits on)")
	}
	res, err := newClient(cfg).CancelRun(context.Background(), fs.Arg(0), decider())
	if err != nil {
		return err
	}
	msg := printable.Clip(res.Message, 500)
	if res.Cancelled {
		fmt.Fprintf(stdout, "cancelled run %s: %s\n", res.RunID, msg)
		return nil
	}
	fmt.Fprintf(stdout, "run %s had already ended: %s (%s)\n", res.RunID, res.Status, msg)
	return nil
}
