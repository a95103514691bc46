package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/notify"
	"github.com/aileronhq/aileron/printable"
)

func cmdApprovals(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: %s", orList(subcommands("approvals")))
	}
	sub, rest := args[0], args[1:]
	run, ok := map[string]func(*pflag.FlagSet, *config.Config, io.Writer, io.Writer) error{
		"list": approvalsList, "show": approvalsShow, "approve": approvalsApprove,
		"deny": approvalsDeny, "web-token": approvalsWebToken, "test-webhooks": approvalsTestWebhooks, "watch": approvalsWatch,
	}[sub]
	if !ok {
		return unknownSubcommand("approvals", sub)
	}
	fs := newFlags("approvals "+sub, approvalsSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	switch sub {
	case "list":
		fs.String("state", "pending", "pending, approved, denied, consumed or expired; \"\" for all")
		fs.String("session", "", "only this session's approvals")
		fs.Bool("json", false, "print JSON")
	case "show":
		fs.Bool("json", false, "print JSON (the body's exact bytes are base64 in preview.body.raw)")
		fs.Bool("raw", false, "print the whole request as it will be sent, nothing cut (control characters escaped)")
	case "approve":
		fs.Bool("as-rule", false, "allow as a rule: accept the proposal of a request no operation matched (see proposals accept)")
		ruleFlags(fs)
	case "deny":
		fs.String("reason", "", "why (required; the agent is shown it)")
	case "watch":
		fs.String("session", "", "only this session's approvals")
		fs.Duration("interval", time.Second, "how often the list is read again")
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
		return "approvals show ID [--raw | --json]"
	case "approve":
		return "approvals approve ID [--as-rule [--method M] [--template T] [--approval required|none] [--connector NAME] [--all-sessions]]"
	case "deny":
		return "approvals deny ID --reason R"
	case "web-token":
		return "approvals web-token      (prints the approvals page's login token and address)"
	case "watch":
		return "approvals watch [--session ID] [--interval 1s]   (a live list; decide in place: a N, d N REASON, s N, q)"
	case "test-webhooks":
		return "approvals test-webhooks  (sends a signed notify.test event to every approval.webhooks URL)"
	}
	return "approvals list [--state S] [--session ID] [--json]"
}

