package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/sandbox"
	"github.com/spf13/pflag"
)

const usage = `aileron: the egress appliance for agent sandboxes.

Usage:
  aileron daemon [--config FILE] [--listen ADDR] [--log-level L]   run the proxy and control plane
  aileron session create [--name N] [--ttl D] [--connector FQN]... [--unknown deny|ask|learn] [LIMITS] [--json]
  aileron session env ID                                 shell exports for a sandbox
  aileron session list [--json] | delete ID
  aileron session update ID --unknown deny|ask|learn         what the session does with requests no operation matches
  aileron session render ID --out DIR [--agent CMD] [--reserve NAME]...   tools.txt and one shim per tool
  aileron connector install [--yes | --lock FILE] [--expect sha256:HEX] [--allow-unpinned] PATH|ARCHIVE|URL|FQN@VERSION|-   a spec file or package directory, a .tar.gz, an https URL of one, a release in store.sources, or - for stdin; shows what it asks, and asks
  aileron connector list [--json] | verify | remove FQN@VERSION
  aileron connector approve [--yes] FQN@VERSION | lock     serve a quarantined upgrade | print the lock of consents
  aileron connector statement DIR|ARCHIVE                the statement a publisher signs for a package directory or archive
  aileron trust add AUTHORITY --signers FILE             the keys that may sign for github://acme (ssh allowed_signers)
  aileron trust list [--json] | remove AUTHORITY
  aileron credential set NAME --kind KIND [--username U] [--service S]   (secret on stdin or --from-file)
  aileron credential login NAME --connector FQN [--no-browser] [--timeout D]   OAuth in a browser with the connector's app; stores and binds
  aileron credential bind FQN --credential NAME [--header H] [--format F] [--query Q] [--env VAR[,VAR…]]
  aileron credential list [--json] | delete NAME | unbind FQN
  aileron provider add anthropic [--subscription] | openai | gemini [--key-file F]   (key on stdin) install, store, bind
  aileron provider add openai-compatible --name NAME --host HOST[:PORT] [--env VAR]... [--key-file F]
  aileron provider list [--json]                         the model providers: installed, bound, their variables
  aileron provider remove NAME                           uninstall and unbind a provider (its key stays in the vault)
  aileron approvals list [--state S] [--session ID] [--json] | show ID [--raw | --json] | watch
  aileron approvals approve ID [--as-rule [RULE EDITS]] | deny ID --reason R | web-token | test-webhooks
  aileron proposals list [--session ID] [--json] | show ID [--json] | reject ID --reason R   (learn and ask modes)
  aileron proposals accept ID [--method M] [--template T] [--approval required|none] [--connector NAME] [--all-sessions]
  aileron proposals accept --session ID [--connector NAME] [--all-sessions]   allow as a rule, in local://learned/NAME
  aileron actions cancel RUN                             cancel an action run (its run_id, or the approval_id it waits on)
  aileron audit tail [-f] [--session ID] [--connector FQN] [--event E] [--decision D] [--run ID] [--since 15m] [--dir DIR]... [--json]
  aileron audit verify [FILES…] [--dir DIR --node N] [--key VKEY] [--witness URL --witness-key KEY]   lines, chain, tree, checkpoints
  aileron audit key | prove SEQ | check-proof FILE --key VKEY   the trail's public key; a line's inclusion proof, checked offline
  aileron audit export [--format json|ocsf] [--from SEQ] [--since 15m] [--dir DIR]... [-f]   the trail for other tools; several --dir: nodes merged by time
  aileron audit new-trail --reason R                      (daemon stopped) start a new trail on purpose, recording the break
  aileron launch [--session ID | --new [--name N] [--connector FQN]... [--unknown MODE] [LIMITS]] [--tools] -- CMD ARGS…
                                                         run CMD with a session's proxy env and CA bundle
  aileron launch claude|codex|gemini [--session ID | --new …] [-- AGENT ARGS…]
                                                         the agent with aileron mcp registered, quiet, keyless
  aileron launch --list                                  the known agents, installed or not, and their providers
  aileron sandbox run [--session ID | --new [--name N] [--connector FQN]... [--unknown MODE] [LIMITS]] [--user U] -- CMD ARGS…
                                                         run CMD fenced: no route but Aileron (Linux, root)
  aileron sandbox run --agent claude|codex|gemini [--session ID | --new …] [-- AGENT ARGS…]
                                                         the same agent, fenced
  aileron sandbox attach --session ID --source CIDR --listen ADDR [--json]
                                                         be the gateway of another container's network
  aileron sandbox list [--json] | close ID
  aileron mcp [--api-url URL]                            MCP server on stdio, inside the sandbox
  aileron config print [--config FILE]                   the running daemon's configuration, else the effective one
  aileron config defaults                                the embedded defaults, as YAML
  aileron witness --log VKEY... [--listen ADDR]          witness audit trails: cosign only consistent checkpoints
  aileron fleet status [--config FILE] [--json]          the nodes of a fleet (state.backend postgres) and whether they are alive
  aileron health [--ready] [--timeout D]                 exit 0 if the daemon answers (a HEALTHCHECK); --ready: and can decide
  aileron version [--json]                               the build: module version, commit, Go release
  aileron completion bash|zsh|fish                       a shell completion script (source <(aileron completion bash))
  aileron help [COMMAND]

Every command but mcp and version takes --home DIR (default $AILERON_HOME, else ~/.aileron).
Run "aileron COMMAND --help" for a command's flags.
LIMITS of a new session: --models LIST (names or globs) --max-tokens N --max-requests N --max-bytes N
  [--budget-window D] (default: the session's life); see docs/agents.md, Budgets.
`

