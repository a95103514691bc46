package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/config"
	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/store"
)

// consentFlags are how `connector install` and `connector approve` may
// consent without asking.
type consentFlags struct {
	yes  bool
	lock string // install only
	// expect is --expect's hash (lower-case hex) or empty; from names where
	// the package came from in its refusal. The offer's hash must be
	// expect, and the consent names that hash, so the daemon installs
	// exactly those bytes.
	expect, from string
	opts         store.InstallOptions
}

// installer is the store an install goes to: the daemon's, through its
// admin API, or, with the daemon not running, the store itself.
type installer interface {
	offer(ctx context.Context, path string, opts store.InstallOptions) (store.Offer, error)
	install(ctx context.Context, path string, opts store.InstallOptions, c store.Consent) (store.Installed, error)
}

type daemonStore struct{ c *admin.Client }

func (d daemonStore) offer(ctx context.Context, path string, opts store.InstallOptions) (store.Offer, error) {
	return d.c.OfferConnectorWith(ctx, admin.InstallRequest{Path: path, AllowUnpinned: opts.AllowUnpinned, FetchedFrom: opts.FetchedFrom})
}

func (d daemonStore) install(ctx context.Context, path string, opts store.InstallOptions, c store.Consent) (store.Installed, error) {
	return d.c.InstallConnectorWith(ctx, admin.InstallRequest{Path: path, AllowUnpinned: opts.AllowUnpinned, FetchedFrom: opts.FetchedFrom, Consent: &c})
}

type localStore struct{ st *store.Store }

func (l localStore) offer(ctx context.Context, path string, opts store.InstallOptions) (store.Offer, error) {
	return l.st.OfferWith(ctx, path, opts)
}

func (l localStore) install(ctx context.Context, path string, opts store.InstallOptions, c store.Consent) (store.Installed, error) {
	active, _ := l.st.Load(ctx)
	c.By = osUser()
	return l.st.InstallWith(ctx, path, active, opts, c)
}

// osUser names the OS user running the CLI, who consents to an offline
// install.
func osUser() string {
	u, err := user.Current()
	if err != nil {
		return fmt.Sprintf("uid %d (offline)", os.Getuid())
	}
	return "uid " + u.Uid + " (" + u.Username + ", offline)"
}

func connectorInstall(cfg *config.Config, c *admin.Client, path string, f consentFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx := context.Background()
	var lock store.Lock
	if f.lock != "" {
		data, err := os.ReadFile(f.lock)
		if err != nil {
			return fmt.Errorf("reading the lock: %w", err)
		}
		if lock, err = store.ParseLock(f.lock, data); err != nil {
			return err
		}
	}
	err := installFlow(ctx, daemonStore{c}, path, f, lock, stdin, stdout, stderr)
	if !errors.Is(err, admin.ErrDaemonUnreachable) {
		return err
	}
	return offline(ctx, cfg, func(st *store.Store) error {
		return installFlow(ctx, localStore{st}, path, f, lock, stdin, stdout, stderr)
	})
}

