package controlplane

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
)

// logBuffer collects Logf lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBuffer) Logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// sessionsAt returns an opened session manager rooted at home, on its own
// handle of home's database.
func sessionsAt(t *testing.T, home string, clock *testkit.Clock) *sessions.Manager {
	t.Helper()
	s := &sessions.Manager{
		DB:           testkit.OpenDB(t, filepath.Join(home, state.FileName)),
		Dir:          filepath.Join(home, "sessions"),
		KeyFile:      filepath.Join(home, "keys", "session.key"),
		ProxyURLHost: "127.0.0.1:9080",
		Now:          clock.Now,
		SystemRoots:  []string{},
	}
	if err := s.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

// proxyCreds splits a ProxyURL into its id and token.
func proxyCreds(t *testing.T, proxyURL string) (id, token string) {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = u.User.Password()
	return u.User.Username(), token
}

// mode returns p's permission bits.
func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
