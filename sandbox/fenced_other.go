//go:build !linux

package sandbox

import (
	"context"
	"fmt"

	"github.com/aileronhq/aileron/sessions"
)

// RunFenced fails: fenced sandboxes need Linux network namespaces.
func RunFenced(context.Context, sessions.Info, []string, FencedOptions) (int, error) {
	return -1, fmt.Errorf("%w: needs Linux (network namespaces and nftables)", ErrFence)
}

// FencedInit fails: fenced sandboxes need Linux.
func FencedInit() (int, error) { return -1, fmt.Errorf("%w: needs Linux", ErrFence) }
