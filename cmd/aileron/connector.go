package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/manifest"
	"github.com/aileronhq/aileron/pkgsource"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/signing"
	"github.com/aileronhq/aileron/store"
)

func cmdConnector(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("want a subcommand: install, list, verify, remove, approve, lock or statement")
	}
	sub, rest := args[0], args[1:]
	fs := newFlags("connector "+sub, connectorSynopsis(sub), stderr)
	cfgFile := new(string)
	if sub != "statement" {
		_, cfgFile = clientFlags(fs)
	}
	asJSON, expect := new(bool), new(string)
	if sub == "list" || sub == "verify" {
		asJSON = fs.Bool("json", false, "print JSON")
	}
	var cf consentFlags
	if sub == "install" || sub == "approve" {
		fs.BoolVar(&cf.yes, "yes", false, "consent to what is shown without being asked (needed when stdin is not a terminal)")
	}
	if sub == "install" {
		fs.StringVar(&cf.lock, "lock", "", "consent as the lock `FILE` records (aileron connector lock): the same hash, no more grants; no prompt")
		fs.BoolVar(&cf.opts.AllowUnpinned, "allow-unpinned", false, allowUnpinnedHelp)
		expect = fs.String("expect", "", "sha256:HEX: install only a package with this hash (as install and list print it)")
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if sub == "statement" { // the publisher's side: no daemon, no home
		if fs.NArg() != 1 {
			return usagef("want one package directory or archive (.tar.gz)")
		}
		return connectorStatement(fs.Arg(0), stdout, stderr)
	}
	if cf.yes && cf.lock != "" {
		return usagef("--yes and --lock exclude each other: --lock installs only what the lock records")
	}
	cfg, err := loadClientConfig(fs, *cfgFile)
	if err != nil {
		return err
	}
	c := newClient(cfg)
	switch sub {
	case "install":
		if fs.NArg() != 1 {
			return usagef("want one PATH: a spec file, a package directory or archive (.tar.gz), an https URL of one, FQN@VERSION, or - for a spec or archive on stdin")
		}
		if fs.Arg(0) == "-" && !cf.yes && cf.lock == "" {
			return usagef("a package on stdin leaves no terminal to ask on: add --yes, or --lock FILE")
		}
		return connectorInstallFrom(cfg, c, fs.Arg(0), *expect, cf, stdin, stdout, stderr)
	case "list":
		return connectorList(cfg, c, *asJSON, stdout)
	case "verify":
		return connectorVerify(cfg, c, *asJSON, stdout)
	case "remove", "approve":
		if fs.NArg() != 1 {
			return usagef("want one reference FQN@VERSION, e.g. github://acme/google@1.2.3")
		}
		if sub == "approve" {
			return connectorApprove(cfg, c, fs.Arg(0), cf, stdin, stdout, stderr)
		}
		return connectorRemove(cfg, c, fs.Arg(0), stdout)
	case "lock":
		if fs.NArg() != 0 {
			return usagef("connector lock takes no arguments; redirect its output to a file: aileron connector lock > aileron.lock")
		}
		return connectorLock(cfg, c, stdout)
	}
	return unknownSubcommand("connector", sub)
}

