package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/providers"
	"github.com/aileronhq/aileron/store"
)

// providerInstall is what installProvider did: the version installed,
// whether it was not installed before (what a rollback removes), and the
// versions it replaces (an OpenAI-compatible provider's older hosts), to
// remove once the key is bound.
type providerInstall struct {
	inst  store.Installed
	fresh bool
	stale []string
}

// installProvider writes p's package into a temporary directory of home
// (which the daemon reads) and installs it through the store's normal
// install path. An OpenAI-compatible provider installed before with other
// content (another host) gets the next version of its generated package,
// since a version's content never changes. A clash with another
// connector is one line saying what to do.
func installProvider(ctx context.Context, c *admin.Client, home string, p providers.Provider) (providerInstall, error) {
	list, err := c.ListConnectors(ctx)
	if err != nil {
		return providerInstall{}, err
	}
	var mine []store.Installed
	for _, i := range list {
		if i.FQN == p.FQN {
			mine = append(mine, i)
		}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return providerInstall{}, fmt.Errorf("writing the %s package: %w", p.Name, err)
	}
	dir, err := os.MkdirTemp(home, "provider-")
	if err != nil {
		return providerInstall{}, fmt.Errorf("writing the %s package: %w", p.Name, err)
	}
	defer os.RemoveAll(dir)
	if p.Compatible && len(mine) > 0 {
		if p.Version, err = compatibleVersion(p, mine, dir); err != nil {
			return providerInstall{}, err
		}
	}
	pkg, err := providers.WritePackage(p, filepath.Join(dir, "package"))
	if err != nil {
		return providerInstall{}, err
	}
	// The command is the consent to the package it writes: it names the
	// provider, and the host when it is one the user chose.
	offer, err := c.OfferConnector(ctx, pkg)
	if err != nil {
		return providerInstall{}, installError(p, err)
	}
	inst, err := c.InstallConnector(ctx, pkg, store.Consent{Hash: offer.Hash, Via: store.ViaProvider})
	if err != nil {
		return providerInstall{}, installError(p, err)
	}
	out := providerInstall{inst: inst, fresh: true}
	for _, i := range mine {
		switch {
		case i.Version == inst.Version:
			out.fresh = false
		case p.Compatible:
			out.stale = append(out.stale, i.Ref())
		}
	}
	return out, nil
}

// compatibleVersion is the version to write an OpenAI-compatible
// provider's package as: the installed version whose content it has, or
// else the one after the highest installed 1.0.N.
func compatibleVersion(p providers.Provider, mine []store.Installed, dir string) (string, error) {
	last := -1
	for n, i := range mine {
		p.Version = i.Version
		pkg, err := providers.WritePackage(p, filepath.Join(dir, "check-"+strconv.Itoa(n)))
		if err != nil {
			return "", err
		}
		if h, err := store.HashPackage(pkg); err == nil && h == i.Hash {
			return i.Version, nil
		}
		if rest, ok := strings.CutPrefix(i.Version, "1.0."); ok {
			if v, err := strconv.Atoi(rest); err == nil && v > last {
				last = v
			}
		}
	}
	return "1.0." + strconv.Itoa(last+1), nil
}

// fqnInMessage finds the connectors a conflict message names (FQN@VERSION).
var fqnInMessage = regexp.MustCompile(`[a-z][a-z0-9+.-]*://[^\s@()"]+@`)

// installError turns the store's conflict, which lists every clashing
// operation, into one line naming the other connector and what to do.
func installError(p providers.Provider, err error) error {
	var r *dataplane.Refusal
	if !errors.As(err, &r) || r.Reason != policy.ReasonConflict {
		return fmt.Errorf("installing the %s package: %w", p.Name, err)
	}
	var others []string
	for _, m := range fqnInMessage.FindAllString(r.Message, -1) {
		if fqn := strings.TrimSuffix(m, "@"); fqn != p.FQN && !slices.Contains(others, fqn) {
			others = append(others, fqn)
		}
	}
	what := "its operations"
	switch {
	case strings.Contains(r.Message, "is already provided by"):
		what = "its name (the tool " + p.Name + ")"
	case strings.Contains(r.Message, "matches the same requests as"):
		what = "its host " + strings.Join(p.Hosts, ", ")
	}
	fix := "choose another --host or --name, or remove the other first"
	if !p.Compatible {
		fix = "remove the other first"
	}
	var removes []string
	for _, o := range others {
		if n, ok := strings.CutPrefix(o, providers.CompatibleScheme); ok {
			removes = append(removes, "`aileron provider remove "+n+"`")
		} else {
			removes = append(removes, "`aileron connector remove "+o+"@VERSION`")
		}
	}
	if len(removes) > 0 {
		fix += " (" + strings.Join(removes, ", ") + ")"
	}
	return fmt.Errorf("provider %s cannot be installed: %s clashes with connector %s; %s",
		p.Name, what, strings.Join(others, ", "), fix)
}

// warnLocalHost warns when an OpenAI-compatible provider's host is
// localhost or a literal loopback or private address (names are not
// resolved): the session env's NO_PROXY sends clients to loopback
// directly, and the proxy dials such addresses only when
// egress.allow_cidrs lists them.
func warnLocalHost(w io.Writer, p providers.Provider) {
	if !p.Compatible || len(p.Hosts) == 0 {
		return
	}
	host := p.Hosts[0] // host, host:port, or an IPv6 address on port 443
	if _, err := netip.ParseAddr(host); err != nil {
		a, err := policy.ParseAuthority(host, 443)
		if err != nil {
			return
		}
		host = strings.ToLower(a.Host)
	}
	ip, err := netip.ParseAddr(host)
	local := host == "localhost" || strings.HasSuffix(host, ".localhost")
	switch {
	case local || err == nil && ip.Unmap().IsLoopback():
		fmt.Fprintf(w, "warning: %s is loopback: clients in a session do not use the proxy for it (NO_PROXY holds localhost, 127.0.0.1, ::1), "+
			"so they would reach it directly with the placeholder, and the proxy dials it only when egress.allow_cidrs lists it; "+
			"give the server a non-loopback address or name, served over HTTPS with its root in upstream.ca_files (see docs/agents.md)\n", p.Hosts[0])
	case err == nil && (ip.Unmap().IsPrivate() || ip.Unmap().IsLinkLocalUnicast() || ip.IsUnspecified() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip.Unmap())):
		fmt.Fprintf(w, "warning: %s is a private address: the proxy dials it only when egress.allow_cidrs lists it, "+
			"and the server must serve HTTPS with its root in upstream.ca_files (see docs/agents.md)\n", p.Hosts[0])
	}
}
