package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/approvals"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
)

// approvalsWatch is a live list of the pending approvals in the terminal,
// decided in place: it redraws whenever the list changes, and reads one
// command per line (a N, d N REASON, s N, q).
func approvalsWatch(fs *pflag.FlagSet, cfg *config.Config, stdout, _ io.Writer) error {
	if fs.NArg() != 0 {
		return usagef("watch takes no arguments; filter with --session")
	}
	every, _ := fs.GetDuration("interval")
	if every <= 0 {
		return usagef("--interval must be positive, such as 1s")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	w := &watcher{c: newClient(cfg), session: str(fs, "session"), out: stdout, tty: isTerminal(stdout)}
	lines := make(chan string)
	go func() { // stdin, a line at a time; closed at its end
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := w.refresh(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case line, ok := <-lines:
			if !ok || strings.TrimSpace(line) == "q" {
				return nil
			}
			w.note = w.command(ctx, line)
			w.drawn = "" // redraw with the note
		}
	}
}

// watcher is the state of approvals watch: the pending approvals shown
// (numbered from 1), the last command's outcome, and what was drawn.
type watcher struct {
	c       *admin.Client
	session string
	out     io.Writer
	list    []approvals.Approval
	note    string
	drawn   string
	// nums gives each approval a number the first time it is shown, never
	// reused: when others are decided meanwhile, "a 2" still means the
	// approval that was number 2 on the screen, or nothing.
	nums map[string]int
	last int
	tty  bool // out is a terminal: the screen is cleared before each redraw
}

// num is ap's number on the screen.
func (w *watcher) num(id string) int {
	if w.nums == nil {
		w.nums = map[string]int{}
	}
	if n, ok := w.nums[id]; ok {
		return n
	}
	w.last++
	w.nums[id] = w.last
	return w.last
}

// refresh reads the pending approvals and redraws when anything changed.
func (w *watcher) refresh(ctx context.Context) error {
	list, err := w.c.ListApprovals(ctx, approvals.Filter{State: dataplane.ApprovalStatePending, Session: w.session})
	if err != nil {
		return err
	}
	w.list = list
	var b strings.Builder
	fmt.Fprintf(&b, "Pending approvals: %d", len(list))
	if w.session != "" {
		fmt.Fprintf(&b, " (session %s)", w.session)
	}
	b.WriteString("\n\n")
	for _, ap := range list { // no clock on screen: it is redrawn only when the list changes, not under a command being typed
		p := ap.Preview
		fmt.Fprintf(&b, "%3d  %s  requested %s, expires %s  session %s\n     %s %s  (%s)\n     %s\n", w.num(ap.ID), ap.ID,
			ap.CreatedAt.Local().Format("15:04:05"), ap.ExpiresAt.Local().Format("15:04"), ap.Session,
			printable.Line(p.Method), printable.Clip(p.Target(), 100), operationLabel(p), fieldsHint(p))
		if p.ProposalID != "" {
			b.WriteString("     no operation matches this request: approving sends it once\n")
		}
	}
	if len(list) == 0 {
		b.WriteString("     nothing waits for a decision\n")
	}
	b.WriteString("\na N approve · d N REASON deny · s N show · q quit   (N: the number, or the approval id)\n")
	if w.note != "" {
		b.WriteString(printable.Text(w.note) + "\n") // it may quote the daemon's errors
	}
	if screen := b.String(); screen != w.drawn {
		if w.tty {
			fmt.Fprint(w.out, "\x1b[H\x1b[2J") // a terminal: redraw in place
		}
		fmt.Fprint(w.out, screen+"> ")
		w.drawn = screen
	}
	return nil
}

// pick is the pending approval a command names: by its number on the
// screen, which stays its own, or by its id. One decided or expired
// meanwhile is named by nothing.
func (w *watcher) pick(which string) (approvals.Approval, bool) {
	n, err := strconv.Atoi(which)
	for _, ap := range w.list {
		if ap.ID == which || err == nil && w.nums[ap.ID] == n {
			return ap, true
		}
	}
	return approvals.Approval{}, false
}

// command runs one line and says how it went.
func (w *watcher) command(ctx context.Context, line string) string {
	verb, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	which, reason, _ := strings.Cut(strings.TrimSpace(rest), " ")
	if verb == "" {
		return ""
	}
	ap, ok := w.pick(which)
	if !ok {
		return fmt.Sprintf("%q: want a, d or s and the number of a pending approval on the screen (or its id); one decided meanwhile is gone from the list", line)
	}
	switch verb {
	case "a":
		if _, err := w.c.ApproveApproval(ctx, ap.ID, decider()); err != nil {
			return "approve " + ap.ID + ": " + err.Error()
		}
		return "approved " + ap.ID + "; the held request goes on (or its identical retry)"
	case "d":
		if reason = strings.TrimSpace(reason); reason == "" {
			return "d N REASON: say why; the agent is shown it"
		}
		if _, err := w.c.DenyApproval(ctx, ap.ID, decider(), reason); err != nil {
			return "deny " + ap.ID + ": " + err.Error()
		}
		return "denied " + ap.ID
	case "s":
		var b strings.Builder
		printApproval(&b, ap)
		return strings.TrimRight(b.String(), "\n")
	}
	return fmt.Sprintf("%q: want a N, d N REASON, s N or q", line)
}
