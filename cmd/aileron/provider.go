package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/credentials"
	"github.com/aileronhq/aileron/providers"
)

// maxKeyInput bounds a provider key read from stdin or --key-file.
const maxKeyInput = 64 << 10

// subscriptionPrefix starts a Claude Code subscription token (claude
// setup-token).
const subscriptionPrefix = "sk-ant-oat"

func cmdProvider(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: add or list")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("provider "+sub, providerSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	switch sub {
	case "add":
		fs.String("key-file", "", "read the key from this file instead of stdin")
		fs.Bool("subscription", false, "anthropic: the key is a Claude Code subscription token (claude setup-token), given to the agent as CLAUDE_CODE_OAUTH_TOKEN")
		fs.String("name", "", "openai-compatible: the provider's name (lower-case letters, digits, '-')")
		fs.String("host", "", "openai-compatible: the provider's HOST[:PORT]")
		fs.StringSlice("env", nil, "openai-compatible: variables that get the key placeholder (default NAME_API_KEY)")
		if err := refuseKeyArgs(rest); err != nil {
			return err
		}
	case "list":
		fs.Bool("json", false, "print JSON")
	default:
		return unknownSubcommand("provider", sub)
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	if sub == "list" {
		return providerList(fs, newClient(cfg), stdout)
	}
	return providerAdd(fs, newClient(cfg), cfg.Home, stdin, stdout)
}

func providerSynopsis(sub string) string {
	if sub == "list" {
		return "provider list [--json]"
	}
	return "provider add anthropic [--subscription] | openai | gemini [--key-file F]   (key on stdin)\n" +
		"       aileron provider add openai-compatible --name NAME --host HOST[:PORT] [--env VAR]... [--key-file F]"
}

// refuseKeyArgs refuses a key on the command line, where it would stay in
// shell history and process listings.
func refuseKeyArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "--") && !inline && valueFlag(name) {
			i++ // the flag's value (a file name, a host, …) is not a key
			continue
		}
		if strings.HasPrefix(a, "-") && (name == "key" || name == "api-key" || name == "token") ||
			strings.HasPrefix(a, "sk-") || strings.HasPrefix(a, "AIza") {
			return usagef("a key is never taken on the command line (it would stay in shell history and process listings); " +
				"pipe it on stdin (`aileron provider add NAME < keyfile`) or pass --key-file FILE")
		}
	}
	return nil
}

// valueFlag reports whether `provider add`'s flag name takes a value.
func valueFlag(name string) bool {
	switch name {
	case "key-file", "name", "host", "env", "home", "config":
		return true
	}
	return false
}

// providerFor resolves the provider `provider add` names.
func providerFor(fs *pflag.FlagSet) (providers.Provider, error) {
	if fs.NArg() != 1 {
		return providers.Provider{}, usagef("want one provider: %s or openai-compatible; the key comes on stdin or --key-file, never as an argument",
			strings.Join(providers.Names(), ", "))
	}
	name := fs.Arg(0)
	sub, _ := fs.GetBool("subscription")
	if sub && name != "anthropic" {
		return providers.Provider{}, usagef("--subscription is for anthropic (a Claude Code token); %s takes an API key", name)
	}
	if name == "openai-compatible" {
		env, _ := fs.GetStringSlice("env")
		p, err := providers.Compatible(str(fs, "name"), str(fs, "host"), env)
		if err != nil {
			return providers.Provider{}, usageError{err.Error()}
		}
		return p, nil
	}
	if str(fs, "name") != "" || str(fs, "host") != "" || fs.Changed("env") {
		return providers.Provider{}, usagef("--name, --host and --env are for openai-compatible; %s has its own host and variables", name)
	}
	p, ok := providers.Lookup(name)
	if !ok {
		return providers.Provider{}, usagef("unknown provider %q; known: %s, or openai-compatible --name NAME --host HOST", name, strings.Join(providers.Names(), ", "))
	}
	if sub {
		p.Credential, p.KeyEnv = p.Name+"-subscription", []string{p.SubscriptionEnv}
	}
	return p, nil
}

// readKey reads the key from --key-file or stdin, trimmed, and checks it
// fits the kind asked for. Errors never hold key bytes.
func readKey(fs *pflag.FlagSet, stdin io.Reader, p providers.Provider, subscription bool) ([]byte, error) {
	var in []byte
	var err error
	from := "stdin"
	if f := str(fs, "key-file"); f != "" {
		from = f
		in, err = os.ReadFile(f)
	} else {
		if f, ok := stdin.(*os.File); ok && isTerminal(f) { // typed, the key would show on the screen
			return nil, usagef("the key is read from a pipe or a file, not typed: `aileron provider add %s < keyfile`, "+
				"`pass show %s | aileron provider add %s`, or --key-file FILE", p.Name, p.Name, p.Name)
		}
		in, err = io.ReadAll(io.LimitReader(stdin, maxKeyInput+1))
	}
	if err != nil {
		return nil, fmt.Errorf("reading the key from %s: %w", from, err)
	}
	if len(in) > maxKeyInput {
		return nil, fmt.Errorf("the key on %s is over %d bytes; give the key alone", from, maxKeyInput)
	}
	key := bytes.TrimSpace(in)
	switch {
	case len(key) == 0:
		return nil, usagef("no key on %s; pipe it (`aileron provider add %s < keyfile`) or pass --key-file FILE", from, p.Name)
	case subscription && !bytes.HasPrefix(key, []byte(subscriptionPrefix)):
		return nil, usagef("--subscription takes a Claude Code token (%s…, from `claude setup-token`); for an API key leave out --subscription", subscriptionPrefix)
	case !subscription && bytes.HasPrefix(key, []byte(subscriptionPrefix)):
		return nil, usagef("this is a Claude Code subscription token; add --subscription to use it as CLAUDE_CODE_OAUTH_TOKEN")
	}
	return key, nil
}