// decider names the human deciding from this command line.
func decider() string {
	u := os.Getenv("USER")
	if u == "" {
		if cur, err := user.Current(); err == nil {
			u = cur.Username // USER is unset in containers and under docker exec
		} else {
			u = "uid" + strconv.Itoa(os.Getuid())
		}
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
		if st := str(fs, "state"); st != "" {
			fmt.Fprintf(stdout, "no %s approvals (--state \"\" lists them all)\n", st)
		} else {
			fmt.Fprintln(stdout, "no approvals")
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSESSION\tOPERATION\tREQUEST\tFIELDS\tEXPIRES")
	for _, ap := range list {
		p := ap.Preview
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s %s\t%s\t%s\n", ap.ID, ap.State, ap.Session, operationLabel(p),
			printable.Line(p.Method), printable.Clip(p.Target(), 120), fieldsHint(p), ap.ExpiresAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func approvalsShow(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one approval ID")
	}
	asJSON, _ := fs.GetBool("json")
	raw, _ := fs.GetBool("raw")
	if asJSON && raw {
		return usagef("--json and --raw are alternatives: pick one")
	}
	ap, err := newClient(cfg).GetApproval(context.Background(), fs.Arg(0))
	if err != nil {
		return err
	}
	switch {
	case asJSON:
		return printJSON(stdout, ap)
	case raw:
		_, err := io.WriteString(stdout, ap.Preview.RawRequest())
		return err
	}
	printApproval(stdout, ap)
	return nil
}

// Display limits of `approvals show`: longer values say how much more
// there is, and --raw prints everything.
const (
	showValueLimit = 1 << 10
	showBodyLimit  = 64 << 10
)

// printApproval writes one approval for a human: every string made
// printable, the whole target, the forwarded headers, every field (the
// ones the spec does not declare marked), and the body.
func printApproval(w io.Writer, ap approvals.Approval) {
	p := ap.Preview
	pr := func(s string) string { return printable.Clip(s, showValueLimit) }
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("ID", ap.ID)
	row("State", string(ap.State))
	row("Session", ap.Session)
	if p.ProposalID != "" {
		row("Operation", "none: no operation matches this request")
		row("Proposal", printable.Line(p.ProposalID)+" (approve sends this request once; aileron proposals show "+
			printable.Line(p.ProposalID)+" for the rule it proposes)")
	} else {
		row("Connector", pr(p.Connector+" "+p.Version))
		row("Tool", pr(p.Tool))
		row("Operation", pr(p.Operation))
	}
	row("Summary", pr(p.Summary))
	row("Request", pr(p.Method)+" "+printable.Line(p.Target()))
	row("Credential", p.Credential)
	row("Body", fmt.Sprintf("%d bytes", p.BodyBytes))
	row("Digest", ap.Digest)
	row("Created", ap.CreatedAt.Format(time.RFC3339))
	row("Expires", ap.ExpiresAt.Format(time.RFC3339))
	if ap.DecidedAt != nil {
		row("Decided", ap.DecidedAt.Format(time.RFC3339)+" by "+pr(ap.DecidedBy))
	}
	row("Reason", pr(ap.Reason))
	if u := p.Undeclared(); len(u) > 0 && p.ProposalID == "" { // no operation declares anything
		row("NOT DECLARED", printable.Line(strings.Join(u, ", "))+" (the connector's spec does not name these: check them)")
	}
	tw.Flush()
	printPreviewParts(w, ap.ID, p, pr)
}

// printPreviewParts prints the headers, fields, inputs and body.
func printPreviewParts(w io.Writer, id string, p dataplane.Preview, pr func(string) string) {
	if len(p.Headers) > 0 {
		fmt.Fprintln(w, "Headers (as forwarded):")
		for _, h := range p.Headers {
			fmt.Fprintf(w, "  %s: %s\n", pr(h.Name), pr(h.Value))
		}
	}
	if len(p.Fields) > 0 {
		fmt.Fprintln(w, "Fields:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range p.Fields {
			mark := ""
			if !f.Declared {
				mark = "\t(not declared)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s%s\n", f.Source, pr(f.Name), pr(f.Value), mark)
		}
		tw.Flush()
	}
	if len(p.Inputs) > 0 {
		fmt.Fprintln(w, "Inputs:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, f := range p.InputFields() {
			fmt.Fprintf(tw, "  %s\t%s\n", pr(f.Name), pr(f.Value))
		}
		tw.Flush()
	}
	if p.Body != nil {
		text, more := p.Body.Show(showBodyLimit)
		fmt.Fprintf(w, "Body (%s, %s):\n%s", p.Body.Kind, pr(p.Body.ContentType), text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(w)
		}
		if more > 0 {
			fmt.Fprintf(w, "… %d more bytes: aileron approvals show %s --raw prints the whole request\n", more, id)
		}
	}
}

func approvalsApprove(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one approval ID")
	}
	if asRule, _ := fs.GetBool("as-rule"); asRule {
		return approveAsRule(fs, cfg, stdout)
	}
	for _, f := range []string{"method", "template", "approval", "connector", "all-sessions"} {
		if fs.Changed(f) {
			return usagef("--%s edits a rule; add --as-rule to allow the request as a rule", f)
		}
	}
	ap, err := newClient(cfg).ApproveApproval(context.Background(), fs.Arg(0), decider())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "approved %s (%s %s)\n", ap.ID, printable.Line(ap.Preview.Method), printable.Clip(ap.Preview.Target(), 200))
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
	fmt.Fprintf(stdout, "denied %s (%s %s): %s\n", ap.ID, printable.Line(ap.Preview.Method), printable.Clip(ap.Preview.Target(), 200),
		printable.Line(ap.Reason))
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
	switch web := runningWebURL(cfg.Home); {
	case web != "":
		fmt.Fprintf(stderr, "approvals page: %s/login\n", web)
	case cfg.Admin.WebListen == "":
		fmt.Fprintln(stderr, "note: the approvals page is off (admin.web_listen is empty)")
	case strings.HasSuffix(cfg.Admin.WebListen, ":0"):
		fmt.Fprintf(stderr, "approvals page: its port is chosen when the daemon starts (admin.web_listen %s); run this again once it runs\n", cfg.Admin.WebListen)
	default:
		fmt.Fprintf(stderr, "approvals page (once the daemon runs): http://%s/login\n", cfg.Admin.WebListen)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// runningWebURL is the running daemon's approvals page (from
// $home/daemon.json, which it writes at start and removes at exit), or ""
// when no daemon runs or its page is off.
func runningWebURL(home string) string {
	b, err := os.ReadFile(filepath.Join(home, "daemon.json"))
	if err != nil {
		return ""
	}
	var st struct {
		PID     int    `json:"pid"`
		WebAddr string `json:"web_addr"`
		WebURL  string `json:"web_url"`
	}
	if json.Unmarshal(b, &st) != nil || st.PID <= 0 || syscall.Kill(st.PID, 0) != nil {
		return ""
	}
	if st.WebURL == "" && st.WebAddr != "" {
		return "http://" + st.WebAddr // written by an older daemon
	}
	return st.WebURL
}

// approvalsTestWebhooks sends a test event to every webhook and prints how
// each answered; it fails when one did not take it.
func approvalsTestWebhooks(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 0 {
		return usagef("test-webhooks takes no arguments")
	}
	results, err := newClient(cfg).TestWebhooks(context.Background())
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range results {
		if r.Error != "" {
			failed++
			fmt.Fprintf(stdout, "FAIL %s: %s\n", notify.HookName(r.URL), r.Error)
			continue
		}
		fmt.Fprintf(stdout, "ok   %s: HTTP %d\n", notify.HookName(r.URL), r.Status)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d webhooks did not take the test event", failed, len(results))
	}
	return nil
}

// operationLabel is the OPERATION of a held request: tool/operation, or
// for a request no operation matches (ask mode) the proposal it was
// learned into.
func operationLabel(p dataplane.Preview) string {
	if p.ProposalID != "" {
		return "none (proposal " + printable.Line(p.ProposalID) + ")"
	}
	return printable.Line(p.Tool) + "/" + printable.Line(p.Operation)
}

// fieldsHint tells held requests apart on one line: their first decoded
// fields as name=value, clipped ("-" when there are none).
func fieldsHint(p dataplane.Preview) string {
	var parts []string
	for _, f := range p.Fields {
		parts = append(parts, printable.Line(f.Name)+"="+printable.Clip(f.Value, 24))
		if len(parts) == 3 {
			break
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return printable.Clip(strings.Join(parts, " "), 80)
}
