package agents

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestKnownTable(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range Known() {
		if a.Name == "" || a.Binary == "" || a.Title == "" || seen[a.Name] {
			t.Errorf("agent %+v: want a unique name, a binary and a title", a)
		}
		seen[a.Name] = true
		if len(a.Providers) == 0 {
			t.Errorf("%s calls no provider", a.Name)
		}
		for _, p := range a.Providers {
			for _, v := range p.KeyVars {
				if !slices.Contains(a.Clear, v) {
					t.Errorf("%s: key variable %s is not cleared: a real key in the user's environment would reach the agent", a.Name, v)
				}
			}
		}
		if _, err := a.Prepare(t.TempDir(), "/usr/bin/aileron", nil); err != nil {
			t.Errorf("%s: %v", a.Name, err)
		}
	}
	for _, name := range []string{"claude", "codex", "gemini"} {
		if _, ok := Lookup(name); !ok {
			t.Errorf("%s is not a known agent", name)
		}
	}
	if _, ok := Lookup("cursor"); ok {
		t.Error("Lookup found an agent that is not in the table")
	}
}

func TestReady(t *testing.T) {
	claude, _ := Lookup("claude")
	for _, tc := range []struct {
		set     []string
		wantErr string
	}{
		{[]string{"ANTHROPIC_API_KEY"}, ""},
		{[]string{"CLAUDE_CODE_OAUTH_TOKEN"}, ""},
		{nil, "run `aileron provider add anthropic` first"},
		{[]string{"OPENAI_API_KEY"}, "no placeholder in ANTHROPIC_API_KEY or CLAUDE_CODE_OAUTH_TOKEN"},
	} {
		err := claude.Ready(func(name string) bool { return slices.Contains(tc.set, name) })
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Ready with %v = %v, want %q", tc.set, err, tc.wantErr)
		}
	}
}

func TestPrepareClaude(t *testing.T) {
	a, _ := Lookup("claude")
	dir := t.TempDir()
	plan, err := a.Prepare(dir, "/opt/aileron/bin/aileron", map[string]string{"ANTHROPIC_API_KEY": "ph"})
	if err != nil {
		t.Fatal(err)
	}
	mcp, set := filepath.Join(dir, "claude-mcp.json"), filepath.Join(dir, "claude-settings.json")
	if want := []string{"--mcp-config", mcp, "--settings", set}; !slices.Equal(plan.Args, want) {
		t.Fatalf("args %q, want %q", plan.Args, want)
	}
	var m struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
		}
	}
	readJSON(t, mcp, &m)
	if s := m.MCPServers["aileron"]; s.Command != "/opt/aileron/bin/aileron" || !slices.Equal(s.Args, []string{"mcp"}) {
		t.Errorf("mcp config %+v", m)
	}
	var s struct{ Permissions struct{ Allow []string } }
	readJSON(t, set, &s)
	if !slices.Equal(s.Permissions.Allow, []string{"mcp__aileron"}) {
		t.Errorf("settings allow %q", s.Permissions.Allow)
	}
	for _, v := range []string{"DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "DISABLE_AUTOUPDATER", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL"} {
		if plan.Env[v] != "1" {
			t.Errorf("%s = %q, want 1", v, plan.Env[v])
		}
	}
}

// TestPrepareClaudeKeyHelper: with an API key placeholder, Claude Code gets
// it from an apiKeyHelper command (interactive Claude Code asks before it
// uses ANTHROPIC_API_KEY) and ANTHROPIC_API_KEY is withheld; with a
// subscription token it signs in with that and gets no helper.
func TestPrepareClaudeKeyHelper(t *testing.T) {
	a, _ := Lookup("claude")
	const key, sub = "aileron-placeholder-0123abcd", "aileron-placeholder-sub"
	for _, tc := range []struct {
		name         string
		placeholders map[string]string
		helper       string // what the helper prints; "" for no helper
		withhold     []string
		wantErr      string
	}{
		{"key", map[string]string{"ANTHROPIC_API_KEY": key}, key, []string{"ANTHROPIC_API_KEY"}, ""},
		{"subscription", map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": sub}, "", nil, ""},
		{"both", map[string]string{"ANTHROPIC_API_KEY": key, "CLAUDE_CODE_OAUTH_TOKEN": sub}, "", []string{"ANTHROPIC_API_KEY"}, ""},
		{"quote", map[string]string{"ANTHROPIC_API_KEY": "x'; rm -rf /; '"}, "", nil, "cannot go in a key helper command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			plan, err := a.Prepare(dir, "/usr/bin/aileron", tc.placeholders)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Prepare = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(plan.Withhold, tc.withhold) {
				t.Errorf("withhold %q, want %q", plan.Withhold, tc.withhold)
			}
			var s struct{ APIKeyHelper *string }
			readJSON(t, filepath.Join(dir, "claude-settings.json"), &s)
			switch {
			case tc.helper == "" && s.APIKeyHelper != nil:
				t.Errorf("apiKeyHelper %q, want none", *s.APIKeyHelper)
			case tc.helper != "" && s.APIKeyHelper == nil:
				t.Errorf("no apiKeyHelper, want one printing %q", tc.helper)
			case tc.helper != "":
				// Claude Code runs the helper with the shell.
				out, err := exec.Command("/bin/sh", "-c", *s.APIKeyHelper).Output()
				if err != nil || string(out) != tc.helper {
					t.Errorf("apiKeyHelper %q printed %q (%v), want %q", *s.APIKeyHelper, out, err, tc.helper)
				}
			}
		})
	}
}

