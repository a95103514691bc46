package pkgsource

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestLocate(t *testing.T) {
	gh := Source{Authority: "github", BaseURL: "https://github.com/"}
	gl := Source{Authority: "gitlab", BaseURL: "https://gitlab.example.com"}
	mirror := Source{Mirror: "/srv/mirror"}
	for _, c := range []struct {
		src          Source
		fqn, version string
		want         string
	}{
		{gh, "github://acme/gmail", "1.2.3", "https://github.com/acme/gmail/releases/download/v1.2.3/gmail-1.2.3.tar.gz"},
		{gh, "github://acme/integrations/connectors/slack", "2.0.0-rc.1", "https://github.com/acme/integrations/releases/download/connectors%2Fslack%2Fv2.0.0-rc.1/slack-2.0.0-rc.1.tar.gz"},
		{gh, "gitlab://acme/gmail", "1.2.3", ""},
		{gl, "gitlab://team/gmail", "1.2.3+build.7", "https://gitlab.example.com/api/v4/projects/team%2Fgmail/packages/generic/gmail/1.2.3+build.7/gmail-1.2.3+build.7.tar.gz"},
		{gl, "gitlab://team/mono/connectors/jira", "0.1.0", "https://gitlab.example.com/api/v4/projects/team%2Fmono/packages/generic/jira/0.1.0/jira-0.1.0.tar.gz"},
		{gl, "github://team/gmail", "1.2.3", ""},
		{mirror, "github://acme/gmail", "1.2.3", "/srv/mirror/github/acme/gmail/1.2.3.tar.gz"},
		{mirror, "hub://acme/tools/gmail", "1.2.3", "/srv/mirror/hub/acme/tools/gmail/1.2.3.tar.gz"},
	} {
		if got := c.src.Locate(c.fqn, c.version); got != c.want {
			t.Errorf("%s: Locate(%s@%s) = %q, want %q", c.src, c.fqn, c.version, got, c.want)
		}
	}
}

// writeMirror puts an archive of fqn@version into a mirror directory, as
// its layout says.
func writeMirror(t *testing.T, mirror, fqn, version string, body []byte) {
	t.Helper()
	p := Source{Mirror: mirror}.Locate(fqn, version)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Sources are tried in order: a miss passes to the next, the first that
// has the package wins, a source that fails stops the search, and a miss
// everywhere names each place tried.
func TestResolve(t *testing.T) {
	fromGitHub := archive(t, entry{name: "gmail-1.2.3/" + spec, body: "github"})
	fromGitLab := archive(t, entry{name: spec, body: "gitlab"})
	fromSubpath := archive(t, entry{name: spec, body: "subpath"})
	s := newStandIn(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() { // as sent: the escapes are part of the convention
		case "/acme/gmail/releases/download/v1.2.3/gmail-1.2.3.tar.gz":
			_, _ = w.Write(fromGitHub)
		case "/acme/mono/releases/download/connectors%2Fslack%2Fv2.0.0/slack-2.0.0.tar.gz":
			_, _ = w.Write(fromSubpath)
		case "/gl/api/v4/projects/team%2Fjira/packages/generic/jira/0.1.0/jira-0.1.0.tar.gz":
			_, _ = w.Write(fromGitLab)
		case "/acme/down/releases/download/v1.0.0/down-1.0.0.tar.gz":
			http.Error(w, "down", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	})
	mirror := t.TempDir()
	writeMirror(t, mirror, "github://acme/gmail", "1.2.4", archive(t, entry{name: spec, body: "mirror"}))
	writeMirror(t, mirror, "github://acme/down", "1.0.0", archive(t, entry{name: spec, body: "mirror"}))
	gh := Source{Authority: "github", BaseURL: "https://example.com"}
	r := &Resolver{Sources: []Source{{Authority: "gitlab", BaseURL: "https://example.com/gl"}, gh, {Mirror: mirror}}, Fetcher: s.fetcher(true)}
	for _, c := range []struct {
		ref, body, from string
	}{
		{"gitlab://team/jira@0.1.0", "gitlab", "https://example.com/gl/api/v4/projects/team%2Fjira/packages/generic/jira/0.1.0/jira-0.1.0.tar.gz"},
		{"github://acme/mono/connectors/slack@2.0.0", "subpath", "https://example.com/acme/mono/releases/download/connectors%2Fslack%2Fv2.0.0/slack-2.0.0.tar.gz"},
		{"github://acme/gmail@1.2.3", "github", "https://example.com/acme/gmail/releases/download/v1.2.3/gmail-1.2.3.tar.gz"},
		{"github://acme/gmail@1.2.4", "mirror", filepath.Join(mirror, "github/acme/gmail/1.2.4.tar.gz")},
	} {
		root, from, err := r.Resolve(context.Background(), c.ref, filepath.Join(t.TempDir(), "pkg"))
		if err != nil {
			t.Fatalf("%s: %v", c.ref, err)
		}
		if b, _ := os.ReadFile(filepath.Join(root, spec)); string(b) != c.body || from != c.from {
			t.Errorf("%s: got %q from %s, want %q from %s", c.ref, b, from, c.body, c.from)
		}
	}
	_, _, err := r.Resolve(context.Background(), "github://acme/gmail@9.9.9", filepath.Join(t.TempDir(), "pkg"))
	for _, want := range []string{
		"github://acme/gmail@9.9.9", "gitlab https://example.com/gl (serves no github:// FQN)",
		"https://example.com/acme/gmail/releases/download/v9.9.9/gmail-9.9.9.tar.gz",
		filepath.Join(mirror, "github/acme/gmail/9.9.9.tar.gz"),
	} {
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), want) {
			t.Errorf("miss: err = %v, want ErrNotFound naming %q", err, want)
		}
	}
	_, _, err = r.Resolve(context.Background(), "github://acme/down@1.0.0", filepath.Join(t.TempDir(), "pkg"))
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "503") {
		t.Errorf("a failing source: err = %v, want the 503, not a fall-through to the mirror", err)
	}
	for ref, want := range map[string]string{"github://acme/gmail": "has no @VERSION", "github://acme/gmail@latest": "latest"} {
		if _, _, err := r.Resolve(context.Background(), ref, filepath.Join(t.TempDir(), "pkg")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", ref, err, want)
		}
	}
	if _, _, err := (&Resolver{}).Resolve(context.Background(), "github://acme/gmail@1.2.3", t.TempDir()); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "no store.sources are configured") {
		t.Errorf("no sources: err = %v", err)
	}
}

// A mirror entry that is not a regular file is refused, without opening it
// (a FIFO would wait for a writer for ever).
func TestUnpackFileRefusesAFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "1.2.3.tar.gz")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := UnpackFile(p, filepath.Join(t.TempDir(), "pkg")); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}
