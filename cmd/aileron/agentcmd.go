package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/agents"
	"github.com/aileronhq/aileron/providers"
	"github.com/aileronhq/aileron/sessions"
)

// agentArgs splits launch's positional arguments: a known agent's name
// first, not after -- (aileron launch claude [-- ARGS]), starts that agent
// with ARGS appended; anything else is a command launched as it is
// (aileron launch -- claude runs claude with nothing added).
func agentArgs(positional []string, dashAt int) (agents.Agent, []string, bool, error) {
	if len(positional) == 0 || dashAt == 0 {
		return agents.Agent{}, nil, false, nil
	}
	a, ok := agents.Lookup(positional[0])
	if !ok {
		return agents.Agent{}, nil, false, nil
	}
	if dashAt > 1 {
		return agents.Agent{}, nil, false, usagef("put the agent's own arguments after --, e.g. aileron launch %s -- -p \"hello\"", a.Name)
	}
	return a, positional[1:], true, nil
}

// agentLaunch is one prepared start of a known agent: its argv and the
// environment the session's variables go on top of. cleanup removes what
// Prepare wrote.
type agentLaunch struct {
	argv    []string
	environ []string
	cleanup func()
}

// prepareAgent checks that the session can serve the agent's providers,
// then writes its registration of `aileron mcp` into a new private
// directory (owned by uid:gid when chown is set, for a fenced command that
// runs as another user) and returns how to start it.
func prepareAgent(a agents.Agent, info sessions.Info, userArgs []string, chown *[2]int) (agentLaunch, error) {
	if err := sessionServes(info, a); err != nil {
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
	return agentLaunch{argv: argv, environ: a.Environ(os.Environ(), plan), cleanup: cleanup}, nil
}

// sessionServes refuses a session whose connector scope leaves out a
// provider the agent calls.
func sessionServes(info sessions.Info, a agents.Agent) error {
	if len(info.Connectors) == 0 {
		return nil // every installed connector
	}
	for _, p := range a.Providers {
		pr, ok := providers.Lookup(p.Name)
		if ok && !slices.Contains(info.Connectors, pr.FQN) {
			return fmt.Errorf("%s calls the %s provider, which session %s may not use (its connectors: %s); add --connector %s to the session, or launch with --new",
				a.Title, p.Name, info.ID, strings.Join(info.Connectors, ", "), pr.FQN)
		}
	}
	return nil
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
