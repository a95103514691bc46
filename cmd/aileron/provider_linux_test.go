package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestProviderAddRefusesATerminal: a key typed on a terminal would show on
// the screen, so provider add asks for a pipe or a file instead of waiting.
func TestProviderAddRefusesATerminal(t *testing.T) {
	t.Setenv("AILERON_HOME", t.TempDir())
	ptm, tty := openPTY(t)
	defer ptm.Close()
	defer tty.Close()
	var out, errb bytes.Buffer
	code := run([]string{"provider", "add", "anthropic"}, tty, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "read from a pipe or a file, not typed") {
		t.Errorf("exit %d, stderr %q; want exit 2 asking for a pipe or --key-file", code, errb.String())
	}
}