func TestPrepareCodex(t *testing.T) {
	a, _ := Lookup("codex")
	dir := t.TempDir()
	exe := `/opt/a "quoted"\dir/aileron`
	plan, err := a.Prepare(dir, exe, map[string]string{"OPENAI_API_KEY": "ph-openai"})
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "codex-home")
	if plan.Env["CODEX_HOME"] != home || plan.Env["CODEX_API_KEY"] != "ph-openai" {
		t.Fatalf("env %v: want CODEX_HOME %s and CODEX_API_KEY from OPENAI_API_KEY", plan.Env, home)
	}
	var cfg struct {
		CheckForUpdateOnStartup bool `toml:"check_for_update_on_startup"`
		Analytics               struct{ Enabled bool }
		Feedback                struct{ Enabled bool }
		Features                map[string]bool
		MCPServers              map[string]struct {
			Command                  string
			Args                     []string
			EnvVars                  []string `toml:"env_vars"`
			DefaultToolsApprovalMode string   `toml:"default_tools_approval_mode"`
		} `toml:"mcp_servers"`
	}
	md, err := toml.DecodeFile(filepath.Join(home, "config.toml"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		t.Errorf("config.toml has keys the test does not check: %v", un)
	}
	s := cfg.MCPServers["aileron"]
	if s.Command != exe || !slices.Equal(s.Args, []string{"mcp"}) || s.DefaultToolsApprovalMode != "approve" ||
		!slices.Contains(s.EnvVars, "AILERON_API_URL") || !slices.Contains(s.EnvVars, "SSL_CERT_FILE") || !slices.Contains(s.EnvVars, "HTTPS_PROXY") {
		t.Errorf("mcp server %+v", s)
	}
	if cfg.CheckForUpdateOnStartup || cfg.Analytics.Enabled || cfg.Feedback.Enabled {
		t.Errorf("config %+v: want update check, analytics and feedback off", cfg)
	}
	for _, f := range []string{"apps", "plugins", "remote_plugin", "in_app_updates", "api_key_model_discovery"} {
		if on, set := cfg.Features[f]; !set || on {
			t.Errorf("feature %s: want it set to false, have %v", f, cfg.Features)
		}
	}
	// An own CODEX_API_KEY placeholder is not replaced by the alias.
	plan, err = a.Prepare(t.TempDir(), exe, map[string]string{"OPENAI_API_KEY": "a", "CODEX_API_KEY": "b"})
	if err != nil || plan.Env["CODEX_API_KEY"] != "" {
		t.Errorf("with a CODEX_API_KEY placeholder of its own: %v, env %v", err, plan.Env)
	}
}

func TestPrepareGemini(t *testing.T) {
	a, _ := Lookup("gemini")
	dir := t.TempDir()
	plan, err := a.Prepare(dir, "/usr/bin/aileron", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gemini-home", ".gemini", "settings.json")
	if plan.Env["GEMINI_CLI_HOME"] != filepath.Join(dir, "gemini-home") {
		t.Fatalf("env %v", plan.Env)
	}
	var s struct {
		MCPServers map[string]struct {
			Command string
			Args    []string
			Env     map[string]string
			Trust   bool
		}
		General   struct{ EnableAutoUpdate, EnableAutoUpdateNotification bool }
		Privacy   struct{ UsageStatisticsEnabled bool }
		Telemetry struct{ Enabled bool }
		Security  struct{ Auth struct{ SelectedType string } }
	}
	s.General.EnableAutoUpdate, s.Privacy.UsageStatisticsEnabled, s.Telemetry.Enabled = true, true, true
	readJSON(t, path, &s)
	srv := s.MCPServers["aileron"]
	if srv.Command != "/usr/bin/aileron" || !srv.Trust || srv.Env["AILERON_API_URL"] != "$AILERON_API_URL" {
		t.Errorf("mcp server %+v", srv)
	}
	if s.General.EnableAutoUpdate || s.General.EnableAutoUpdateNotification || s.Privacy.UsageStatisticsEnabled || s.Telemetry.Enabled ||
		s.Security.Auth.SelectedType != "gemini-api-key" {
		t.Errorf("settings %+v", s)
	}
}

func TestPrepareRefusesRelativeBinary(t *testing.T) {
	a, _ := Lookup("claude")
	if _, err := a.Prepare(t.TempDir(), "aileron", nil); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("Prepare with a relative binary: %v", err)
	}
}

func TestEnviron(t *testing.T) {
	a, _ := Lookup("claude")
	plan := Plan{Env: map[string]string{"DISABLE_TELEMETRY": "1", "B": "2"}}
	got := a.Environ([]string{"PATH=/bin", "ANTHROPIC_API_KEY=sk-real", "ANTHROPIC_BASE_URL=https://elsewhere", "DISABLE_TELEMETRY=0", "HOME=/h"}, plan)
	want := []string{"PATH=/bin", "HOME=/h", "B=2", "DISABLE_TELEMETRY=1"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// No launched agent inherits a real key or base URL of any known
// provider from the user's environment, its own provider's or another's.
func TestEnvironDropsEveryProvidersKeys(t *testing.T) {
	user := []string{"PATH=/bin", "ANTHROPIC_API_KEY=sk-ant-REAL", "OPENAI_API_KEY=sk-proj-REAL", "GEMINI_API_KEY=AIza-REAL",
		"GOOGLE_API_KEY=AIza-REAL", "CODEX_API_KEY=REAL", "CLAUDE_CODE_OAUTH_TOKEN=REAL", "ANTHROPIC_BASE_URL=https://evil.example",
		"OPENAI_BASE_URL=https://evil.example", "GOOGLE_GEMINI_BASE_URL=https://evil.example"}
	for _, a := range Known() {
		for _, kv := range a.Environ(user, Plan{Env: map[string]string{}}) {
			if strings.Contains(kv, "REAL") || strings.Contains(kv, "evil") {
				t.Errorf("launch %s: the agent inherits %s", a.Name, kv)
			}
		}
	}
}
