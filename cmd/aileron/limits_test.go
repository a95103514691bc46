package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// The limits flags are checked before the daemon is asked: each mistake
// is a usage error (exit 2) that says what to write.
func TestLimitsFlags(t *testing.T) {
	home := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "create", "--max-tokens", "0"}, "--max-tokens 0: a budget is a whole number from 1 to"},
		{[]string{"session", "create", "--max-tokens", "abc"}, "--max-tokens abc: a budget is a whole number from 1 to"},
		{[]string{"launch", "--max-bytes", "1e6", "--", "true"}, "--max-bytes 1e6: a budget is a whole number"},
		{[]string{"session", "create", "--max-tokens", "99999999999999999999"}, "--max-tokens 99999999999999999999: a budget is"},
		{[]string{"session", "create", "--max-requests", "-3"}, "--max-requests -3: a budget is a whole number from 1 to"},
		{[]string{"session", "create", "--budget-window", "1h"}, "a budget window needs a budget"},
		{[]string{"session", "create", "--max-bytes", "9", "--budget-window", "1500ms"}, "not a whole number of seconds"},
		{[]string{"session", "create", "--models", "claude-*,,gpt-4o"}, "has an empty entry"},
		{[]string{"session", "create", "--models", ""}, "has an empty entry"},
		{[]string{"session", "create", "--models", "gpt 4"}, "has the character ' '"},
		{[]string{"launch", "--session", "s_x", "--max-tokens", "5", "--", "true"}, "use them with --new, not --session"},
		{[]string{"sandbox", "run", "--session", "s_x", "--models", "a", "--", "true"}, "use them with --new, not --session"},
	} {
		code, out, errOut := runCLI(t, home, c.args...)
		if code != 2 || !strings.Contains(out+errOut, c.want) {
			t.Errorf("aileron %v: exit %d, output %q; want exit 2 mentioning %q", c.args, code, out+errOut, c.want)
		}
	}
	_, _, errOut := runCLI(t, home, "session", "create", "--help")
	for _, flag := range []string{"--models", "--max-tokens", "--max-requests", "--max-bytes", "--budget-window"} {
		if !strings.Contains(errOut, flag) {
			t.Errorf("session create --help does not name %s:\n%s", flag, errOut)
		}
	}
}

// TestLimitsFlagsRepeat: --models given more than once adds to the list,
// like --connector, for every command that takes the limits flags (they
// share limitFlags).
func TestLimitsFlagsRepeat(t *testing.T) {
	fs := newFlags("session create", "session create", io.Discard)
	read := limitFlags(fs)
	if err := fs.Parse([]string{"--models", "a*", "--models", "b*,c", "--max-tokens", "7"}); err != nil {
		t.Fatal(err)
	}
	l, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.Models, []string{"a*", "b*", "c"}) || l.MaxTokens != 7 {
		t.Errorf("limits = %+v; want models a*, b*, c and 7 tokens", l)
	}
}