// installFlow shows what the package at path asks, gets a consent (the
// lock, --yes, or a human at the terminal) and installs it.
func installFlow(ctx context.Context, in installer, path string, f consentFlags, lock store.Lock, stdin io.Reader, stdout, stderr io.Writer) error {
	offer, err := in.offer(ctx, path, f.opts)
	if err != nil {
		return err
	}
	if f.expect != "" && offer.Hash != f.expect {
		return fmt.Errorf("the package from %s has hash sha256:%s, but --expect wants sha256:%s; nothing was installed "+
			"(check where it came from before changing --expect)", printable.Line(f.from), offer.Hash, f.expect)
	}
	showOffer(stderr, offer)
	var consent store.Consent
	switch {
	case lock != nil:
		if consent, err = lockConsent(offer, lock, f.lock); err != nil {
			return err
		}
	case f.yes:
		consent = store.Consent{Hash: offer.Hash, Via: store.ViaYes}
	default:
		if err := ask(stdin, stderr, "Install "+offer.Ref()+"?", "--yes, or --lock FILE"); err != nil {
			return err
		}
		consent = store.Consent{Hash: offer.Hash, Via: store.ViaTerminal}
	}
	inst, err := in.install(ctx, path, f.opts, consent)
	if err != nil {
		return err
	}
	if _, ok := in.(localStore); ok {
		fmt.Fprintln(stdout, "(daemon not running: installed into the store; it takes effect when the daemon starts)")
	}
	fmt.Fprintf(stdout, "installed %s@%s sha256:%s\n", inst.FQN, inst.Version, inst.Hash)
	fmt.Fprintln(stdout, store.DescribeSignature(inst.Signature))
	if inst.Grants.FromManifest {
		fmt.Fprintf(stdout, "grants (its manifest.toml): %s\n", describeGrants(inst.Grants))
	} else {
		fmt.Fprintf(stdout, "grants (no manifest: exactly what its spec reaches): %s\n", describeGrants(inst.Grants))
	}
	printActionPins(stdout, inst.Actions)
	if f.expect != "" {
		fmt.Fprintln(stdout, "hash matches --expect")
	}
	if inst.Quarantined {
		fmt.Fprintf(stdout, "QUARANTINED: it asks for more than %s@%s, which keeps serving: %s\n"+
			"to serve it: aileron connector approve %s\n", inst.FQN, offer.Active,
			printable.Line(strings.Join(inst.Widening, "; ")), inst.Ref())
	}
	return nil
}

// lockConsent is the consent lock gives to offer: its entry must record
// the same hash and no less than the package asks.
func lockConsent(offer store.Offer, lock store.Lock, file string) (store.Consent, error) {
	entry, ok := lock[offer.Ref()]
	if !ok {
		return store.Consent{}, fmt.Errorf("%s is not in the lock %s: nothing installed; install it without --lock to be asked, then write a new lock",
			offer.Ref(), file)
	}
	if entry.Hash != offer.Hash {
		return store.Consent{}, fmt.Errorf("the package of %s does not match the lock %s:\n  locked:  sha256:%s\n  package: sha256:%s\n"+
			"nothing installed; install the package the lock was written from, or install without --lock to be asked and write a new lock",
			offer.Ref(), file, entry.Hash, offer.Hash)
	}
	if more := offer.Exceeds(entry); len(more) > 0 {
		return store.Consent{}, fmt.Errorf("%s asks for more than the lock %s records: %s", offer.Ref(), file, strings.Join(more, "; "))
	}
	return store.Consent{Hash: offer.Hash, Via: store.ViaLock, Lock: &entry}, nil
}

