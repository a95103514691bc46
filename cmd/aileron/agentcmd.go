package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/agents"
	"github.com/aileronhq/aileron/providers"
	"github.com/aileronhq/aileron/sessions"
)

// agentArgs splits launch's positional arguments: a known agent's name
// first, not after -- (aileron launch claude [-- ARGS]), starts that agent
// with ARGS appended; a command after -- is launched as it is (aileron
// launch -- claude runs claude with nothing added). Another word before
// -- is refused: it is a mistyped agent more often than a command.
func agentArgs(positional []string, dashAt int) (agents.Agent, []string, bool, error) {
	if len(positional) == 0 || dashAt == 0 {
		return agents.Agent{}, nil, false, nil
	}
	a, ok := agents.Lookup(positional[0])
	if !ok {
		return agents.Agent{}, nil, false, usagef("unknown agent %s; known: %s; to run a command, put it after --, e.g. aileron launch -- %s",
			positional[0], agents.Names(), strings.Join(positional, " "))
	}
	if dashAt > 1 {
		return agents.Agent{}, nil, false, usagef("put the agent's own arguments after --, e.g. aileron launch %s -- -p \"hello\"", a.Name)
	}
	return a, positional[1:], true, nil
}

// agentLaunch is one prepared start of a known agent: its argv, the
// environment the session's variables go on top of, and the session as the
// agent gets it (without the placeholders the plan withholds). cleanup
// removes what Prepare wrote.
type agentLaunch struct {
	argv    []string
	environ []string
	info    sessions.Info
	cleanup func()
}

// prepareAgent checks that the session can serve the agent's providers,
// then writes its registration of `aileron mcp` into a new private
// directory (owned by uid:gid when chown is set, for a fenced command that
// runs as another user) and returns how to start it.
func prepareAgent(a agents.Agent, info sessions.Info, userArgs []string, chown *[2]int) (agentLaunch, error) {
	if err := sessionServes(info, a, false); err != nil {
		return agentLaunch{}, err
	}
	if err := a.Ready(func(name string) bool { _, ok := info.Placeholders[name]; return ok }); err != nil {
		return agentLaunch{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return agentLaunch{}, fmt.Errorf("finding the aileron binary for the agent's MCP server: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return agentLaunch{}, fmt.Errorf("finding the aileron binary for the agent's MCP server: %w", err)
	}
	dir, err := os.MkdirTemp("", "aileron-"+a.Name+"-") // 0700
	if err != nil {
		return agentLaunch{}, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	plan, err := a.Prepare(dir, exe, info.Placeholders)
	if err == nil && chown != nil {
		err = chownTree(dir, chown[0], chown[1])
	}
	if err != nil {
		cleanup()
		return agentLaunch{}, err
	}
	argv := append(append([]string{a.Binary}, plan.Args...), userArgs...)
	info.Placeholders = maps.Clone(info.Placeholders)
	for _, name := range plan.Withhold {
		delete(info.Placeholders, name)
	}
	return agentLaunch{argv: argv, environ: a.Environ(os.Environ(), plan), info: info, cleanup: cleanup}, nil
}

// sessionServes refuses a session whose connector scope leaves out a
// provider the agent calls; fresh says launch created it (from --new and
// --connector), which the advice follows.
func sessionServes(info sessions.Info, a agents.Agent, fresh bool) error {
	if len(info.Connectors) == 0 {
		return nil // every installed connector
	}
	for _, p := range a.Providers {
		pr, ok := providers.Lookup(p.Name)
		if ok && !slices.Contains(info.Connectors, pr.FQN) {
			fix := "add --connector " + pr.FQN + " to the --connector flags"
			if !fresh {
				fix = "use a session that may, or launch with --new (and --connector " + pr.FQN + " if you scope it)"
			}
			return fmt.Errorf("%s calls the %s provider, which session %s may not use (its connectors: %s); %s",
				a.Title, p.Name, info.ID, strings.Join(info.Connectors, ", "), fix)
		}
	}
	return nil
}

// agentOnPath refuses an agent whose binary is not on PATH, saying how to
// install it.
func agentOnPath(a agents.Agent) error {
	if _, err := exec.LookPath(a.Binary); err != nil {
		return fmt.Errorf("%s (%s) is not on PATH; install it with `npm install -g %s`, or put its directory in PATH",
			a.Title, a.Binary, a.Package)
	}
	return nil
}

// agentArgsHint adds to a launch flag error the advice to put a known
// agent's own arguments after --: `aileron launch claude -p hi` means
// `aileron launch claude -- -p hi`.
func agentArgsHint(err error, args []string) error {
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}
	for i, arg := range args {
		if arg == "--" {
			break
		}
		if _, ok := agents.Lookup(arg); ok {
			return usagef("%v; the agent's own arguments go after --, e.g. aileron launch %s -- %s",
				err, strings.Join(args[:i+1], " "), strings.Join(args[i+1:], " "))
		}
	}
	return err
}

// chownTree gives dir and everything in it to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// cmdLaunchList prints the known agents, whether each is on PATH, and the
// providers each calls with whether they are ready (installed and bound).
func cmdLaunchList(ctx context.Context, c *admin.Client, stdout io.Writer) error {
	facts, err := providerFacts(ctx, c)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tNAME\tINSTALLED\tPROVIDERS")
	for _, a := range agents.Known() {
		installed := "no"
		if p, err := exec.LookPath(a.Binary); err == nil {
			installed = p
		}
		var provs []string
		for _, p := range a.Providers {
			state := "ready"
			if err := providerReady(facts, p.Name); err != nil {
				state = "not ready: " + err.Error()
			}
			provs = append(provs, p.Name+" ("+state+")")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Name, a.Title, installed, strings.Join(provs, "; "))
	}
	return tw.Flush()
}

// providersReady returns an error naming what to run first when a provider
// the agent calls is not installed or has no key bound.
func providersReady(ctx context.Context, c *admin.Client, a agents.Agent) error {
	facts, err := providerFacts(ctx, c)
	if err != nil {
		return err
	}
	for _, p := range a.Providers {
		if err := providerReady(facts, p.Name); err != nil {
			return fmt.Errorf("%s calls the %s provider: %w", a.Title, p.Name, err)
		}
	}
	return nil
}

func providerReady(facts providers.Facts, name string) error {
	p, ok := providers.Lookup(name)
	if !ok {
		return fmt.Errorf("no shipped provider is called %q", name)
	}
	return facts.Status(p).Ready()
}

// agentReady checks, before any session is made, that agent is on PATH and
// the providers it calls are installed and bound.
func agentReady(ctx context.Context, c *admin.Client, agent agents.Agent) error {
	if err := agentOnPath(agent); err != nil {
		return err
	}
	return providersReady(ctx, c, agent)
}
