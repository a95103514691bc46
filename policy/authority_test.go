package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestFQNAuthority(t *testing.T) {
	for fqn, want := range map[string]string{
		"github://acme/aileron-connector-google": "github://acme",
		"gitlab://team/group-connector/sub":      "gitlab://team",
		"hub://owner.name/x":                     "hub://owner.name",
		"local://me/mine":                        "local://me",
	} {
		got, err := FQNAuthority(fqn)
		if err != nil || got != want {
			t.Errorf("FQNAuthority(%q) = %q, %v; want %q", fqn, got, err, want)
		}
	}
	if _, err := FQNAuthority("github://acme"); !errors.Is(err, ErrBadIdent) {
		t.Errorf("FQNAuthority of an FQN without a repository: err = %v", err)
	}
}

func TestCheckAuthority(t *testing.T) {
	for _, ok := range []string{"github://acme", "gitlab://team", "hub://owner", "local://me", "github://a.b_c-d"} {
		if err := CheckAuthority(ok); err != nil {
			t.Errorf("CheckAuthority(%q) = %v", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"":                   "empty",
		"acme":               "no scheme",
		"ftp://acme":         "unknown scheme",
		"github://":          "one owner",
		"github://acme/repo": "without a repository",
		"github://..":        "dot owner",
		"github://ac me":     "contains",
		"github://acme/":     "without a repository",
	} {
		err := CheckAuthority(bad)
		if !errors.Is(err, ErrBadIdent) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAuthority(%q) = %v, want ErrBadIdent containing %q", bad, err, want)
		}
	}
}
