package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/credentials"
)

const credentialKinds = "api_key, bearer, basic, oauth2 or aws_sigv4"

func cmdCredential(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: set, login, list, delete, bind or unbind")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("credential "+sub, credentialSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	run, ok := map[string]func(*pflag.FlagSet, *admin.Client, io.Reader, io.Writer) error{
		"set": credentialSet, "list": credentialList, "delete": credentialDelete,
		"bind": credentialBind, "unbind": credentialUnbind, "login": credentialLogin,
	}[sub]
	if !ok {
		return unknownSubcommand("credential", sub)
	}
	credentialFlags(sub, fs)
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	return run(fs, newClient(cfg), stdin, stdout)
}

func credentialSynopsis(sub string) string {
	switch sub {
	case "set":
		return "credential set NAME --kind KIND [--username U] [--service S] [--from-file F]   (secret on stdin)"
	case "login":
		return "credential login NAME --connector FQN [--no-browser] [--timeout D]\n\n" +
			"Logs in with the OAuth app that the active version of connector FQN names in its manifest\n" +
			"([capabilities.credential.oauth2]): the authorization code flow with PKCE (S256). It prints the authorize\n" +
			"URL (and opens a browser where there is a display) and waits for the provider to send the browser back to\n" +
			"http://127.0.0.1:PORT/callback, on a random port. The daemon, which must be running, redeems the code,\n" +
			"stores the token set as the oauth2 credential NAME and binds it to FQN; logging in again rotates it.\n" +
			"See docs/credentials.md, \"OAuth login\"."
	case "bind":
		return "credential bind FQN --credential NAME [--header H] [--format F] [--query Q] [--env VAR[,VAR…]]"
	case "delete":
		return "credential delete NAME"
	case "unbind":
		return "credential unbind FQN"
	}
	return "credential list [--json]"
}

func credentialFlags(sub string, fs *pflag.FlagSet) {
	switch sub {
	case "set":
		fs.String("kind", "", "credential kind: "+credentialKinds)
		fs.String("username", "", "user name (basic)")
		fs.String("service", "", "AWS service name, e.g. s3 (aws_sigv4)")
		fs.String("from-file", "", "read the secret from this file instead of stdin")
	case "bind":
		fs.String("credential", "", "vault entry to use")
		fs.String("header", "", "header to put the credential in (default: the spec's, else Authorization)")
		fs.String("format", "", `header value template, e.g. "Bearer {token}" or "{key}" (default: the spec's)`)
		fs.String("query", "", "query parameter to put the credential in, instead of a header")
		fs.StringSlice("env", nil, "sandbox variables that get a placeholder value, e.g. LINEAR_API_KEY (comma-separated or repeated)")
	case "login":
		fs.String("connector", "", "the installed connector (its FQN, without @VERSION) whose manifest names the OAuth app")
		fs.Bool("no-browser", false, "only print the authorize URL; do not open a browser")
		fs.Duration("timeout", defaultLoginTimeout, "how long to wait for the browser's answer")
	case "list":
		fs.Bool("json", false, "print JSON")
	}
}

func str(fs *pflag.FlagSet, name string) string {
	v, _ := fs.GetString(name)
	return v
}

// credentialSet reads the secret from stdin or --from-file, never from the
// command line, so it stays out of shell history and process listings.
func credentialSet(fs *pflag.FlagSet, c *admin.Client, stdin io.Reader, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one credential NAME; the secret comes on stdin or --from-file, never as an argument")
	}
	if str(fs, "kind") == "" {
		return usagef("--kind is required: %s", credentialKinds)
	}
	var input []byte
	var err error
	if f := str(fs, "from-file"); f != "" {
		input, err = os.ReadFile(f)
	} else {
		input, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
	}
	if err != nil {
		return fmt.Errorf("reading the secret: %w", err)
	}
	info, err := c.SetCredential(context.Background(), admin.SetCredentialRequest{
		Name: fs.Arg(0), Kind: str(fs, "kind"), Input: string(input),
		Username: str(fs, "username"), Service: str(fs, "service"),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stored %s (%s)\n", info.Name, info.Kind)
	return nil
}

func credentialList(fs *pflag.FlagSet, c *admin.Client, _ io.Reader, stdout io.Writer) error {
	creds, err := c.ListCredentials(context.Background())
	if err != nil {
		return err
	}
	binds, err := c.ListBindings(context.Background())
	if err != nil {
		return err
	}
	if asJSON, _ := fs.GetBool("json"); asJSON {
		return printJSON(stdout, map[string]any{"credentials": creds, "bindings": binds})
	}
	bound := map[string][]string{}
	for _, b := range binds {
		bound[b.Credential] = append(bound[b.Credential], b.Connector)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tUPDATED\tEXPIRES\tBOUND TO")
	for _, cr := range creds {
		exp := "-"
		if cr.Expiry != nil && !cr.Expiry.IsZero() {
			exp = cr.Expiry.Format("2006-01-02T15:04:05Z07:00")
		}
		to := strings.Join(bound[cr.Name], ", ")
		if to == "" {
			to = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cr.Name, cr.Kind, cr.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"), exp, to)
	}
	return tw.Flush()
}

func credentialDelete(fs *pflag.FlagSet, c *admin.Client, _ io.Reader, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one credential NAME")
	}
	if err := c.DeleteCredential(context.Background(), fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deleted %s\n", fs.Arg(0))
	return nil
}

func credentialBind(fs *pflag.FlagSet, c *admin.Client, _ io.Reader, stdout io.Writer) error {
	if fs.NArg() != 1 || str(fs, "credential") == "" {
		return usagef("want a connector FQN and --credential NAME")
	}
	b, err := c.Bind(context.Background(), credentials.Binding{
		Connector: fs.Arg(0), Credential: str(fs, "credential"),
		Header: str(fs, "header"), Format: str(fs, "format"), Query: str(fs, "query"), Env: envList(fs),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bound %s to credential %s\n", b.Connector, b.Credential)
	return nil
}

// envList joins the --env values with commas, the binding's list form.
func envList(fs *pflag.FlagSet) string {
	v, _ := fs.GetStringSlice("env")
	return strings.Join(v, ",")
}

func credentialUnbind(fs *pflag.FlagSet, c *admin.Client, _ io.Reader, stdout io.Writer) error {
	if fs.NArg() != 1 {
		return usagef("want one connector FQN")
	}
	if err := c.Unbind(context.Background(), fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "unbound %s\n", fs.Arg(0))
	return nil
}
