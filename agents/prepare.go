package agents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Plan is how to start a prepared agent: Args go before the user's own
// arguments, Env on top of the session's environment; the session's
// variables named in Withhold are not given to the agent.
type Plan struct {
	Args     []string
	Env      map[string]string
	Withhold []string
}

// Ready reports, for each provider the agent calls, whether set (a variable
// name the session gives a placeholder) holds one of its key variables. The
// error, when one is not, says what to run first.
func (a Agent) Ready(set func(name string) bool) error {
	for _, p := range a.Providers {
		if !slices.ContainsFunc(p.KeyVars, set) {
			return fmt.Errorf("%s calls the %s provider, which is not ready: the session has no placeholder in %s; run `aileron provider add %s` first (it installs the provider and binds its key), then launch again",
				a.Title, p.Name, strings.Join(p.KeyVars, " or "), p.Name)
		}
	}
	return nil
}

// Prepare writes the agent's registration of `exe mcp` (the running aileron
// binary) and its settings into dir, a directory launch owns and removes
// when the agent ends, and returns how to start the agent with them.
// placeholders are the session's placeholder variables (for Alias).
func (a Agent) Prepare(dir, exe string, placeholders map[string]string) (Plan, error) {
	if !filepath.IsAbs(exe) {
		return Plan{}, fmt.Errorf("the aileron binary %q is not an absolute path; the agent starts `aileron mcp` from another directory", exe)
	}
	plan := Plan{Env: map[string]string{}}
	for k, v := range a.Quiet {
		plan.Env[k] = v
	}
	for name, src := range a.Alias {
		if v, ok := placeholders[src]; ok {
			if _, own := placeholders[name]; !own {
				plan.Env[name] = v
			}
		}
	}
	var err error
	switch a.Format {
	case ClaudeFlags:
		err = a.writeClaude(dir, exe, placeholders, &plan)
	case CodexHome:
		err = a.writeCodex(dir, exe, &plan)
	case GeminiHome:
		err = a.writeGemini(dir, exe, &plan)
	default:
		err = fmt.Errorf("agent %s: unknown registration format %q", a.Name, a.Format)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("writing %s's registration of aileron mcp in %s: %w", a.Title, dir, err)
	}
	return plan, nil
}

// Environ returns environ without the variables the agent must not inherit
// (its Clear, every other known agent's Clear too, and what plan sets)
// followed by plan's variables, sorted by name. Every known agent's Clear
// goes, not only its own: an agent's shell could read another provider's
// real key from the user's environment and send it out in a model call.
// The session's variables go on top of it (sandbox.MergeEnv).
func (a Agent) Environ(environ []string, plan Plan) []string {
	clear := slices.Clone(a.Clear)
	for _, o := range Known() {
		clear = append(clear, o.Clear...)
	}
	out := make([]string, 0, len(environ)+len(plan.Env))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := plan.Env[name]; set || slices.Contains(clear, name) {
			continue
		}
		out = append(out, kv)
	}
	names := make([]string, 0, len(plan.Env))
	for k := range plan.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		out = append(out, k+"="+plan.Env[k])
	}
	return out
}

// writeClaude writes an --mcp-config file registering aileron mcp and a
// --settings file allowing its tools (mcp__aileron matches every tool of the
// server) and holding the key helper (see keyHelper). --settings comes last:
// --mcp-config takes several values and would swallow a prompt that
// followed it.
func (a Agent) writeClaude(dir, exe string, placeholders map[string]string, plan *Plan) error {
	mcp := map[string]any{"mcpServers": map[string]any{
		ServerName: map[string]any{"type": "stdio", "command": exe, "args": []string{"mcp"}, "alwaysLoad": true},
	}}
	settings := map[string]any{"permissions": map[string]any{"allow": []string{"mcp__" + ServerName}}}
	helper, err := a.keyHelper(placeholders, plan)
	if err != nil {
		return err
	}
	if helper != "" {
		settings["apiKeyHelper"] = helper
	}
	mcpPath, setPath := filepath.Join(dir, "claude-mcp.json"), filepath.Join(dir, "claude-settings.json")
	if err := writeJSON(mcpPath, mcp); err != nil {
		return err
	}
	if err := writeJSON(setPath, settings); err != nil {
		return err
	}
	plan.Args = []string{"--mcp-config", mcpPath, "--settings", setPath}
	return nil
}

// keyHelper withholds KeyHelper.Var from the agent's environment and
// returns the shell command that prints its placeholder, or "" when the
// session has none or signs the agent in with KeyHelper.Unless.
func (a Agent) keyHelper(placeholders map[string]string, plan *Plan) (string, error) {
	h := a.KeyHelper
	if h.Var == "" {
		return "", nil
	}
	v, ok := placeholders[h.Var]
	if !ok {
		return "", nil
	}
	plan.Withhold = append(plan.Withhold, h.Var)
	if _, sub := placeholders[h.Unless]; sub && h.Unless != "" {
		return "", nil
	}
	if strings.ContainsAny(v, "'\x00\n") {
		return "", fmt.Errorf("the %s placeholder holds a quote or a line break and cannot go in a key helper command", h.Var)
	}
	return "printf '%s' '" + v + "'", nil
}

// writeCodex writes a CODEX_HOME holding config.toml: the MCP server with
// the variables it needs passed through Codex's filtered environment, its
// tools approved, and Codex's update check, analytics and feedback off.
func (a Agent) writeCodex(dir, exe string, plan *Plan) error {
	home := filepath.Join(dir, "codex-home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Written by aileron launch codex; removed when Codex ends.\n")
	b.WriteString("check_for_update_on_startup = false\n\n")
	b.WriteString("[analytics]\nenabled = false\n\n")
	b.WriteString("[feedback]\nenabled = false\n\n")
	// apps and plugins reach chatgpt.com and github.com; in_app_updates
	// checks for releases; api_key_model_discovery refreshes the model list.
	b.WriteString("[features]\napps = false\nplugins = false\nremote_plugin = false\nin_app_updates = false\napi_key_model_discovery = false\n\n")
	fmt.Fprintf(&b, "[mcp_servers.%s]\ncommand = %s\nargs = [\"mcp\"]\nenv_vars = %s\ndefault_tools_approval_mode = \"approve\"\n",
		ServerName, tomlString(exe), tomlStrings(a.MCPEnv))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(b.String()), 0o600); err != nil {
		return err
	}
	plan.Env["CODEX_HOME"] = home
	return nil
}

// writeGemini writes a GEMINI_CLI_HOME whose .gemini/settings.json holds
// the MCP server, trusted so its tools need no confirmation, with the
// variables it needs; API-key auth; telemetry, usage statistics and auto
// update off.
func (a Agent) writeGemini(dir, exe string, plan *Plan) error {
	env := map[string]string{}
	for _, name := range a.MCPEnv {
		env[name] = "$" + name // expanded by Gemini CLI from its own environment
	}
	settings := map[string]any{
		"mcpServers": map[string]any{
			ServerName: map[string]any{"command": exe, "args": []string{"mcp"}, "env": env, "trust": true},
		},
		"general":   map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"security":  map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
	}
	home := filepath.Join(dir, "gemini-home")
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(home, ".gemini", "settings.json"), settings); err != nil {
		return err
	}
	plan.Env["GEMINI_CLI_HOME"] = home
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
