package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/aileronhq/aileron/printable"
	"github.com/aileronhq/aileron/store"
)

// allowUnpinnedHelp is the --allow-unpinned flag's help.
const allowUnpinnedHelp = "accept actions that require another connector by a placeholder hash such as " +
	"\"sha256:bound-at-release\" instead of its installed hash (development only: they are shown as unpinned)"

// printActionPins prints, after an install, the package's actions and
// whether each pins what it requires.
func printActionPins(w io.Writer, pins []store.ActionPin) {
	if len(pins) == 0 {
		return
	}
	parts := make([]string, 0, len(pins))
	for _, p := range pins {
		if len(p.Unpinned) == 0 {
			parts = append(parts, p.Name+" (pinned)")
			continue
		}
		parts = append(parts, p.Name+" (UNPINNED: "+strings.Join(p.Unpinned, ", ")+" by a placeholder hash)")
	}
	fmt.Fprintln(w, printable.Line("actions: "+strings.Join(parts, ", ")))
}

// printUnpinned prints, after the connector list, one line per action
// that requires a connector by a placeholder hash.
func printUnpinned(w io.Writer, list []store.Installed) {
	for _, in := range list {
		for _, p := range in.Actions {
			if len(p.Unpinned) > 0 {
				fmt.Fprintln(w, printable.Line(fmt.Sprintf("UNPINNED: action %s of %s requires %s by a placeholder hash (installed with --allow-unpinned)",
					p.Name, in.Ref(), strings.Join(p.Unpinned, ", "))))
			}
		}
	}
}
