// Package agents knows the coding agents `aileron launch` starts by name
// (Claude Code, Codex, Gemini CLI) as data: each one's binary, the model
// providers it calls and the variables it reads their keys and base URLs
// from, how it registers an MCP server, the switches that keep it off hosts
// other than its provider, and how it is told it may call Aileron's MCP
// tools without a prompt of its own. Prepare writes an agent's registration
// of `aileron mcp` into a directory of launch's own and says which arguments
// and variables start the agent with it.
//
// It imports nothing of Aileron's: the CLI hands it what it needs (the
// aileron binary, the session's variables) and does the launching.
package agents

import "strings"

// ServerName is the name Aileron's MCP server is registered under; its tools
// are mcp__aileron__NAME to Claude Code.
const ServerName = "aileron"

// Format is how an agent is told about an MCP server and the rest of its
// configuration: one writer per format, the agents differ only in data.
type Format string

const (
	// ClaudeFlags: an --mcp-config JSON file and a --settings JSON file
	// named on the command line (Claude Code).
	ClaudeFlags Format = "claude-flags"
	// CodexHome: a config.toml in a CODEX_HOME of launch's own (Codex).
	CodexHome Format = "codex-home"
	// GeminiHome: a .gemini/settings.json in a GEMINI_CLI_HOME of
	// launch's own (Gemini CLI). Its system settings file would override
	// the workspace's too, but Gemini CLI reads one only when root owns it
	// and every directory above it.
	GeminiHome Format = "gemini-home"
)

// Provider is a model provider an agent calls, as the agent reads it.
type Provider struct {
	// Name is the provider as `aileron provider add NAME` installs it.
	Name string
	// Hosts are the hosts the agent calls for it.
	Hosts []string
	// KeyVars are the variables the agent reads the provider's key (or
	// subscription token) from; a placeholder in any one of them is enough.
	KeyVars []string
}

// Agent is one known agent.
type Agent struct {
	// Name is the word after `aileron launch`.
	Name string
	// Title is how people call it.
	Title string
	// Binary is the command looked up in PATH.
	Binary string
	// Package is the npm package that installs Binary.
	Package string
	// Providers are the model providers it calls; each must be ready.
	Providers []Provider
	// Clear are variables removed from the agent's environment unless the
	// session sets them: base URLs that would send model traffic elsewhere,
	// and key variables that would hand the agent a real key.
	Clear []string
	// Alias sets a variable the agent reads from one the session sets
	// (name → source), when a provider's placeholder variable is not the
	// one this agent reads.
	Alias map[string]string
	// Quiet are the variables that turn off the agent's telemetry, error
	// reporting, update checks and other non-model traffic.
	Quiet map[string]string
	// Format is how it registers an MCP server and takes its settings.
	Format Format
	// MCPEnv are the variables `aileron mcp` needs, which an agent that
	// filters its MCP servers' environment must pass on.
	MCPEnv []string
	// KeyHelper, when its Var is set, gives the agent its key through a
	// command in its settings instead of its environment.
	KeyHelper KeyHelper
}

// KeyHelper is a key the agent reads from a command of its settings (Claude
// Code's apiKeyHelper): interactive Claude Code asks before it uses a key
// from ANTHROPIC_API_KEY, and with no key it takes up it starts its login
// onboarding, which calls hosts other than the model API.
type KeyHelper struct {
	// Var is the key variable whose placeholder the command prints. It is
	// withheld from the agent's environment.
	Var string
	// Unless is the variable of another way to sign in (a subscription
	// token): when the session sets it, no command is written, the agent
	// signs in with it, and Var is still withheld.
	Unless string
}

// mcpEnv is what `aileron mcp` reads: the sandbox API, the proxy it reaches
// it through and the CA bundle that proxy's certificates chain to.
func mcpEnv() []string {
	return []string{"AILERON_API_URL", "AILERON_SESSION_ID", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
		"NO_PROXY", "no_proxy", "SSL_CERT_FILE"}
}

// Known returns the table of known agents, in the order --list shows them.
func Known() []Agent {
	return []Agent{
		{
			Name: "claude", Title: "Claude Code", Binary: "claude", Format: ClaudeFlags,
			Package: "@anthropic-ai/claude-code",
			Providers: []Provider{{Name: "anthropic", Hosts: []string{"api.anthropic.com"},
				KeyVars: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}}},
			Clear: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
				"ANTHROPIC_UNIX_SOCKET", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY",
				"ANTHROPIC_CUSTOM_HEADERS", "AWS_BEARER_TOKEN_BEDROCK", "ANTHROPIC_FOUNDRY_API_KEY"},
			Quiet: map[string]string{
				"DISABLE_TELEMETRY":                        "1",
				"DISABLE_ERROR_REPORTING":                  "1",
				"DISABLE_AUTOUPDATER":                      "1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
				// Interactive, it would fetch its official plugin
				// marketplace from downloads.claude.ai or github.com.
				"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
			},
			MCPEnv:    mcpEnv(),
			KeyHelper: KeyHelper{Var: "ANTHROPIC_API_KEY", Unless: "CLAUDE_CODE_OAUTH_TOKEN"},
		},
		{
			Name: "codex", Title: "Codex", Binary: "codex", Format: CodexHome,
			Package: "@openai/codex",
			Providers: []Provider{{Name: "openai", Hosts: []string{"api.openai.com"},
				KeyVars: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}}},
			Clear: []string{"OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME", "AZURE_OPENAI_API_KEY",
				"OPENROUTER_API_KEY", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"},
			Alias:  map[string]string{"CODEX_API_KEY": "OPENAI_API_KEY"},
			Quiet:  map[string]string{},
			MCPEnv: mcpEnv(),
		},
		{
			Name: "gemini", Title: "Gemini CLI", Binary: "gemini", Format: GeminiHome,
			Package: "@google/gemini-cli",
			Providers: []Provider{{Name: "gemini", Hosts: []string{"generativelanguage.googleapis.com"},
				KeyVars: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}}},
			Clear: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL",
				"GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_CLOUD_ACCESS_TOKEN", "GEMINI_CLI_HOME",
				"GOOGLE_APPLICATION_CREDENTIALS"},
			Quiet:  map[string]string{"GEMINI_TELEMETRY_ENABLED": "false"},
			MCPEnv: mcpEnv(),
		},
	}
}

// Lookup returns the known agent called name.
func Lookup(name string) (Agent, bool) {
	for _, a := range Known() {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// Names are the known agents' names, comma-separated, for messages.
func Names() string {
	var names []string
	for _, a := range Known() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}
