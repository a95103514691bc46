package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/aileronhq/aileron/agents"
	"github.com/aileronhq/aileron/sandbox"
	"github.com/aileronhq/aileron/sessions"
)

// cmdSandbox runs commands fenced (sandbox run) and lists fenced sandboxes.
func cmdSandbox(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	switch args[0] {
	case "run":
		return cmdSandboxRun(args[1:], stdin, stdout, stderr)
	case "attach":
		return cmdSandboxAttach(args[1:], stdout, stderr)
	case "list":
		return cmdSandboxList(args[1:], stdout, stderr)
	case "close":
		return cmdSandboxClose(args[1:], stderr)
	}
	return unknownSubcommand("sandbox", args[0])
}

// cmdSandboxRun runs a command in a fenced sandbox: new network and mount
// namespaces whose only link leads to the daemon, which answers its DNS and
// takes its connections transparently.
func cmdSandboxRun(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox run", "sandbox run [--session ID | --new [--name N] [--connector FQN]... [--unknown MODE] "+limitsSynopsis+"] [--user U] -- CMD ARGS...\n"+
		"       aileron sandbox run --agent claude|codex|gemini [--session ID | --new ...] [--user U] [-- AGENT ARGS...]", stderr)
	_, cfgFile := clientFlags(fs)
	sessID := fs.String("session", "", "run in this existing session")
	fresh := fs.Bool("new", false, "create a session for the command and delete it when the command ends (the default without --session)")
	name := fs.String("name", "sandbox", "label of the session --new creates")
	conns := fs.StringArray("connector", nil, "connector FQN the new session may use (repeatable; default all)")
	unknown := fs.String("unknown", "", newSessionUnknownHelp)
	limits := limitFlags(fs)
	agentName := fs.String("agent", "", "run this known agent ("+agents.Names()+") with Aileron's MCP server registered, its arguments after --")
	userSpec := fs.String("user", "", "run the command as this user: NAME, UID or UID:GID (default: the user who ran sudo, else the caller when not root, else nobody; root only when named)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sessID != "" && *fresh {
		return usagef("--session and --new exclude each other")
	}
	agent, known := agents.Lookup(*agentName)
	switch {
	case *agentName != "" && !known:
		return usagef("--agent %q is not a known agent (%s); to run another command put it after --", *agentName, agents.Names())
	case fs.NArg() == 0 && !known:
		return usagef("name the command after --, e.g. aileron sandbox run -- curl https://api.example.com/")
	}
	l, err := sessionLimits(limits, *sessID)
	if err != nil {
		return err
	}
	if err := checkNewSessionUnknown(*unknown, *sessID); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	who, err := sandbox.ResolveUser(*userSpec, os.Environ())
	if err != nil {
		return err
	}
	ctx := context.Background()
	c := newClient(cfg)
	if known {
		if err := agentReady(ctx, c, agent); err != nil {
			return err
		}
	}
	info, cleanup, err := launchSession(ctx, c, *sessID, sessions.CreateRequest{Name: *name, Connectors: *conns, Limits: l, Unknown: *unknown}, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if known {
		if err := sessionServes(info, agent, *sessID == ""); err != nil {
			return err
		}
	}
	argv, environ := fs.Args(), []string(nil)
	if known {
		al, err := prepareAgent(agent, info, fs.Args(), &[2]int{int(who.UID), int(who.GID)})
		if err != nil {
			return err
		}
		defer al.cleanup()
		argv, environ, info = al.argv, al.environ, al.info
	}
	// The daemon that fences the namespace says what the command must not
	// see: its own home, audit directory and keys, not this launcher's idea
	// of them (its --config or --home may differ).
	fenceFn := func(ctx context.Context, pid int) (sandbox.Fence, error) {
		sb, err := c.OpenSandbox(ctx, info.ID, pid)
		if err != nil {
			return sandbox.Fence{}, err
		}
		return sandbox.Fence{DNS: sb.DNS, Hide: sb.Hide, Remove: func() { _ = c.CloseSandbox(context.Background(), sb.ID) }}, nil
	}
	code, err := sandbox.RunFenced(ctx, info, argv, sandbox.FencedOptions{Fence: fenceFn, User: who, Environ: environ,
		Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCodeError{code}
	}
	return nil
}

func cmdSandboxList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox list", "sandbox list [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	list, err := newClient(cfg).ListSandboxes(context.Background())
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSESSION\tPID\tADDRESS\tDNS\tLINK")
	for _, s := range list {
		addr, pid := s.Address, strconv.Itoa(s.PID)
		if s.Source != "" { // a gateway
			addr, pid = s.Source, "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Session, pid, addr, s.DNS, s.Link)
	}
	return tw.Flush()
}

// cmdSandboxAttach makes the daemon the gateway of another container's (or
// machine's) network: its clients in --source, whose default route and
// DNS server are the daemon's --listen address, get the session's policy
// DNS and transparent listeners and nothing else.
func cmdSandboxAttach(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sandbox attach", "sandbox attach --session ID --source CIDR --listen ADDR [--json]", stderr)
	_, cfgFile := clientFlags(fs)
	sessID := fs.String("session", "", "the session the clients act in (required)")
	source := fs.String("source", "", "the clients' address range, e.g. 172.30.0.0/24 (required; a range holding IPv6 link-local addresses, fe80::/10, is refused)")
	listen := fs.String("listen", "", "the daemon's address on the clients' network: their gateway and DNS server (required; its interface is given over to this gateway, one per interface)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sessID == "" || *source == "" || *listen == "" || fs.NArg() != 0 {
		return usagef("want --session ID --source CIDR --listen ADDR, e.g. --session s_... --source 172.30.0.0/24 --listen 172.30.0.2")
	}
	if _, err := netip.ParsePrefix(*source); err != nil {
		return usagef("--source %q is not a CIDR; write e.g. 172.30.0.0/24", *source)
	}
	if _, err := netip.ParseAddr(*listen); err != nil {
		return usagef("--listen %q is not an IP address; write the daemon's address on the clients' network, e.g. 172.30.0.2", *listen)
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	info, err := newClient(cfg).AttachGateway(context.Background(), *sessID, *source, *listen)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "%s: the daemon is the gateway of %s on %s (DNS %s, transparent 443 and 80); aileron sandbox close %s ends it\n",
		info.ID, info.Source, *listen, net.JoinHostPort(info.DNS, "53"), info.ID)
	return nil
}

func cmdSandboxClose(args []string, stderr io.Writer) error {
	fs := newFlags("sandbox close", "sandbox close ID", stderr)
	_, cfgFile := clientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("name one sandbox or gateway: aileron sandbox close ID (see aileron sandbox list)")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	return newClient(cfg).CloseSandbox(context.Background(), fs.Arg(0))
}
