package pkgsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// Source is one place FQN@VERSION is looked up: a release convention
// under a base URL (Authority "github" or "gitlab"), or a local mirror
// directory (Mirror).
//
// github: {base_url}/{owner}/{repo}/releases/download/{tag}/{name}-{VERSION}.tar.gz
// gitlab: {base_url}/api/v4/projects/{owner}%2F{repo}/packages/generic/{name}/{VERSION}/{name}-{VERSION}.tar.gz
// mirror: {mirror}/{scheme}/{owner}/{repo}[/{subpath}]/{VERSION}.tar.gz
//
// {name} is the FQN's last path element (the repo, or the subpath's last
// element), and {tag} is v{VERSION}, or {subpath}/v{VERSION} (escaped as
// one path element) for an FQN with a subpath, as Go tags a module in a
// subdirectory. A github or gitlab source serves only FQNs of its scheme;
// a mirror serves every scheme.
type Source struct {
	Authority string // "github" or "gitlab"; "" for a mirror
	BaseURL   string // https base URL of a github or gitlab source
	Mirror    string // absolute path of a mirror directory
}

// String names the source in messages.
func (s Source) String() string {
	if s.Mirror != "" {
		return "mirror " + s.Mirror
	}
	return s.Authority + " " + s.BaseURL
}

// Locate returns where s keeps fqn@version (an https URL or a file path),
// or "" when s does not serve fqn's scheme. fqn must pass policy.CheckFQN.
func (s Source) Locate(fqn, version string) string {
	scheme, rest, _ := strings.Cut(fqn, "://")
	parts := strings.Split(rest, "/")
	if s.Mirror != "" {
		elems := append([]string{s.Mirror, scheme}, parts...)
		return filepath.Join(append(elems, version+".tar.gz")...)
	}
	if scheme != s.Authority || len(parts) < 2 {
		return ""
	}
	owner, repo, sub := parts[0], parts[1], parts[2:]
	name := parts[len(parts)-1]
	asset := url.PathEscape(name + "-" + version + ".tar.gz")
	base := strings.TrimSuffix(s.BaseURL, "/")
	switch s.Authority {
	case "github":
		tag := "v" + version
		if len(sub) > 0 {
			tag = strings.Join(sub, "/") + "/" + tag
		}
		return base + "/" + url.PathEscape(owner) + "/" + url.PathEscape(repo) + "/releases/download/" + url.PathEscape(tag) + "/" + asset
	case "gitlab":
		project := url.PathEscape(owner + "/" + repo)
		return base + "/api/v4/projects/" + project + "/packages/generic/" + url.PathEscape(name) + "/" + url.PathEscape(version) + "/" + asset
	}
	return ""
}

// Resolver finds FQN@VERSION in its sources, tried in order.
type Resolver struct {
	Sources []Source
	// Fetcher fetches from github and gitlab sources; nil means a zero
	// Fetcher (the system roots, a zero dataplane.Guard).
	Fetcher *Fetcher
}

// Resolve unpacks the package ref (FQN@VERSION) into dir from the first
// source that has it, and returns its root and where it came from. A
// source that does not have it (ErrNotFound) passes to the next; any other
// failure stops the search, so that a source that is down is never
// silently skipped. A miss everywhere wraps ErrNotFound and names every
// place tried.
func (r *Resolver) Resolve(ctx context.Context, ref, dir string) (root, from string, err error) {
	fqn, version, err := policy.ParseRef(ref)
	if err != nil {
		return "", "", err
	}
	if len(r.Sources) == 0 {
		return "", "", fmt.Errorf("%s: %w: no store.sources are configured; add a github, gitlab or mirror source to the config file, or install an archive or directory", ref, ErrNotFound)
	}
	var tried []string
	for _, s := range r.Sources {
		loc := s.Locate(fqn, version)
		if loc == "" {
			tried = append(tried, s.String()+" (serves no "+strings.SplitN(fqn, "://", 2)[0]+":// FQN)")
			continue
		}
		root, err := r.unpackFrom(ctx, s, loc, dir)
		if errors.Is(err, ErrNotFound) {
			tried = append(tried, loc)
			continue
		}
		if err != nil {
			return "", "", fmt.Errorf("%s from %s: %w", ref, s, err)
		}
		return root, loc, nil
	}
	return "", "", fmt.Errorf("%s: %w in store.sources; tried:\n  %s", ref, ErrNotFound, strings.Join(tried, "\n  "))
}

// unpackFrom unpacks the archive at loc (a mirror file or an https URL).
func (r *Resolver) unpackFrom(ctx context.Context, s Source, loc, dir string) (string, error) {
	if s.Mirror == "" {
		f := r.Fetcher
		if f == nil {
			f = &Fetcher{}
		}
		return f.Unpack(ctx, loc, dir)
	}
	return UnpackFile(loc, dir)
}

// UnpackFile unpacks the archive file at p into dir as Unpack does. A
// file that does not exist wraps ErrNotFound.
func UnpackFile(p, dir string) (string, error) {
	info, err := os.Stat(p) // before opening: opening a FIFO waits for a writer
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %w", p, ErrNotFound)
	}
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file; a package archive is a .tar.gz file", p)
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return Unpack(&capReader{r: f, left: MaxArchiveSize, limit: MaxArchiveSize, url: p}, dir)
}
