package admin

import (
	"strings"

	"github.com/aileronhq/aileron/store"
)

// unpinnedActions renders the actions of pins that require a connector by
// a placeholder hash, for the store.installed audit line:
// "NAME: FQN@VERSION[, FQN@VERSION]; NAME: …"; "" when every action pins
// what it requires.
func unpinnedActions(pins []store.ActionPin) string {
	var parts []string
	for _, p := range pins {
		if len(p.Unpinned) > 0 {
			parts = append(parts, p.Name+": "+strings.Join(p.Unpinned, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