// offline runs fn on the store the daemon would use, over its database, for
// when the daemon is not running: changes take effect at its next start.
func offline(ctx context.Context, cfg *config.Config, fn func(*store.Store) error) error {
	db, err := openState(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(&store.Store{Dir: filepath.Join(cfg.Home, "store"), DB: db, RequireSignature: cfg.Store.RequireSignature})
}

// connectorSynopsis is the usage of a connector subcommand.
func connectorSynopsis(sub string) string {
	switch sub {
	case "install":
		return "connector install [--yes | --lock FILE] [--expect sha256:HEX] [--allow-unpinned] PATH|ARCHIVE|URL|FQN@VERSION|-\n\n" +
			"Install shows what the package asks for (hosts, credential and scopes, operations with and without\n" +
			"approval, actions, runtime imports, signature, hash) and asks on the terminal; without one it needs --yes,\n" +
			"or --lock FILE to install only what a lock file records (same hash, no more grants). The consent is\n" +
			"recorded. An upgrade that asks for more than the version served is installed but quarantined until\n" +
			"`aileron connector approve`. See docs/connectors.md, \"Consent\".\n\n" +
			"PATH is a spec file or a package directory; ARCHIVE a package archive (.tar.gz); URL an https URL of\n" +
			"one; FQN@VERSION (github://acme/gmail@1.2.3) is looked up in store.sources of the config (--config), in\n" +
			"order; - reads a spec's JSON or a package archive on stdin. Fetches are https only, TLS verified with\n" +
			"upstream.ca_files, and pass the SSRF guard (upstream.resolve, egress.allow_cidrs). An archive is unpacked\n" +
			"strictly (regular files and directories only, no links or paths outside it, bounded sizes). --expect\n" +
			"refuses a package whose hash differs, before installing it.\n\n" +
			"A package's manifest.toml bounds what its spec may reach: a spec that reaches a host:port or credential\n" +
			"kind the manifest does not grant is refused, naming each. Without a manifest the package is granted\n" +
			"exactly what its spec reaches. Install prints the grants; see docs/connectors.md.\n\n" +
			"Each action must pin what it requires: hash = \"self\" for its own package, the installed sha256 for\n" +
			"another; a wrong hash, or a step beyond the action's capabilities, is refused (docs/connectors.md,\n" +
			"Actions: pins and capabilities).\n\n" +
			"A package (directory or archive) may carry its publisher's signature (" + store.SignatureFileName + "); install prints,\n" +
			"after its first line, \"signed by AUTHORITY (SHA256:…)\", \"unsigned\" or \"signed by a key not trusted for AUTHORITY\n" +
			"(SHA256:…)\" (see aileron trust), and refuses a signature that does not verify, and, with\n" +
			"store.require_signature, any package not signed by a trusted key (local:// excepted, unless fetched from a URL).\n" +
			"A signature never stands in for the consent."
	case "remove":
		return "connector remove FQN@VERSION"
	case "approve":
		return "connector approve [--yes] FQN@VERSION\n\n" +
			"Shows how a quarantined version asks for more than the version served, asks on the terminal (or --yes),\n" +
			"then serves it."
	case "lock":
		return "connector lock   (prints the lock file: every consented FQN@VERSION, its hash, grants and signer)\n\n" +
			"Replay it elsewhere with `aileron connector install PATH --lock FILE`."
	case "statement":
		return "connector statement DIR|ARCHIVE\n\n" +
			"Prints the statement a publisher signs for the package directory DIR, or for what the package archive\n" +
			"ARCHIVE (.tar.gz, unpacked as install unpacks it) holds: its FQN, version and package hash (which leaves\n" +
			"out " + store.SignatureFileName + "; every other file counts, so a git checkout's .git would too: give a\n" +
			"`git archive` of it). The spec and manifest are checked as install checks them, so a package install\n" +
			"would refuse gets that error instead. Sign it and ship the signature in the package:\n" +
			"  aileron connector statement DIR > statement\n" +
			"  ssh-keygen -Y sign -n " + signing.Namespace + " -f KEY statement\n" +
			"  mv statement.sig DIR/" + store.SignatureFileName + "\n" +
			"See docs/connectors.md, \"Signing a package\"."
	}
	return "connector " + sub + " [--json]"
}

// connectorInstallStdin installs a spec read from stdin (a container image
// without a shell: docker exec -i aileron aileron connector install --yes - < spec.json),
// through a file in the home that the daemon can read, removed after.
func connectorInstallStdin(cfg *config.Config, c *admin.Client, cf consentFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	b, err := io.ReadAll(io.LimitReader(stdin, 4<<20+1))
	if err != nil {
		return err
	}
	if len(b) > 4<<20 {
		return usagef("the spec on stdin is over 4 MiB; install a package directory instead")
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(cfg.Home, "stdin-spec-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	return connectorInstall(cfg, c, path, cf, stdin, stdout, stderr)
}

// describeGrants renders a package's grants on one line.
func describeGrants(g manifest.Grants) string {
	hosts, kinds := "none", "none"
	if len(g.Hosts) > 0 {
		hosts = strings.Join(g.Hosts, ",")
	}
	if len(g.CredentialKinds) > 0 {
		kinds = strings.Join(g.CredentialKinds, ",")
	}
	return printable.Line("hosts " + hosts + "; credential " + kinds)
}

func connectorList(cfg *config.Config, c *admin.Client, asJSON bool, stdout io.Writer) error {
	ctx := context.Background()
	list, err := c.ListConnectors(ctx)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) (lerr error) {
			list, lerr = st.List(ctx)
			return lerr
		})
	}
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONNECTOR\tVERSION\tACTIVE\tHASH\tSIGNER\tGRANTS")
	for _, i := range list {
		active, from := "", " (spec)"
		switch {
		case i.Active:
			active = "yes"
		case i.Quarantined:
			active = "quarantined"
		}
		if i.Grants.FromManifest {
			from = " (manifest)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tsha256:%s\t%s\t%s%s\n", i.FQN, i.Version, active, i.Hash, signerColumn(i.Signature),
			describeGrants(i.Grants), from)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printUnpinned(stdout, list)
	return nil
}

// signerColumn is connector list's SIGNER: unsigned, or the key's
// fingerprint and whether it is trusted for the package's authority.
func signerColumn(v signing.Signature) string {
	switch v.Status {
	case signing.Trusted:
		return "trusted " + v.Fingerprint
	case signing.Untrusted:
		return "not-trusted " + v.Fingerprint
	}
	return "unsigned"
}

// connectorStatement prints the statement a publisher signs for the
// package directory or archive (.tar.gz) arg. An archive is unpacked as
// install unpacks it, into a temporary directory removed after: what is
// hashed is exactly what the archive holds (not a checkout's .git). A
// directory holding .git gets a note on stderr: the hash covers it.
func connectorStatement(arg string, stdout, stderr io.Writer) error {
	dir := arg
	if _, err := os.Lstat(filepath.Join(arg, ".git")); err == nil {
		fmt.Fprintf(stderr, "note: the package hash covers %s too; if you publish a git archive, sign that: "+
			"aileron connector statement ARCHIVE (docs/connectors.md, \"Publishing a package\")\n", filepath.Join(arg, ".git"))
	}
	if isArchiveFile(arg) {
		tmp, err := os.MkdirTemp("", "aileron-statement-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		if dir, err = pkgsource.UnpackFile(arg, filepath.Join(tmp, "pkg")); err != nil {
			return err
		}
	}
	stmt, err := store.PackageStatement(dir)
	if err != nil {
		return err
	}
	_, err = stdout.Write(stmt)
	return err
}

func connectorVerify(cfg *config.Config, c *admin.Client, asJSON bool, stdout io.Writer) error {
	ctx := context.Background()
	probs, err := c.VerifyConnectors(ctx)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) error {
			probs = st.Verify(ctx)
			return nil
		})
	}
	if err != nil {
		return err
	}
	if asJSON {
		if err := printJSON(stdout, probs); err != nil {
			return err
		}
	} else {
		for _, p := range probs {
			fmt.Fprintf(stdout, "%s (sha256:%s): %s\n", printable.Line(p.Ref), p.Hash, printable.Line(p.Err))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("%d package(s) failed verification; reinstall them from a trusted source or remove them", len(probs))
	}
	if !asJSON {
		fmt.Fprintln(stdout, "all installed packages match their content hashes")
	}
	return nil
}

func connectorRemove(cfg *config.Config, c *admin.Client, ref string, stdout io.Writer) error {
	ctx := context.Background()
	err := c.RemoveConnector(ctx, ref)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) error { return st.Remove(ctx, ref) })
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %s\n", ref)
	return nil
}
