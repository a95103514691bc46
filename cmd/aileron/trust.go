package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/store"
)

// cmdTrust manages the trust store: which keys may sign connector packages
// for each publisher authority.
func cmdTrust(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: add, list or remove")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("trust "+sub, trustSynopsis(sub), stderr)
	_, cfgFile := clientFlags(fs)
	asJSON, signers := new(bool), new(string)
	switch sub {
	case "list":
		asJSON = fs.Bool("json", false, "print JSON")
	case "add":
		signers = fs.String("signers", "", "the authority's allowed_signers file, in ssh's format (- for stdin); it replaces the authority's signers")
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	c := newClient(cfg)
	switch sub {
	case "add":
		if fs.NArg() != 1 || *signers == "" {
			return usagef("want one AUTHORITY and --signers FILE, e.g. aileron trust add github://acme --signers acme.allowed_signers")
		}
		return trustAdd(cfg, c, fs.Arg(0), *signers, stdin, stdout)
	case "list":
		return trustList(cfg, c, *asJSON, stdout)
	case "remove":
		if fs.NArg() != 1 {
			return usagef("want one AUTHORITY, e.g. github://acme")
		}
		return trustRemove(cfg, c, fs.Arg(0), stdout)
	}
	return unknownSubcommand("trust", sub)
}

// trustSynopsis is the usage of a trust subcommand.
func trustSynopsis(sub string) string {
	switch sub {
	case "add":
		return "trust add AUTHORITY --signers FILE\n\n" +
			"Sets the keys that may sign connector packages for AUTHORITY (scheme://owner: github://acme, gitlab://team,\n" +
			"hub://owner), replacing any it had. FILE is in ssh's allowed_signers format (ssh-keygen(1)): one key a line,\n" +
			"\"principals [options] keytype base64-key\", with valid-after=\"YYYYMMDDZ\" and valid-before=\"…Z\" for\n" +
			"rotation and namespaces=\"aileron-connector\" to limit a key. Prints each key's fingerprint. See docs/connectors.md."
	case "remove":
		return "trust remove AUTHORITY   (its packages are then shown as signed by a key not trusted)"
	}
	return "trust " + sub + " [--json]"
}

func trustAdd(cfg *config.Config, c *admin.Client, authority, file string, stdin io.Reader, stdout io.Writer) error {
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("--signers: %w; give the authority's allowed_signers file, or - to read it on stdin", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, store.MaxAllowedSigners+1))
	if err != nil {
		return fmt.Errorf("reading %s: %w", file, err)
	}
	if len(data) > store.MaxAllowedSigners {
		return fmt.Errorf("%s is over %d bytes, the limit for an allowed_signers file", file, store.MaxAllowedSigners)
	}
	// Check the file here first, so that its errors name it as given.
	if _, err := signing.ParseAllowedSigners(file, data); err != nil {
		return err
	}
	ctx := context.Background()
	ta, err := c.Trust(ctx, authority, file, data)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) (terr error) {
			ta, terr = st.Trust(ctx, authority, file, data)
			return terr
		})
	}
	if err != nil {
		return err
	}
	valid := 0
	for _, s := range ta.Signers {
		if s.ValidAt(time.Now()) {
			valid++
		}
	}
	if valid == len(ta.Signers) {
		fmt.Fprintf(stdout, "trusted %s: %d key(s) may sign its packages\n", ta.Authority, len(ta.Signers))
	} else {
		fmt.Fprintf(stdout, "trusted %s: %d key(s) listed; %d may sign its packages now\n", ta.Authority, len(ta.Signers), valid)
	}
	for _, s := range ta.Signers {
		fmt.Fprintf(stdout, "  %s %s %s%s\n", s.Fingerprint, s.KeyType, printable.Line(s.Principals), validity(s, " "))
	}
	return nil
}

func trustList(cfg *config.Config, c *admin.Client, asJSON bool, stdout io.Writer) error {
	ctx := context.Background()
	list, err := c.TrustList(ctx)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) (lerr error) {
			list, lerr = st.TrustList(ctx)
			return lerr
		})
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, append([]store.TrustedAuthority{}, list...))
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no publisher is trusted; add one with `aileron trust add AUTHORITY --signers FILE`")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AUTHORITY\tKEY\tTYPE\tPRINCIPALS\tVALID")
	for _, a := range list {
		for _, s := range a.Signers {
			v := validity(s, "")
			if v == "" {
				v = "always"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Authority, s.Fingerprint, s.KeyType, printable.Line(s.Principals), v)
		}
	}
	return tw.Flush()
}

// validity describes when, and for what, a signer may sign, and whether it
// may sign packages now: "" when always, for packages; else prefixed with
// sep.
func validity(s signing.Signer, sep string) string {
	var parts []string
	if !s.ValidAfter.IsZero() {
		parts = append(parts, "from "+s.ValidAfter.UTC().Format(time.RFC3339))
	}
	if !s.ValidBefore.IsZero() {
		parts = append(parts, "until "+s.ValidBefore.UTC().Format(time.RFC3339))
	}
	if s.Namespaces != "" {
		parts = append(parts, "namespaces "+printable.Line(s.Namespaces))
	}
	if len(parts) == 0 {
		return ""
	}
	if !s.ValidAt(time.Now()) {
		parts = append(parts, "NOT VALID NOW")
	}
	return sep + strings.Join(parts, ", ")
}

func trustRemove(cfg *config.Config, c *admin.Client, authority string, stdout io.Writer) error {
	ctx := context.Background()
	err := c.Untrust(ctx, authority)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) error { return st.Untrust(ctx, authority) })
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %s from the trust store\n", authority)
	return nil
}
