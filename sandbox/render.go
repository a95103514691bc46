package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/policy"
)

// ErrToolConflict is wrapped by every Render error about two things that
// would install the same command in the sandbox, or a command that would
// shadow the agent or a system command.
var ErrToolConflict = errors.New("sandbox tool conflict")

// ErrUnsafeName is wrapped by every Render error about a name or literal
// that cannot be used safely as a file name or in a shim.
var ErrUnsafeName = errors.New("unsafe name for a sandbox command")

// RenderInput is what Render turns into tools.txt and shims.
type RenderInput struct {
	// Specs are the installed, active connector specs of the session (sorted
	// by the caller; Render sorts its output by command name anyway).
	Specs []*policy.Spec
	// Actions are the installed actions of the session.
	Actions []action.Installed
	// AgentCommand is the agent the sandbox runs, e.g. "claude" or a path to
	// it (its base name counts); "" means none.
	AgentCommand string
	// Reserved are further command names no shim may take, on top of
	// DefaultReserved.
	Reserved []string
}

// Rendering is the rendered tools.txt and shims. WriteDir writes it out.
type Rendering struct {
	// ToolsTxt is the tools.txt file: one line per command, sorted by name.
	//
	// A connector tool's line is
	//
	//	TOOL FQN -- Aileron connector operations: OP1, OP2, …
	//
	// (its external operations in spec order: internal ones, which only
	// action steps reach, are left out here, from the shims and from their
	// help, and a tool with only internal ones gets no command) and an
	// action's line is
	//
	//	NAME FQN -- Aileron action: SUMMARY
	//
	// where FQN is the connector the action comes from and SUMMARY is the
	// action's [match] intent, or else the first non-empty line of its
	// description without leading '#', folded onto one line.
	ToolsTxt []byte
	// Shims are the command shims, sorted by Name.
	Shims []Shim
}

// Shim is one generated POSIX sh command.
type Shim struct {
	// Name is the command and file name.
	Name string
	// Source says where it comes from, for messages, e.g.
	// `tool "google" of connector github://acme/google@1.2.3`.
	Source string
	// Script is the sh script (mode 0755 when written).
	Script []byte
}

// DefaultReserved returns the command names no shim may take, whatever
// RenderInput.Reserved says: aileron itself, the shells and the commands the
// shims run, and common tools an agent relies on.
func DefaultReserved() []string {
	return []string{
		"aileron", "sh", "bash", "dash", "zsh", "env", "curl", "mktemp", "rm", "rmdir", "cat", "printf", "echo",
		"test", "sed", "grep", "awk", "tr", "head", "tail", "ls", "cp", "mv", "chmod", "mkdir", "sudo", "ssh",
		"git", "python", "python3", "node", "npm", "npx", "go", "make",
	}
}

// claim is one command name wanted by a spec tool, an action, the agent or
// the reserved list.
type claim struct {
	name   string
	kind   string // "tool", "action", "agent", "reserved"
	fqn    string // connector FQN for tool and action
	source string
}

