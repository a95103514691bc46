package providers

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// SpecFile is the name of a package's connector spec.
const SpecFile = "aileron.connector.v1.json"

//go:embed packages
var packages embed.FS

// Provider is one model provider.
type Provider struct {
	// Name is what `aileron provider add` takes: "anthropic", "openai",
	// "gemini", or the name given to an OpenAI-compatible provider.
	Name string `json:"name"`
	// FQN is the connector FQN of its package.
	FQN string `json:"fqn"`
	// Hosts are the hosts its operations reach (host or host:port).
	Hosts []string `json:"hosts"`
	// Credential is the vault entry that holds its key.
	Credential string `json:"credential"`
	// KeyEnv are the variables SDKs and CLIs read the key from; each gets
	// the session's placeholder.
	KeyEnv []string `json:"key_env"`
	// BaseURLEnv is the variable that points clients at another base URL
	// (empty when clients have none).
	BaseURLEnv string `json:"base_url_env,omitempty"`
	// BaseURL is the provider's base URL, for BaseURLEnv.
	BaseURL string `json:"base_url,omitempty"`
	// SubscriptionEnv is the variable a subscription token goes in
	// (CLAUDE_CODE_OAUTH_TOKEN), empty when the provider has none.
	SubscriptionEnv string `json:"subscription_env,omitempty"`
	// Compatible marks an OpenAI-compatible provider at a user's host.
	Compatible bool `json:"compatible,omitempty"`
	// Version is the version an OpenAI-compatible provider's generated
	// package is written as; "" means 1.0.0. A new host is a new version.
	Version string `json:"-"`
}

// CompatibleScheme prefixes the FQN of every OpenAI-compatible provider:
// local://openai-compatible/NAME.
const CompatibleScheme = "local://openai-compatible/"

// Known returns the shipped providers, in a stable order.
func Known() []Provider {
	return []Provider{
		{Name: "anthropic", FQN: "hub://aileron/anthropic", Hosts: []string{"api.anthropic.com"}, Credential: "anthropic",
			KeyEnv: []string{"ANTHROPIC_API_KEY"}, BaseURLEnv: "ANTHROPIC_BASE_URL", BaseURL: "https://api.anthropic.com",
			SubscriptionEnv: "CLAUDE_CODE_OAUTH_TOKEN"},
		{Name: "openai", FQN: "hub://aileron/openai", Hosts: []string{"api.openai.com"}, Credential: "openai",
			KeyEnv: []string{"OPENAI_API_KEY", "CODEX_API_KEY"}, BaseURLEnv: "OPENAI_BASE_URL", BaseURL: "https://api.openai.com/v1"},
		{Name: "gemini", FQN: "hub://aileron/gemini", Hosts: []string{"generativelanguage.googleapis.com"}, Credential: "gemini",
			KeyEnv: []string{"GEMINI_API_KEY", "GOOGLE_API_KEY"}, BaseURLEnv: "GOOGLE_GEMINI_BASE_URL",
			BaseURL: "https://generativelanguage.googleapis.com"},
	}
}

// Lookup returns the shipped provider called name.
func Lookup(name string) (Provider, bool) {
	for _, p := range Known() {
		if p.Name == name {
			return p, true
		}
	}
	return Provider{}, false
}

// Names lists the shipped providers' names, for messages.
func Names() []string {
	var out []string
	for _, p := range Known() {
		out = append(out, p.Name)
	}
	return out
}

// Spec returns the connector spec of provider p: the embedded one of a
// shipped provider, or the one generated for an OpenAI-compatible one.
func Spec(p Provider) ([]byte, error) {
	if p.Compatible {
		return compatibleSpec(p)
	}
	if _, ok := Lookup(p.Name); !ok {
		return nil, fmt.Errorf("no shipped provider is called %q; known: %s", p.Name, strings.Join(Names(), ", "))
	}
	return fs.ReadFile(packages, "packages/"+p.Name+"/"+SpecFile)
}

// WritePackage writes provider p's connector package into dir (created
// 0700 if missing), ready for the store's install, and returns dir. The
// spec is parsed first: a package that does not validate is never written.
func WritePackage(p Provider, dir string) (string, error) {
	data, err := Spec(p)
	if err != nil {
		return "", err
	}
	if _, err := policy.ParseSpec(p.Name+"/"+SpecFile, data); err != nil {
		return "", fmt.Errorf("the %s provider's package does not validate: %w", p.Name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("writing the %s provider's package: %w", p.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpecFile), data, 0o600); err != nil {
		return "", fmt.Errorf("writing the %s provider's package: %w", p.Name, err)
	}
	return dir, nil
}

// Facts is what the admin API lists, reduced to what Status needs.
type Facts struct {
	// Installed are the FQNs of installed connectors.
	Installed []string
	// Bound maps the FQN of each bound connector to its binding's
	// placeholder variables.
	Bound map[string][]string
}

// Status says whether a provider can be used now.
type Status struct {
	Provider
	Installed bool `json:"installed"`
	Bound     bool `json:"bound"`
	// Env are the variables its binding gives the placeholder to; empty
	// (never nil) when it is not bound.
	Env []string `json:"env"`
}

// Status returns p's status under f.
func (f Facts) Status(p Provider) Status {
	env, bound := f.Bound[p.FQN]
	if env == nil {
		env = []string{} // JSON [], never null
	}
	return Status{Provider: p, Installed: slices.Contains(f.Installed, p.FQN), Bound: bound, Env: env}
}

// Ready returns nil when the provider is installed and bound, or an error
// saying what to run first.
func (s Status) Ready() error {
	add := "aileron provider add " + s.Name
	if s.Compatible {
		host := "HOST[:PORT]"
		if len(s.Hosts) > 0 {
			host = s.Hosts[0]
		}
		add = "aileron provider add openai-compatible --name " + s.Name + " --host " + host
	}
	switch {
	case !s.Installed:
		return fmt.Errorf("provider %s is not installed; run `%s` first (the key on stdin)", s.Name, add)
	case !s.Bound:
		return fmt.Errorf("provider %s is installed but has no key bound; run `%s` (the key on stdin)", s.Name, add)
	}
	return nil
}

// All returns the status of every shipped provider, then of each
// OpenAI-compatible provider f shows installed, by name.
func (f Facts) All() []Status {
	var out []Status
	for _, p := range Known() {
		out = append(out, f.Status(p))
	}
	var names []string
	for _, fqn := range f.Installed {
		if n, ok := strings.CutPrefix(fqn, CompatibleScheme); ok && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		p := Provider{Name: n, FQN: CompatibleScheme + n, Credential: compatibleCredential(n), Compatible: true,
			BaseURLEnv: "OPENAI_BASE_URL"}
		out = append(out, f.Status(p))
	}
	return out
}