func main() {
	if len(os.Args) > 0 && os.Args[0] == sandbox.InitArg0 { // aileron sandbox run's helper, in the new namespaces
		code, err := sandbox.FencedInit()
		if err != nil {
			fmt.Fprintf(os.Stderr, "aileron sandbox run: %v\n", err)
			os.Exit(125)
		}
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit code: 0 success,
// 1 failure, 2 usage error.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmds := commands()
	switch {
	case args[0] == "--version" || args[0] == "-v":
		args[0] = "version"
	case len(args) == 1 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help"):
		fmt.Fprint(stdout, usage)
		return 0
	case len(args) == 1 && groupUsage(args[0]) != "":
		fmt.Fprintf(stderr, "aileron %s: want a subcommand\n\n%s", args[0], groupUsage(args[0]))
		return 2
	case args[0] == "help" && (args[1] == "help" || args[1] == "-h" || args[1] == "--help"):
		fmt.Fprint(stdout, usage)
		return 0
	case args[0] == "help" && groupUsage(args[1]) != "":
		fmt.Fprint(stdout, groupUsage(args[1]))
		return 0
	case args[0] == "help":
		args = []string{args[1], "--help"}
	case len(args) > 1 && (args[1] == "help" || args[1] == "-h" || args[1] == "--help") && groupUsage(args[0]) != "":
		fmt.Fprint(stdout, groupUsage(args[0]))
		return 0
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		names := commandNames()
		slices.Sort(names)
		if near, ok := policy.Closest(args[0], names); ok {
			fmt.Fprintf(stderr, "aileron: unknown command %q: did you mean \"aileron %s\"? (aileron help lists the commands)\n", args[0], near)
			return 2
		}
		fmt.Fprintf(stderr, "aileron: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	err := cmd(args[1:], stdin, stdout, stderr)
	var ue usageError
	var ec exitCodeError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.code
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "aileron %s: %s\n", args[0], printable.Text(err.Error()))
		return 2
	default: // an error may quote what a sandbox sent, or a line of a file
		fmt.Fprintf(stderr, "aileron %s: %s\n", args[0], printable.Text(err.Error()))
		if errors.Is(err, admin.ErrDaemonUnreachable) && os.Getenv("SUDO_UID") != "" {
			fmt.Fprintln(stderr, "hint: sudo resets HOME and drops AILERON_HOME; pass --home DIR, the daemon's home")
		}
		return 1
	}
}

// commands are the commands run dispatches, by name.
func commands() map[string]func([]string, io.Reader, io.Writer, io.Writer) error {
	return map[string]func([]string, io.Reader, io.Writer, io.Writer) error{
		"daemon":     cmdDaemon,
		"session":    cmdSession,
		"connector":  cmdConnector,
		"config":     cmdConfig,
		"credential": cmdCredential,
		"trust":      cmdTrust,
		"provider":   cmdProvider,
		"audit":      cmdAudit,
		"approvals":  cmdApprovals,
		"proposals":  cmdProposals,
		"actions":    cmdActions,
		"launch":     cmdLaunch,
		"sandbox":    cmdSandbox,
		"mcp":        cmdMCP,
		"version":    cmdVersion,
		"health":     cmdHealth,
		"completion": cmdCompletion,
		"witness":    cmdWitness,
		"fleet":      cmdFleet,
		"__complete": cmdComplete, // the completion scripts' question: candidates for the last word
	}
}

// usageError is a command line that cannot be run as written.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// newFlags returns a flag set that prints its usage to stderr on --help.
func newFlags(name, synopsis string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: aileron %s\n", synopsis)
		if fs.HasFlags() {
			fmt.Fprint(stderr, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// groupUsage is the usage of a command with subcommands (session,
// connector, …): its lines of the general usage; "" for any other word.
func groupUsage(cmd string) string {
	if subcommands(cmd) == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("Usage:\n")
	for line := range strings.SplitSeq(usage, "\n") {
		if strings.HasPrefix(line, "  aileron "+cmd+" ") {
			b.WriteString(line + "\n")
		}
	}
	fmt.Fprintf(&b, "\nRun \"aileron %s SUBCOMMAND --help\" for a subcommand's flags.\n", cmd)
	return b.String()
}
