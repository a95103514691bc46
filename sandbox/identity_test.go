package sandbox

import (
	"errors"
	"os"
	"slices"
	"testing"
)

func TestResolveUser(t *testing.T) {
	def := uint32(65534) // root without sudo: nobody, never root
	if os.Getuid() != 0 {
		def = uint32(os.Getuid()) // a caller that is not root runs commands as itself
	}
	for _, c := range []struct {
		spec    string
		environ []string
		uid     uint32
		gid     uint32
		err     bool
	}{
		{"", nil, def, 0, false},
		{"", []string{"SUDO_UID=4242", "SUDO_GID=4343"}, 4242, 4343, false}, // the user who ran sudo
		{"", []string{"SUDO_UID=0", "SUDO_GID=0"}, def, 0, false},           // sudo from root is still not root
		{"root", nil, 0, 0, false},
		{"0", nil, 0, 0, false},
		{"nobody", nil, 65534, 65534, false},
		{"54321", nil, 54321, 54321, false}, // a uid with no passwd entry
		{"54321:7", nil, 54321, 7, false},
		{"root:x", nil, 0, 0, true},
		{"no-such-user-here", nil, 0, 0, true},
	} {
		id, err := ResolveUser(c.spec, c.environ)
		if c.err {
			if err == nil || !errors.Is(err, ErrLaunch) {
				t.Errorf("ResolveUser(%q) = %+v, %v; want an ErrLaunch error", c.spec, id, err)
			}
			continue
		}
		if err != nil || id.UID != c.uid || (c.gid != 0 && id.GID != c.gid) {
			t.Errorf("ResolveUser(%q, %q) = %+v, %v; want uid %d gid %d", c.spec, c.environ, id, err, c.uid, c.gid)
		}
	}
}

func TestIdentityEnvFollowsTheUser(t *testing.T) {
	env := identityEnv([]string{"HOME=/root", "USER=root", "PATH=/bin"}, Identity{UID: 65534, GID: 65534, Name: "nobody", Home: "/nonexistent"})
	for _, want := range []string{"HOME=/nonexistent", "USER=nobody", "LOGNAME=nobody", "PATH=/bin"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %s", env, want)
		}
	}
	if slices.Contains(env, "HOME=/root") {
		t.Errorf("env %q keeps the caller's HOME", env)
	}
}