// ask asks a yes/no question on the terminal. Without a terminal it
// refuses, naming the flags that consent without one (alt).
func ask(stdin io.Reader, stderr io.Writer, question, alt string) error {
	f, ok := stdin.(*os.File)
	if !ok || !isTerminal(f) {
		return usagef("nobody can be asked: stdin is not a terminal; to consent to what is shown above, rerun with %s", alt)
	}
	fmt.Fprintf(stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("no answer: %w; nothing done", err)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not consented: nothing done")
}

// showOffer prints what a package asks for, for its consent.
func showOffer(w io.Writer, o store.Offer) {
	pr := func(s string) string { return printable.Line(s) }
	none := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return pr(strings.Join(l, ", "))
	}
	ops := func(l []string) string { // one operation a line: each names its method and path
		if len(l) == 0 {
			return "none"
		}
		out := make([]string, len(l))
		for i, op := range l {
			out[i] = pr(op)
		}
		return strings.Join(out, ",\n                      ")
	}
	g := o.Grants
	fmt.Fprintf(w, "%s asks for:\n", pr(o.Ref()))
	fmt.Fprintf(w, "  hosts:              %s\n", none(g.Hosts))
	cred := none(g.CredentialKinds)
	if g.CredentialScope != "" {
		cred += " (scope: " + pr(g.CredentialScope) + ")"
	}
	fmt.Fprintf(w, "  credential:         %s\n", cred)
	if len(g.OAuthScopes) > 0 {
		fmt.Fprintf(w, "  OAuth scopes:       %s\n", none(g.OAuthScopes))
	}
	if g.OAuthTokenURL != "" {
		fmt.Fprintf(w, "  OAuth app:          client %s, authorize %s, token %s\n",
			pr(g.OAuthClientID), pr(g.OAuthAuthorizeURL), pr(g.OAuthTokenURL))
	}
	fmt.Fprintf(w, "  with approval:      %s\n", ops(o.Approval))
	fmt.Fprintf(w, "  without approval:   %s\n", ops(o.NoApproval))
	fmt.Fprintf(w, "  actions:            %s\n", none(o.Actions))
	fmt.Fprintf(w, "  runtime imports:    %s\n", none(g.Imports))
	fmt.Fprintf(w, "  signature:          %s\n", pr(store.DescribeSignature(o.Signature)))
	fmt.Fprintf(w, "  hash:               sha256:%s\n", o.Hash)
	if !g.FromManifest {
		fmt.Fprintln(w, "  (no manifest.toml: it asks exactly what its spec reaches)")
	}
	if o.Active != "" && len(o.Widening) > 0 {
		fmt.Fprintf(w, "It asks for more than %s@%s, which is served now: it will be installed but QUARANTINED until approved:\n",
			pr(o.FQN), pr(o.Active))
		for _, m := range o.Widening {
			fmt.Fprintf(w, "  + %s\n", pr(m))
		}
	}
}

// connectorApprove shows how the quarantined version ref asks for more
// than the active version, asks (or --yes), and activates it.
func connectorApprove(cfg *config.Config, c *admin.Client, ref string, f consentFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	ctx := context.Background()
	o, err := c.PendingConnector(ctx, ref)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		return offline(ctx, cfg, func(st *store.Store) error {
			local := func(ctx context.Context, ref string, cons store.Consent) (store.Installed, error) {
				active, _ := st.Load(ctx)
				cons.By, cons.Via = osUser(), store.ViaApprove
				return st.Approve(ctx, ref, active, cons)
			}
			o, err := st.Pending(ctx, ref)
			if err != nil {
				return err
			}
			return approveFlow(ctx, o, local, f, stdin, stdout, stderr)
		})
	}
	if err != nil {
		return err
	}
	return approveFlow(ctx, o, c.ApproveConnector, f, stdin, stdout, stderr)
}

func approveFlow(ctx context.Context, o store.Offer, approve func(context.Context, string, store.Consent) (store.Installed, error),
	f consentFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "%s (sha256:%s) asks for more than %s@%s, which is served now:\n",
		printable.Line(o.Ref()), o.Hash, printable.Line(o.FQN), printable.Line(o.Active))
	for _, m := range o.Widening {
		fmt.Fprintf(stderr, "  + %s\n", printable.Line(m))
	}
	if !f.yes {
		if err := ask(stdin, stderr, "Approve "+o.Ref()+" and serve it?", "--yes"); err != nil {
			return err
		}
	}
	inst, err := approve(ctx, o.Ref(), store.Consent{Hash: o.Hash, Via: store.ViaApprove})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "approved %s sha256:%s: it is now the version served\n", inst.Ref(), inst.Hash)
	return nil
}

// connectorLock prints the lock of every consented version.
func connectorLock(cfg *config.Config, c *admin.Client, stdout io.Writer) error {
	ctx := context.Background()
	list, err := c.ConnectorConsents(ctx)
	if errors.Is(err, admin.ErrDaemonUnreachable) {
		err = offline(ctx, cfg, func(st *store.Store) (lerr error) {
			list, lerr = st.Consents(ctx)
			return lerr
		})
	}
	if err != nil {
		return err
	}
	text, err := store.RenderLock(list)
	if err != nil {
		return err
	}
	_, err = stdout.Write(text)
	return err
}
