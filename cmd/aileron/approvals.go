package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/dataplane"
)

// approvalsSubs lists the approvals subcommands, for messages.
const approvalsSubs = "list, show, approve, deny or web-token"

func cmdApprovals(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: %s", approvalsSubs)
	}
	sub, rest := args[0], args[1:]
	run, ok := map[string]func(*pflag.FlagSet, *config.Config, io.Writer, io.Writer) error{
		"list": approvalsList, "show": approvalsShow, "approve": approvalsApprove,
		"deny": approvalsDeny, "web-token": approvalsWebToken,
	}[sub]
	if !ok {
		return usagef("unknown subcommand %q: want %s", sub, approvalsSubs)
	}
	fs := newFlags("approvals "+sub, approvalsSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	switch sub {
	case "list":
		fs.String("state", "pending", "pending, approved, denied, consumed or expired; \"\" for all")
		fs.String("session", "", "only this session's approvals")
		fs.Bool("json", false, "print JSON")
	case "show":
		fs.Bool("json", false, "print JSON")
	case "deny":
		fs.String("reason", "", "why (required; the agent is shown it)")
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	return run(fs, cfg, stdout, stderr)
}

func approvalsSynopsis(sub string) string {
	switch sub {
	case "show":
		return "approvals show ID [--json]"
	case "approve":
		return "approvals approve ID"
	case "deny":
		return "approvals deny ID --reason R"
	case "web-token":
		return "approvals web-token      (prints the approvals page's login token and address)"
	}
	return "approvals list [--state S] [--session ID] [--json]"
}

// decider names the human deciding from this command line.
func decider() string {
	u := os.Getenv("USER")
	if u == "" {
		u = "unknown"
	}
	return "cli:" + u
}

func approvalsList(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 0 {
		return usagef("list takes no arguments; filter with --state and --session")
	}
	list, err := newClient(cfg).ListApprovals(context.Background(),
		approvals.Filter{State: dataplane.ApprovalState(str(fs, "state")), Session: str(fs, "session")})
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, map[string]any{"approvals": append([]approvals.Approval{}, list...)})
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no approvals")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSESSION\tOPERATION\tREQUEST\tEXPIRES")
	for _, ap := range list {
		p := ap.Preview
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s %s%s\t%s\n", ap.ID, ap.State, ap.Session, p.Tool, p.Operation,
			p.Method, p.Host, p.Path, ap.ExpiresAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func approvalsShow(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one approval ID")
	}
	ap, err := newClient(cfg).GetApproval(context.Background(), fs.Arg(0))
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, ap)
	}
	printApproval(stdout, ap)
	return nil
}

// printApproval writes one approval and its preview for a human.
func printApproval(w io.Writer, ap approvals.Approval) {
	p := ap.Preview
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("ID", ap.ID)
	row("State", string(ap.State))
	row("Session", ap.Session)
	row("Connector", p.Connector+" "+p.Version)
	row("Tool", p.Tool)
	row("Operation", p.Operation)
	row("Summary", p.Summary)
	row("Request", p.Method+" "+p.Host+p.Path)
	row("Body", fmt.Sprintf("%d bytes", p.BodyBytes))
	row("Digest", ap.Digest)
	row("Created", ap.CreatedAt.Format(time.RFC3339))
	row("Expires", ap.ExpiresAt.Format(time.RFC3339))
	if ap.DecidedAt != nil {
		row("Decided", ap.DecidedAt.Format(time.RFC3339)+" by "+ap.DecidedBy)
	}
	row("Reason", ap.Reason)
	tw.Flush()
	if len(p.Inputs) == 0 {
		return
	}
	fmt.Fprintln(w, "Inputs (redacted):")
	names := make([]string, 0, len(p.Inputs))
	for k := range p.Inputs {
		names = append(names, k)
	}
	sort.Strings(names)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t%v\n", k, p.Inputs[k])
	}
	tw.Flush()
}

func approvalsApprove(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one approval ID")
	}
	ap, err := newClient(cfg).ApproveApproval(context.Background(), fs.Arg(0), decider())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "approved %s (%s %s%s)\n", ap.ID, ap.Preview.Method, ap.Preview.Host, ap.Preview.Path)
	return nil
}

func approvalsDeny(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one approval ID")
	}
	reason := strings.TrimSpace(str(fs, "reason"))
	if reason == "" {
		return usagef("--reason is required: say why; the agent is shown it")
	}
	ap, err := newClient(cfg).DenyApproval(context.Background(), fs.Arg(0), decider(), reason)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "denied %s (%s %s%s): %s\n", ap.ID, ap.Preview.Method, ap.Preview.Host, ap.Preview.Path, ap.Reason)
	return nil
}

// approvalsWebToken prints the admin token (creating it if the daemon has
// not yet) and where the approvals page listens. It reads the file directly,
// so it works without a running daemon.
func approvalsWebToken(fs *pflag.FlagSet, cfg *config.Config, stdout, stderr io.Writer) error {
	if fs.NArg() != 0 {
		return usagef("web-token takes no arguments")
	}
	tok, err := admin.LoadOrCreateToken(filepath.Join(cfg.Home, "keys", "admin.token"))
	if err != nil {
		return err
	}
	if cfg.Admin.WebListen == "" {
		fmt.Fprintln(stderr, "note: the approvals page is off (admin.web_listen is empty)")
	} else {
		fmt.Fprintf(stderr, "approvals page: http://%s/login\n", cfg.Admin.WebListen)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
