package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/sandbox"
	"github.com/aileronhq/aileron/sessions"
)

func cmdSession(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: create, env, list, update, delete or render")
	}
	switch args[0] {
	case "create":
		return sessionCreate(args[1:], stdout, stderr)
	case "env":
		return sessionEnv(args[1:], stdout, stderr)
	case "list":
		return sessionList(args[1:], stdout, stderr)
	case "update":
		return sessionUpdate(args[1:], stdout, stderr)
	case "delete":
		return sessionDelete(args[1:], stdout, stderr)
	case "render":
		return sessionRender(args[1:], stdout, stderr)
	}
	return unknownSubcommand("session", args[0])
}

func sessionCreate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session create", "session create [--name N] [--ttl D] [--connector FQN]... [--unknown MODE] "+limitsSynopsis+" [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	name := fs.String("name", "", "a label for the session")
	ttl := fs.Duration("ttl", 0, "lifetime, e.g. 8h (default: config sessions.default_ttl)")
	conns := fs.StringArray("connector", nil, "connector FQN the session may use (repeatable; default all)")
	limits := limitFlags(fs)
	unknown := fs.String("unknown", "deny", unknownHelp)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if _, err := sessions.CheckUnknown(*unknown); err != nil || *unknown == "" {
		return usagef("--unknown %q: want deny, ask or learn", *unknown)
	}
	l, err := limits()
	if err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	info, err := newClient(cfg).CreateSession(context.Background(), sessions.CreateRequest{Name: *name, TTL: *ttl, Connectors: *conns, Limits: l, Unknown: *unknown})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, info)
	}
	shown := "unknown:     " + info.Unknown + "\n"
	if info.Limits != nil {
		shown = "limits:      " + admin.LimitsLine(admin.SessionView{Info: info}) + "\n"
	}
	fmt.Fprintf(stdout, "session %s created, expires %s\n\nproxy_url:   %s\nca_cert:     %s\nca_bundle:   %s\n%s\nIn the sandbox: eval \"$(aileron session env %s)\"\n",
		info.ID, info.ExpiresAt.Format(time.RFC3339), info.ProxyURL, info.CACertPath, info.CABundlePath, shown, info.ID)
	return nil
}

func sessionEnv(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session env", "session env ID", stderr)
	_, cfgFile := clientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one session ID")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	info, err := newClient(cfg).GetSession(context.Background(), fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, sandbox.RenderShell(sandbox.Env(info, sandbox.DefaultAPIURL)))
	return nil
}

func sessionList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session list", "session list [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	list, err := newClient(cfg).ListSessions(context.Background())
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tEXPIRES\tCONNECTORS\tUNKNOWN\tLIMITS (USED/MAX)")
	for _, s := range list {
		conns := "all"
		if s.Connectors != nil {
			conns = strings.Join(s.Connectors, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, printable.Line(s.Name), s.ExpiresAt.Format(time.RFC3339), printable.Line(conns),
			printable.Line(s.Unknown), admin.LimitsLine(s))
	}
	return tw.Flush()
}

func sessionDelete(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session delete", "session delete ID", stderr)
	_, cfgFile := clientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one session ID")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	if err := newClient(cfg).DeleteSession(context.Background(), fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "session %s deleted\n", fs.Arg(0))
	return nil
}

// unknownHelp describes --unknown.
const unknownHelp = "what to do with a request no operation matches: deny (refuse it), ask (hold it for a human, who sends it once, allows it as a rule or denies it) " +
	"or learn (refuse it and record it as a proposal)"

func sessionUpdate(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session update", "session update ID --unknown MODE [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	unknown := fs.String("unknown", "", unknownHelp+"; required")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one session ID")
	}
	if *unknown == "" {
		return usagef("want --unknown deny, --unknown ask or --unknown learn")
	}
	if _, err := sessions.CheckUnknown(*unknown); err != nil {
		return usagef("--unknown %q: want deny, ask or learn", *unknown)
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	info, err := newClient(cfg).UpdateSession(context.Background(), fs.Arg(0), *unknown)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "session %s: unknown requests: %s (from its next request)\n", info.ID, info.Unknown)
	return nil
}
