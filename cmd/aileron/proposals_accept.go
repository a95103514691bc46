package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/proposals"
)

// ruleFlags adds the flags that edit a rule and choose where it goes.
func ruleFlags(fs *pflag.FlagSet) {
	fs.String("method", "", "the rule's method (default: the proposal's)")
	fs.String("template", "", "the rule's path template, e.g. /repos/{owner}/{repo}/issues (default: the proposal's)")
	fs.String("approval", "", "required or none (default: required for every method but GET and HEAD)")
	fs.String("connector", "", "the learned connector's NAME: local://learned/NAME (default: from the session's name)")
	fs.Bool("all-sessions", false, "give the connector to every live session, not only the proposal's")
}

// acceptRequest is the accept of the edits on fs.
func acceptRequest(fs *pflag.FlagSet) admin.AcceptRequest {
	all, _ := fs.GetBool("all-sessions")
	return admin.AcceptRequest{By: decider(), Connector: str(fs, "connector"), AllSessions: all,
		Edits: proposals.Edits{Method: str(fs, "method"), Template: str(fs, "template"), Approval: str(fs, "approval")}}
}

func proposalsAccept(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	session := str(fs, "session")
	c := newClient(cfg)
	if session == "" {
		if fs.NArg() != 1 {
			return usagef("want one proposal ID, or --session ID for all of a session's open proposals")
		}
		out, err := c.AcceptProposal(context.Background(), fs.Arg(0), acceptRequest(fs))
		if err != nil {
			return err
		}
		return printAcceptance(stdout, out)
	}
	if fs.NArg() != 0 {
		return usagef("--session accepts all of a session's open proposals; give no proposal ID with it")
	}
	for _, f := range []string{"method", "template", "approval"} {
		if fs.Changed(f) {
			return usagef("--%s edits one proposal; with --session each is accepted as proposed (accept one alone to edit it)", f)
		}
	}
	req := acceptRequest(fs)
	out, err := c.AcceptSessionProposals(context.Background(), admin.AcceptSessionRequest{By: req.By, Session: session,
		Connector: req.Connector, AllSessions: req.AllSessions})
	if err != nil {
		return err
	}
	return printAcceptance(stdout, out)
}

// ruleLine is a rule on one line, made printable.
func ruleLine(r proposals.Rule) string {
	approval := "no approval"
	if r.Approval {
		approval = "approval required"
	}
	return fmt.Sprintf("%s %s (%s)", printable.Line(r.Method), printable.Line(r.Template), approval)
}

// printAcceptance says what accepting did: the rules, the connector
// installed, the sessions that got it, the requests released, and what
// to do about a credential the requests carried.
func printAcceptance(stdout io.Writer, out admin.Acceptance) error {
	w := &strings.Builder{}
	for i, p := range out.Proposals {
		op := ""
		if i < len(out.Operations) {
			op = " as operation " + printable.Line(out.Operations[i])
		}
		if p.Rule != nil {
			fmt.Fprintf(w, "accepted %s: %s on %s:%d%s\n", p.ID, ruleLine(*p.Rule), printable.Line(p.Host), p.Port, op)
		}
	}
	fmt.Fprintf(w, "installed %s", printable.Line(out.Connector.Ref()))
	if len(out.Removed) > 0 {
		fmt.Fprintf(w, " (removed %s)", printable.Line(strings.Join(out.Removed, ", ")))
	}
	fmt.Fprintln(w)
	if len(out.Sessions) > 0 {
		fmt.Fprintf(w, "added to session %s\n", printable.Line(strings.Join(out.Sessions, ", ")))
	} else {
		fmt.Fprintln(w, "no session's connector list changed (a session with no --connector list has every connector already)")
	}
	if len(out.Approved) > 0 {
		fmt.Fprintf(w, "approved the held request %s: it is decided anew under the rule\n", strings.Join(out.Approved, ", "))
	}
	if out.Credential {
		ref := printable.Line(out.Connector.Ref())
		fmt.Fprintf(w, "note: the requests carried a credential (an Authorization header or a session placeholder); the rule binds none,\n"+
			"  so the agent's own header goes upstream as sent. To have Aileron inject one instead:\n"+
			"  1. copy the spec of %s (its \"dir\" in `aileron connector list --json`) and add \"credential\" to the operation (docs/connector-spec.md)\n"+
			"  2. `aileron connector remove %s`, then install the copy under your own FQN\n"+
			"  3. `aileron credential set NAME --kind KIND` and `aileron credential bind FQN --credential NAME`\n", ref, ref)
	}
	_, err := io.WriteString(stdout, w.String())
	return err
}

// approveAsRule accepts the proposal of approval fs.Arg(0) with the edits
// on fs: the held request is then decided under the new rule.
func approveAsRule(fs *pflag.FlagSet, cfg *config.Config, stdout io.Writer) error {
	c := newClient(cfg)
	ap, err := c.GetApproval(context.Background(), fs.Arg(0))
	if err != nil {
		return err
	}
	if ap.Preview.ProposalID == "" {
		return fmt.Errorf("approval %s is for operation %s of %s, which is installed already: --as-rule applies to a request "+
			"no operation matched (a session in ask mode); approve it without --as-rule", ap.ID,
			printable.Line(ap.Preview.Operation), printable.Line(ap.Preview.Connector))
	}
	out, err := c.AcceptProposal(context.Background(), ap.Preview.ProposalID, acceptRequest(fs))
	if err != nil {
		return err
	}
	if err := printAcceptance(stdout, out); err != nil {
		return err
	}
	if !slices.Contains(out.Approved, ap.ID) && ap.State == dataplane.ApprovalStatePending {
		_, err = fmt.Fprintf(stdout, "approval %s stays pending: the rule as accepted does not allow its request; "+
			"approve it to send it once, or deny it\n", ap.ID)
	}
	return err
}
