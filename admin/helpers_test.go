package admin

import (
	"path/filepath"
	"testing"

	"github.com/aileronhq/aileron/internal/testkit"
	"github.com/aileronhq/aileron/sessions"
	"github.com/aileronhq/aileron/state"
)

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
