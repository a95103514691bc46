package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
	"github.com/spf13/pflag"
)

func cmdAudit(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: %s", orList(subcommands("audit")))
	}
	switch args[0] {
	case "verify":
		return auditVerify(args[1:], stdout, stderr)
	case "tail":
		return auditTail(args[1:], stdout, stderr)
	case "key":
		return auditKey(args[1:], stdout, stderr)
	case "prove":
		return auditProve(args[1:], stdout, stderr)
	case "check-proof":
		return auditCheckProof(args[1:], stdin, stdout, stderr)
	case "new-trail":
		return auditNewTrail(args[1:], stdout, stderr)
	case "export":
		return auditExport(args[1:], stdout, stderr)
	}
	return unknownSubcommand("audit", args[0])
}

func auditTail(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("audit tail", "audit tail [-f] [--session ID] [--connector FQN] [--event E] [--decision D] [--run ID] [--since DUR|RFC3339] [--dir DIR]... [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	dirs := fs.StringArray("dir", nil, "read the trail in this directory instead of audit.dir; repeat it for several nodes' trails, merged by time")
	follow := fs.BoolP("follow", "f", false, "keep printing new lines, across rotation")
	var f audit.Filter
	fs.StringVar(&f.Session, "session", "", "only this session")
	fs.StringVar(&f.Connector, "connector", "", "only this connector FQN")
	fs.StringVar(&f.Event, "event", "", `only this event ("approval.*" for a family)`)
	fs.StringVar(&f.Decision, "decision", "", "allow, allow_after_approval, passthrough or deny")
	fs.StringVar(&f.Run, "run", "", "only this action run's lines (run_id), as a tree: each line indented under its parent_audit_id")
	since := fs.String("since", "", "only events after this: a duration ago (15m) or an RFC 3339 time")
	asJSON := fs.Bool("json", false, "print the JSON lines as recorded (a character a terminal would act on as its \\u escape)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkTailFilter(f); err != nil {
		return err
	}
	trails, ctx, stop, err := trailToRead(fs, *cfgFile, *since, *dirs, &f)
	if err != nil {
		return err
	}
	defer stop()
	const row = "%-12s  %-26s  %-20s  %-23s  %-22s  %-6s  %s\n"
	if !*asJSON {
		fmt.Fprintf(stdout, row, "TIME", "EVENT", "DECISION", "REASON", "SESSION", "STATUS", "REQUEST / DETAILS")
	}
	var tree audit.RunTree
	// A line is read back from a file anything may have written to: every
	// string in it is shown escaped (printable), whatever wrote it.
	err = tailMany(ctx, trails, *follow, f, func(line []byte, ev *audit.Event) error {
		if *asJSON {
			_, err := fmt.Fprintf(stdout, "%s\n", printable.JSON(line))
			return err
		}
		name := string(ev.Name)
		if f.Run != "" {
			name = strings.Repeat("  ", min(tree.Depth(ev), 8)) + name
		}
		if len(trails) > 1 && ev.Node != "" {
			name = ev.Node + " " + name
		}
		_, err := fmt.Fprintf(stdout, row, ev.Time.Local().Format("15:04:05.000"), printable.Line(name),
			printable.Line(dash(ev.Decision)), printable.Line(dash(ev.Reason)), printable.Line(dash(ev.Session)),
			statusOf(ev), printable.Line(requestOf(ev)))
		return err
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// trailToRead resolves what tail and export read: --since into f, the
// trails (the --dir directories, else the configured audit.dir; each must
// exist), and a context ended by Ctrl-C or SIGTERM (stop releases it).
func trailToRead(fs *pflag.FlagSet, cfgFile, since string, dirs []string, f *audit.Filter) ([]string, context.Context, func(), error) {
	if since != "" {
		t, err := parseSince(since)
		if err != nil {
			return nil, nil, nil, usagef("--since %q: %v", since, err)
		}
		f.Since = t
	}
	cfg, err := loadClientConfig(fs, cfgFile)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(dirs) == 0 {
		dirs = []string{cfg.Audit.Dir}
		if err := auditDirExists(cfg.Audit.Dir); err != nil {
			return nil, nil, nil, err
		}
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			return nil, nil, nil, fmt.Errorf("--dir %s: %w", d, err)
		}
		abs, _ := filepath.Abs(d)
		if seen[filepath.Clean(abs)] {
			return nil, nil, nil, usagef("--dir %s is given twice: each trail once", d)
		}
		seen[filepath.Clean(abs)] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return dirs, ctx, stop, nil
}

func parseSince(s string) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Time{}, fmt.Errorf("a duration needs a unit: write e.g. %sm or %sh", s, s)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, errors.New("neither a duration (15m, 2h) nor an RFC 3339 time (2026-11-23T10:00:00Z)")
	}
	return t, nil
}

// checkTailFilter refuses an --event or --decision no line can have, so a
// typo is not an empty, successful search.
func checkTailFilter(f audit.Filter) error {
	decisions := []string{"allow", "allow_after_approval", "passthrough", "deny"}
	if f.Decision != "" && !slices.Contains(decisions, f.Decision) {
		return usagef("--decision %q is not a decision%s; use %s", f.Decision, didYouMean(f.Decision, decisions), strings.Join(decisions, ", "))
	}
	if f.Event == "" {
		return nil
	}
	var names []string
	for _, n := range audit.EventNames() {
		names = append(names, string(n))
		if string(n) == f.Event || strings.HasSuffix(f.Event, ".*") && strings.HasPrefix(string(n), strings.TrimSuffix(f.Event, "*")) {
			return nil
		}
	}
	return usagef("--event %q names no audit event%s; `docs/audit.md` lists them (a family: \"approval.*\")", f.Event, didYouMean(f.Event, names))
}

// didYouMean is "; did you mean X?" for the candidate closest to s, or "".
func didYouMean(s string, candidates []string) string {
	if near, ok := policy.Closest(s, candidates); ok {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	return ""
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func requestOf(ev *audit.Event) string {
	if ev.Name == audit.EventCheckpoint { // its note and range are for machines
		d := ev.Details
		return fmt.Sprintf("size=%s root=%s origin=%s", d["size"], d["root"], d["origin"])
	}
	if ev.Host == "" {
		keys := make([]string, 0, len(ev.Details))
		for k := range ev.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			if v := ev.Details[k]; v != "" {
				parts = append(parts, k+"="+v)
			}
		}
		return dash(strings.Join(parts, " "))
	}
	req := fmt.Sprintf("%s %s:%d%s", dash(ev.Method), ev.Host, ev.Port, ev.Path)
	if ev.Name == audit.EventEgressBlocked {
		req = blockedOf(ev)
	}
	if sni := ev.Details["sni"]; sni != "" { // the server a refused ClientHello asked for
		req += " sni=" + sni
	}
	return req + modelCallOf(ev)
}

// modelCallOf is what a model call's row adds: the model asked for, the
// tokens the provider reported, whether it streamed, its time to first
// byte and how a WebSocket turn ended; "" for any other line.
func modelCallOf(ev *audit.Event) string {
	if ev.Model == "" && ev.InputTokens == 0 && ev.OutputTokens == 0 && ev.CachedTokens == 0 {
		return ""
	}
	s := " model=" + dash(ev.Model)
	if ev.InputTokens != 0 || ev.OutputTokens != 0 || ev.CachedTokens != 0 {
		s += fmt.Sprintf(" tokens in=%d out=%d cached=%d", ev.InputTokens, ev.OutputTokens, ev.CachedTokens)
	}
	if ev.Streamed {
		s += " streamed"
	}
	if ev.TTFBMS > 0 {
		s += " ttfb=" + strconv.FormatFloat(ev.TTFBMS, 'f', -1, 64) + "ms"
	}
	if end := ev.Details["end"]; end != "" {
		s += " end=" + end
	}
	return s
}

// blockedOf is what the fence refused: protocol, destination and source,
// and whether that source was forged (the packet then got no answer).
func blockedOf(ev *audit.Event) string {
	dst := ev.Host
	if ev.Port != 0 {
		dst = net.JoinHostPort(ev.Host, strconv.Itoa(ev.Port))
	}
	s := fmt.Sprintf("%s %s from %s", dash(ev.Details["protocol"]), dst, dash(ev.Client))
	if ev.Details["foreign_source"] == "true" {
		s += " (forged source, dropped)"
	}
	return s
}

func statusOf(ev *audit.Event) string {
	if ev.Status == 0 {
		return "-"
	}
	return fmt.Sprint(ev.Status)
}
