package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/proposals"
)

func cmdProposals(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: %s", orList(subcommands("proposals")))
	}
	sub, rest := args[0], args[1:]
	run, ok := map[string]func(*pflag.FlagSet, *config.Config, io.Writer) error{
		"list": proposalsList, "show": proposalsShow, "reject": proposalsReject, "accept": proposalsAccept,
	}[sub]
	if !ok {
		return unknownSubcommand("proposals", sub)
	}
	fs := newFlags("proposals "+sub, proposalsSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	switch sub {
	case "list":
		fs.String("session", "", "only this session's proposals")
		fs.Bool("json", false, "print JSON")
	case "show":
		fs.Bool("json", false, "print JSON")
	case "reject":
		fs.String("reason", "", "why (required; recorded with the proposal)")
	case "accept":
		fs.String("session", "", "accept every open proposal of this session, each as proposed, into one connector")
		ruleFlags(fs)
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	return run(fs, cfg, stdout)
}

func proposalsSynopsis(sub string) string {
	switch sub {
	case "show":
		return "proposals show ID [--json]"
	case "reject":
		return "proposals reject ID --reason R"
	case "accept":
		return "proposals accept ID [--method M] [--template T] [--approval required|none] [--connector NAME] [--all-sessions]\n" +
			"       aileron proposals accept --session ID [--connector NAME] [--all-sessions]\n" +
			"  (allow as a rule: installs the next version of the learned connector local://learned/NAME and gives it to the session)"
	}
	return "proposals list [--session ID] [--json]   (the unknown requests of sessions in learn or ask mode, and the access agents asked for)"
}

func proposalsList(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	if fs.NArg() != 0 {
		return usagef("list takes no arguments; filter with --session")
	}
	list, err := newClient(cfg).ListProposals(context.Background(), str(fs, "session"))
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, map[string]any{"proposals": append([]proposals.Proposal{}, list...)})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no proposals (a session records them in learn mode: session create --unknown learn)")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSESSION\tREQUEST\tCOUNT\tLAST SEEN")
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", p.ID, p.State, printable.Line(p.Session), printable.Clip(request(p), 160),
			p.Count, p.LastSeen.Format(time.RFC3339))
	}
	return tw.Flush()
}

// request is a proposal's method, host, port and template on one line,
// every part made printable.
func request(p proposals.Proposal) string {
	return fmt.Sprintf("%s %s:%d%s", printable.Line(p.Method), printable.Line(p.Host), p.Port, printable.Line(p.Template))
}

func proposalsShow(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one proposal ID")
	}
	p, err := newClient(cfg).GetProposal(context.Background(), fs.Arg(0))
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, p)
	}
	w := &strings.Builder{}
	fmt.Fprintf(w, "proposal   %s (%s)\n", p.ID, p.State)
	fmt.Fprintf(w, "session    %s\n", printable.Line(p.Session))
	fmt.Fprintf(w, "method     %s\n", printable.Line(p.Method))
	fmt.Fprintf(w, "host       %s:%d\n", printable.Line(p.Host), p.Port)
	fmt.Fprintf(w, "template   %s\n", printable.Line(p.Template))
	fmt.Fprintf(w, "count      %d (first %s, last %s)\n", p.Count, p.FirstSeen.Format(time.RFC3339), p.LastSeen.Format(time.RFC3339))
	if p.Justification != "" {
		fmt.Fprintf(w, "asked      %s\n", printable.Line(p.Justification))
	}
	if p.Credential {
		fmt.Fprintln(w, "credential the requests carried one (an Authorization header or a session placeholder); a rule binds none by itself")
	} else {
		fmt.Fprintln(w, "credential none carried")
	}
	for _, ex := range p.Examples {
		fmt.Fprintf(w, "example    %s (audit id)\n", printable.Line(ex))
	}
	if p.State == proposals.StateRejected {
		fmt.Fprintf(w, "rejected   by %s: %s\n", printable.Line(p.DecidedBy), printable.Line(p.Reason))
	}
	if p.State == proposals.StateAccepted && p.Rule != nil {
		fmt.Fprintf(w, "accepted   by %s as %s into %s\n", printable.Line(p.DecidedBy), ruleLine(*p.Rule), printable.Line(p.Connector))
	}
	_, err = io.WriteString(stdout, w.String())
	return err
}

func proposalsReject(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one proposal ID")
	}
	reason := strings.TrimSpace(str(fs, "reason"))
	if reason == "" {
		return usagef("--reason is required: say why the request should stay refused")
	}
	p, err := newClient(cfg).RejectProposal(context.Background(), fs.Arg(0), decider(), reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rejected %s (%s): %s\n", p.ID, request(p), printable.Line(p.Reason))
	return nil
}
