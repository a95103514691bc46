package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/agents"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/sandbox"
	"github.com/aileronhq/aileron/sandboxapi"
	"github.com/aileronhq/aileron/sessions"
	"github.com/rs/zerolog"
)

// exitCodeError carries a launched command's exit status out of run.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// sessionRender writes tools.txt and the command shims of a session.
func sessionRender(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("session render", "session render ID --out DIR [--agent CMD] [--reserve NAME]...", stderr)
	_, cfgFile := clientFlags(fs)
	out := fs.String("out", "", "directory to write tools.txt and bin/ shims into (required)")
	agent := fs.String("agent", "", "the agent command the sandbox runs (no shim may take its name)")
	reserved := fs.StringArray("reserve", nil, "another command name no shim may take (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return usagef("want one session ID and --out DIR")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	r, err := renderSession(context.Background(), newClient(cfg), fs.Arg(0), *agent, *reserved)
	if err != nil {
		return err
	}
	if err := r.WriteDir(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s and %d shims in %s\n", filepath.Join(*out, sandbox.ToolsFile), len(r.Shims), filepath.Join(*out, sandbox.BinDir))
	return nil
}

// renderSession fetches a session's specs and actions from the admin API and
// renders them; each conflict is reported (sandbox.Render joins them).
func renderSession(ctx context.Context, c *admin.Client, id, agent string, reserved []string) (*sandbox.Rendering, error) {
	st, err := c.SessionTools(ctx, id)
	if err != nil {
		return nil, err
	}
	in := sandbox.RenderInput{Actions: st.Actions, AgentCommand: agent, Reserved: reserved}
	for i, raw := range st.Specs {
		spec, err := policy.ParseSpec(fmt.Sprintf("spec %d of session %s", i+1, id), raw)
		if err != nil {
			return nil, err
		}
		in.Specs = append(in.Specs, spec)
	}
	return sandbox.Render(in)
}

// cmdLaunch runs a command inside a session's environment, or a known agent
// (aileron launch claude) with Aileron's MCP server registered.
func cmdLaunch(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("launch", "launch [--session ID | --new [--name N] [--connector FQN]... [--unknown MODE] "+limitsSynopsis+"] [--tools] -- CMD ARGS...\n"+
		"       aileron launch claude|codex|gemini [--session ID | --new ...] [-- AGENT ARGS...]\n       aileron launch --list", stderr)
	_, cfgFile := clientFlags(fs)
	sessID := fs.String("session", "", "run in this existing session")
	fresh := fs.Bool("new", false, "create a session for the command and delete it when the command ends (the default without --session)")
	name := fs.String("name", "launch", "label of the session --new creates")
	conns := fs.StringArray("connector", nil, "connector FQN the new session may use (repeatable; default all)")
	unknown := fs.String("unknown", "", newSessionUnknownHelp)
	limits := limitFlags(fs)
	tools := fs.Bool("tools", false, "render the session's tools.txt and shims into a temporary directory and put its bin/ first in PATH")
	list := fs.Bool("list", false, "list the known agents, whether each is installed (on PATH) and whether the providers it calls are ready")
	if err := fs.Parse(args); err != nil {
		return agentArgsHint(err, args)
	}
	agent, agentUserArgs, isAgent, err := agentArgs(fs.Args(), fs.ArgsLenAtDash())
	switch {
	case err != nil:
		return err
	case *sessID != "" && *fresh:
		return usagef("--session and --new exclude each other")
	case *list && fs.NArg() > 0:
		return usagef("--list takes no command")
	case fs.NArg() == 0 && !*list:
		return usagef("name an agent (%s) or the command after --, e.g. aileron launch claude, aileron launch -- curl https://api.example.com/", agents.Names())
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
	ctx := context.Background() // Launch relays SIGINT/SIGTERM/SIGHUP/SIGQUIT to the command itself
	c := newClient(cfg)
	if *list {
		return cmdLaunchList(ctx, c, stdout)
	}
	if isAgent {
		if err := agentReady(ctx, c, agent); err != nil {
			return err
		}
	}
	info, cleanup, err := launchSession(ctx, c, *sessID, sessions.CreateRequest{Name: *name, Connectors: *conns, Limits: l, Unknown: *unknown}, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if isAgent {
		if err := sessionServes(info, agent, *sessID == ""); err != nil {
			return err
		}
	}
	opts := sandbox.LaunchOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	argv := fs.Args()
	if isAgent {
		al, err := prepareAgent(agent, info, agentUserArgs, nil)
		if err != nil {
			return err
		}
		defer al.cleanup()
		argv, opts.Environ, info = al.argv, al.environ, al.info
	}
	if *tools {
		bin, remove, err := renderToolsDir(ctx, c, info.ID, argv[0])
		if err != nil {
			return err
		}
		defer remove()
		opts.PathPrefix = []string{bin}
	}
	code, err := sandbox.Launch(ctx, info, nil, argv, opts)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCodeError{code}
	}
	return nil
}

// renderToolsDir renders session id's tools.txt and shims (for the command
// cmd) into a temporary directory and returns its bin directory and what
// removes it.
func renderToolsDir(ctx context.Context, c *admin.Client, id, cmd string) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "aileron-tools-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	r, err := renderSession(ctx, c, id, filepath.Base(cmd), nil)
	if err == nil {
		err = r.WriteDir(dir)
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return filepath.Join(dir, sandbox.BinDir), remove, nil
}

// launchSession returns the session to launch in: id's, or a new one
// (req) that cleanup deletes.
func launchSession(ctx context.Context, c *admin.Client, id string, req sessions.CreateRequest, stderr io.Writer) (sessions.Info, func(), error) {
	if id != "" {
		info, err := c.GetSession(ctx, id)
		return info, func() {}, err
	}
	info, err := c.CreateSession(ctx, req)
	if err != nil {
		return info, func() {}, err
	}
	cleanup := func() {
		_ = c.DeleteSession(context.Background(), info.ID)
		sayProposals(stderr, info)
	}
	full, err := c.GetSession(ctx, info.ID) // with placeholders
	if err != nil {
		cleanup()
		return info, func() {}, err
	}
	return full, cleanup, nil
}

// sayProposals tells the owner, once launch's own session has ended, where
// the proposals of a session in learn or ask mode are: the session is gone,
// and its id is the one thing needed to read and accept them.
func sayProposals(stderr io.Writer, info sessions.Info) {
	if info.Unknown != dataplane.UnknownLearn && info.Unknown != dataplane.UnknownAsk {
		return
	}
	fmt.Fprintf(stderr, "aileron: session %s (%s) ended; what it asked for is kept as proposals:\n"+
		"  aileron proposals list --session %s\n"+
		"  aileron proposals accept --session %s --connector NAME   (after rejecting what it should not do)\n",
		info.ID, info.Unknown, info.ID, info.ID)
}

// cmdMCP serves the session's actions as MCP tools on stdin/stdout. It runs
// inside the sandbox and reaches the daemon through the proxy
// (AILERON_API_URL, HTTPS_PROXY and SSL_CERT_FILE from the session env).
func cmdMCP(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", "mcp [--api-url URL]   (stdio; run by the agent inside the sandbox)", stderr)
	apiURL := fs.String("api-url", "", "the sandbox API (default $AILERON_API_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	getenv := os.Getenv
	if *apiURL != "" {
		getenv = func(k string) string {
			if k == "AILERON_API_URL" {
				return *apiURL
			}
			return os.Getenv(k)
		}
	}
	b, err := sandboxapi.HTTPBackendFromEnv(getenv)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(stderr).With().Timestamp().Str("component", "aileron mcp").Logger()
	srv := &sandboxapi.MCPServer{Backend: b, Name: "aileron", Version: readVersion().String(), Log: &log}
	err = srv.ServeStdio(ctx, stdin, stdout)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
