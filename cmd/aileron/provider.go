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
		return usagef("want a subcommand: add, list or remove")
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
	case "remove":
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
	switch sub {
	case "list":
		return providerList(fs, newClient(cfg), stdout)
	case "remove":
		return providerRemove(fs, newClient(cfg), stdout)
	}
	return providerAdd(fs, newClient(cfg), cfg.Home, stdin, stdout, stderr)
}

func providerSynopsis(sub string) string {
	switch sub {
	case "list":
		return "provider list [--json]"
	case "remove":
		return "provider remove NAME   (uninstall and unbind; the key stays in the vault)"
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

// providerAdd installs the provider's package (installProvider), stores
// the key in the vault and binds it with the provider's placeholder
// variables. Every input is checked before anything changes; a failure
// after the install removes what this run installed. Running it again
// updates the key, and for an OpenAI-compatible provider the host.
func providerAdd(fs *pflag.FlagSet, c *admin.Client, home string, stdin io.Reader, stdout, stderr io.Writer) error {
	p, err := providerFor(fs)
	if err != nil {
		return err
	}
	sub, _ := fs.GetBool("subscription")
	key, err := readKey(fs, stdin, p, sub)
	if err != nil {
		return err
	}
	b, kind := providerBinding(p, sub)
	if msg := credentials.EnvsProblem(b.Env); msg != "" {
		return usagef("--env: %s", msg)
	}
	if _, _, err := credentials.ParseSecretInput(kind, key, "", ""); err != nil {
		return fmt.Errorf("the %s key: %w", p.Name, err)
	}
	ctx := context.Background()
	if err := checkEnvFree(ctx, c, p); err != nil {
		return err
	}
	warnLocalHost(stderr, p)
	in, err := installProvider(ctx, c, home, p)
	if err != nil {
		return err
	}
	if err := storeAndBind(ctx, c, p, b, kind, key); err != nil {
		if in.fresh {
			_ = c.RemoveConnector(context.Background(), in.inst.Ref()) // the versions before stay
		}
		return err
	}
	for _, ref := range in.stale { // an older host of this provider
		if err := c.RemoveConnector(ctx, ref); err != nil {
			fmt.Fprintf(stderr, "warning: %s replaces %s, which stays installed but inactive: %v\n", in.inst.Ref(), ref, err)
		}
	}
	fmt.Fprintf(stdout, "provider %s ready: %s installed, key stored as credential %s\n", p.Name, in.inst.Ref(), p.Credential)
	fmt.Fprintf(stdout, "sandboxes get a placeholder in %s (`aileron session env ID`); the proxy sends the real key\n", strings.Join(p.KeyEnv, ", "))
	if p.Compatible {
		fmt.Fprintf(stdout, "point clients at it: %s=%s\n", p.BaseURLEnv, p.BaseURL)
	}
	return nil
}

// providerBinding is the binding provider add makes for p, and the kind
// of its key.
func providerBinding(p providers.Provider, subscription bool) (credentials.Binding, string) {
	b := credentials.Binding{Connector: p.FQN, Credential: p.Credential, Env: strings.Join(p.KeyEnv, ",")}
	if subscription { // an OAuth token: always Authorization: Bearer, never x-api-key
		b.Header, b.Format = "Authorization", "Bearer {token}"
		return b, "bearer"
	}
	return b, "api_key"
}

// storeAndBind stores the key as p's credential and binds it; a
// credential this run created is deleted again when the binding fails.
func storeAndBind(ctx context.Context, c *admin.Client, p providers.Provider, b credentials.Binding, kind string, key []byte) error {
	creds, err := c.ListCredentials(ctx)
	if err != nil {
		return err
	}
	had := slices.ContainsFunc(creds, func(i credentials.Info) bool { return i.Name == p.Credential })
	if _, err := c.SetCredential(ctx, admin.SetCredentialRequest{Name: p.Credential, Kind: kind, Input: string(key)}); err != nil {
		return fmt.Errorf("storing the %s key: %w", p.Name, err)
	}
	if _, err := c.Bind(ctx, b); err != nil {
		if !had {
			_ = c.DeleteCredential(context.Background(), p.Credential)
		}
		return fmt.Errorf("binding the %s key: %w", p.Name, err)
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

// providerRemove uninstalls every version of the provider's package and
// removes its binding. The key stays in the vault, as the output says.
func providerRemove(fs *pflag.FlagSet, c *admin.Client, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one provider name, as `aileron provider list` shows it")
	}
	name := fs.Arg(0)
	p, ok := providers.Lookup(name)
	if !ok {
		var err error
		if p, err = providers.Compatible(name, "localhost", nil); err != nil { // the host is not needed here
			return usagef("unknown provider %q; `aileron provider list` shows the installed ones", name)
		}
	}
	f, err := providerFacts(context.Background(), c)
	if err != nil {
		return err
	}
	st := f.Status(p)
	if !st.Installed && !st.Bound {
		return fmt.Errorf("provider %s is not installed (see `aileron provider list`)", name)
	}
	ctx := context.Background()
	if st.Bound {
		if err := c.Unbind(ctx, p.FQN); err != nil {
			return fmt.Errorf("unbinding %s: %w", p.FQN, err)
		}
	}
	inst, err := c.ListConnectors(ctx)
	if err != nil {
		return err
	}
	for _, i := range inst {
		if i.FQN == p.FQN {
			if err := c.RemoveConnector(ctx, i.Ref()); err != nil {
				return fmt.Errorf("removing %s: %w", i.Ref(), err)
			}
		}
	}
	fmt.Fprintf(stdout, "provider %s removed: %s uninstalled and unbound; its key stays in the vault as credential %s "+
		"(`aileron credential delete %s` removes it, `aileron provider add` uses it again)\n", name, p.FQN, p.Credential, p.Credential)
	return nil
}
