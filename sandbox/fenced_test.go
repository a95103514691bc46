package sandbox

import (
	"strings"
	"testing"
)

// TestCheckHide: a fence that names nothing to hide, or a relative path,
// is refused: the launcher never guesses where the daemon keeps its home,
// audit trail and keys.
func TestCheckHide(t *testing.T) {
	for _, c := range []struct {
		hide []string
		want string // "" for accepted
	}{
		{[]string{"/var/lib/aileron", "/var/log/aileron"}, ""},
		{nil, "did not say"},
		{[]string{}, "did not say"},
		{[]string{"/var/lib/aileron", "audit"}, `"audit"`},
	} {
		err := checkHide(c.hide)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkHide(%q) = %v; want %q", c.hide, err, c.want)
		}
	}
}