// providerAdd writes the provider's package into a temporary directory of
// home and installs it through the store's normal install path, stores the
// key in the vault and binds it with the provider's placeholder variables.
// Running it again updates the key.
func providerAdd(fs *pflag.FlagSet, c *admin.Client, home string, stdin io.Reader, stdout io.Writer) error {
	p, err := providerFor(fs)
	if err != nil {
		return err
	}
	sub, _ := fs.GetBool("subscription")
	key, err := readKey(fs, stdin, p, sub)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := checkEnvFree(ctx, c, p); err != nil {
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("writing the %s package: %w", p.Name, err)
	}
	dir, err := os.MkdirTemp(home, "provider-") // in the daemon's home, which it reads
	if err != nil {
		return fmt.Errorf("writing the %s package: %w", p.Name, err)
	}
	defer os.RemoveAll(dir)
	pkg, err := providers.WritePackage(p, dir)
	if err != nil {
		return err
	}
	inst, err := c.InstallConnector(ctx, pkg)
	if err != nil {
		return fmt.Errorf("installing the %s package: %w", p.Name, err)
	}
	kind := "api_key"
	if sub {
		kind = "bearer"
	}
	if _, err := c.SetCredential(ctx, admin.SetCredentialRequest{Name: p.Credential, Kind: kind, Input: string(key)}); err != nil {
		return fmt.Errorf("storing the %s key: %w", p.Name, err)
	}
	b := credentials.Binding{Connector: p.FQN, Credential: p.Credential, Env: strings.Join(p.KeyEnv, ",")}
	if sub { // an OAuth token: always Authorization: Bearer, never x-api-key
		b.Header, b.Format = "Authorization", "Bearer {token}"
	}
	if _, err := c.Bind(ctx, b); err != nil {
		return fmt.Errorf("binding the %s key: %w", p.Name, err)
	}
	fmt.Fprintf(stdout, "provider %s ready: %s installed, key stored as credential %s\n", p.Name, inst.Ref(), p.Credential)
	fmt.Fprintf(stdout, "sandboxes get a placeholder in %s (`aileron session env ID`); the proxy sends the real key\n", strings.Join(p.KeyEnv, ", "))
	if p.Compatible {
		fmt.Fprintf(stdout, "point clients at it: %s=%s\n", p.BaseURLEnv, p.BaseURL)
	}
	return nil
}

// checkEnvFree refuses, before anything is installed, key variables that
// already carry another credential's placeholder (the daemon would refuse
// the binding).
func checkEnvFree(ctx context.Context, c *admin.Client, p providers.Provider) error {
	binds, err := c.ListBindings(ctx)
	if err != nil {
		return err
	}
	for _, b := range binds {
		if b.Connector == p.FQN || b.Credential == p.Credential {
			continue
		}
		for _, env := range b.EnvNames() {
			if slices.Contains(p.KeyEnv, env) {
				fix := "free it with `aileron credential unbind " + b.Connector + "`"
				if p.Compatible {
					fix += ", or choose other variables with --env"
				}
				return fmt.Errorf("%s already carries the placeholder of credential %s (bound to %s); %s", env, b.Credential, b.Connector, fix)
			}
		}
	}
	return nil
}

// providerFacts reads what the daemon has installed and bound, for
// providers.Facts: `provider list`, and `launch` to say which provider to
// add first (providerFacts(ctx, c) then f.Status(p).Ready()).
func providerFacts(ctx context.Context, c *admin.Client) (providers.Facts, error) {
	inst, err := c.ListConnectors(ctx)
	if err != nil {
		return providers.Facts{}, err
	}
	binds, err := c.ListBindings(ctx)
	if err != nil {
		return providers.Facts{}, err
	}
	f := providers.Facts{Bound: map[string][]string{}}
	for _, i := range inst {
		if i.Active {
			f.Installed = append(f.Installed, i.FQN)
		}
	}
	for _, b := range binds {
		f.Bound[b.Connector] = b.EnvNames()
	}
	return f, nil
}

func providerList(fs *pflag.FlagSet, c *admin.Client, stdout io.Writer) error {
	f, err := providerFacts(context.Background(), c)
	if err != nil {
		return err
	}
	all := f.All()
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, map[string]any{"providers": all})
	}
	yes := map[bool]string{true: "yes", false: "no"}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tFQN\tINSTALLED\tBOUND\tKEY VARIABLES\tBASE URL VARIABLE")
	for _, s := range all {
		env := strings.Join(s.Env, ",") // what the binding gives; else what provider add would
		if !s.Bound {
			env = strings.Join(s.KeyEnv, ",")
		}
		if env == "" {
			env = "-"
		}
		base := s.BaseURLEnv
		if base == "" {
			base = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.FQN, yes[s.Installed], yes[s.Bound], env, base)
	}
	return tw.Flush()
}