// Render validates in and renders tools.txt and one shim per spec tool and
// per action. Every failure is reported (errors.Join): conflicts wrap
// ErrToolConflict and name both sides and the fix; names or literals that are
// unsafe as file names or shell text wrap ErrUnsafeName.
func Render(in RenderInput) (*Rendering, error) {
	var errs []error
	taken := map[string]claim{} // lower-cased name → first claim
	for _, name := range append(DefaultReserved(), in.Reserved...) {
		taken[strings.ToLower(name)] = claim{name: name, kind: "reserved", source: fmt.Sprintf("the system command %q", name)}
	}
	if in.AgentCommand != "" {
		agent := filepath.Base(in.AgentCommand)
		taken[strings.ToLower(agent)] = claim{name: agent, kind: "agent", source: fmt.Sprintf("the agent command %q", agent)}
	}
	var out Rendering
	var lines []toolsLine
	add := func(c claim, script []byte, line string) {
		if first, dup := taken[strings.ToLower(c.name)]; dup {
			errs = append(errs, conflictError(first, c))
			return
		}
		taken[strings.ToLower(c.name)] = c
		out.Shims = append(out.Shims, Shim{Name: c.name, Source: c.source, Script: script})
		lines = append(lines, toolsLine{c.name, line})
	}
	for _, spec := range in.Specs {
		if spec == nil {
			errs = append(errs, fmt.Errorf("%w: a nil connector spec was passed to Render", ErrUnsafeName))
			continue
		}
		ops := compiledOps(spec)
		for i := range spec.Tools {
			tool, shown := externalOnly(&spec.Tools[i])
			if !shown {
				continue
			}
			c, script, line, err := renderSpecTool(spec, tool, ops)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			add(c, script, line)
		}
	}
	for _, act := range in.Actions {
		c, script, line, err := renderAction(act)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		add(c, script, line)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(out.Shims, func(i, j int) bool { return out.Shims[i].Name < out.Shims[j].Name })
	sort.Slice(lines, func(i, j int) bool { return lines[i].name < lines[j].name })
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	out.ToolsTxt = []byte(b.String())
	return &out, nil
}

type toolsLine struct{ name, text string }

// externalOnly is tool without its internal operations, which only action
// steps reach; shown is false when it had operations and all are internal
// (the tool then gets no command).
func externalOnly(tool *policy.Tool) (*policy.Tool, bool) {
	t := *tool
	t.Operations = nil
	for _, op := range tool.Operations {
		if !op.IsInternal() {
			t.Operations = append(t.Operations, op)
		}
	}
	return &t, len(t.Operations) > 0 || len(tool.Operations) == 0
}

// renderSpecTool checks one spec tool and renders its shim and tools.txt
// line; ops are the spec's compiled operations (compiledOps).
func renderSpecTool(spec *policy.Spec, tool *policy.Tool, ops map[[2]string]*policy.Operation) (claim, []byte, string, error) {
	fqn := spec.Connector.FQN
	c := claim{name: tool.Name, kind: "tool", fqn: fqn,
		source: fmt.Sprintf("tool %q of connector %s@%s", tool.Name, fqn, spec.Connector.Version)}
	var errs []error
	if p := nameProblem(tool.Name); p != "" {
		errs = append(errs, fmt.Errorf("%w: %s: tool name %q cannot be a command name: %s; the connector's author must rename the tool", ErrUnsafeName, c.source, tool.Name, p))
	}
	if p := fieldProblem(fqn); p != "" {
		errs = append(errs, fmt.Errorf("%w: %s: connector FQN %q cannot be rendered: %s", ErrUnsafeName, c.source, fqn, p))
	}
	if len(tool.Operations) == 0 {
		errs = append(errs, fmt.Errorf("%w: %s declares no operation; a tool needs at least one", ErrUnsafeName, c.source))
	}
	names := make([]string, 0, len(tool.Operations))
	for _, op := range tool.Operations {
		if p := nameProblem(op.Name); p != "" {
			errs = append(errs, fmt.Errorf("%w: %s: operation name %q cannot be rendered: %s", ErrUnsafeName, c.source, op.Name, p))
		}
		names = append(names, op.Name)
	}
	if len(errs) > 0 {
		return c, nil, "", errors.Join(errs...)
	}
	line := tool.Name + " " + fqn + " -- Aileron connector operations: " + strings.Join(names, ", ")
	return c, specShim(spec, tool, ops), line, nil
}

// renderAction checks one action and renders its shim and tools.txt line.
func renderAction(act action.Installed) (claim, []byte, string, error) {
	if act.Manifest == nil {
		return claim{}, nil, "", fmt.Errorf("%w: an action of connector %s@%s has no manifest", ErrUnsafeName, act.Connector, act.ConnectorVersion)
	}
	c := claim{name: act.Name, kind: "action", fqn: act.Connector,
		source: fmt.Sprintf("action %q of connector %s@%s", act.Name, act.Connector, act.ConnectorVersion)}
	if act.File != "" {
		c.source += " (" + oneLine(act.File) + ")"
	}
	var errs []error
	if p := nameProblem(act.Name); p != "" {
		errs = append(errs, fmt.Errorf("%w: %s: action name %q cannot be a command name: %s; the connector's author must rename the action", ErrUnsafeName, c.source, act.Name, p))
	}
	if p := fieldProblem(act.Connector); p != "" {
		errs = append(errs, fmt.Errorf("%w: %s: connector FQN %q cannot be rendered: %s", ErrUnsafeName, c.source, act.Connector, p))
	}
	if len(errs) > 0 {
		return c, nil, "", errors.Join(errs...)
	}
	line := act.Name + " " + act.Connector + " -- Aileron action: " + actionSummary(act.Manifest)
	if u := act.Unpinned(); len(u) > 0 { // FQNs and versions: checked at parse, one line each
		line += " (UNPINNED: requires " + oneLine(strings.Join(u, ", ")) + " by a placeholder hash)"
	}
	return c, actionShim(act), line, nil
}

// actionSummary is the one-line summary of an action for tools.txt.
func actionSummary(m *action.Manifest) string {
	if s := oneLine(m.Intent); s != "" {
		return s
	}
	for _, l := range strings.Split(cleanText(m.Description), "\n") {
		if l = oneLine(strings.TrimLeft(strings.TrimSpace(l), "#")); l != "" {
			return l
		}
	}
	return "(no description)"
}

// conflictError explains why c cannot take the name first already holds.
func conflictError(first, c claim) error {
	same := ""
	if first.name != c.name {
		same = fmt.Sprintf(" (%q and %q differ only in case, which case-insensitive file systems do not tell apart)", first.name, c.name)
	}
	var fix string
	switch {
	case first.kind == "reserved":
		fix = fmt.Sprintf("a shim named %q would shadow that command in the sandbox; ask the connector's author to rename it, and until then remove connector %s (aileron connector remove FQN@VERSION) or leave it out of the session (aileron session create --connector FQN …)", c.name, c.fqn)
	case first.kind == "agent":
		fix = fmt.Sprintf("a shim named %q would shadow the agent; launch a different agent command, or remove connector %s (aileron connector remove FQN@VERSION) or leave it out of the session (aileron session create --connector FQN …)", c.name, c.fqn)
	case first.fqn == c.fqn:
		fix = fmt.Sprintf("connector %s declares both; ask its author to rename one, and until then remove it (aileron connector remove FQN@VERSION) or leave it out of the session (aileron session create --connector FQN …)", c.fqn)
	default:
		fix = fmt.Sprintf("remove one of the connectors %s and %s (aileron connector remove FQN@VERSION), or create the session with only one of them (aileron session create --connector FQN …)", first.fqn, c.fqn)
	}
	return fmt.Errorf("%w: command %q is claimed by both %s and %s%s; %s", ErrToolConflict, c.name, first.source, c.source, same, fix)
}
