//go:build !linux

package fence

import (
	"context"
	"fmt"
	"net/netip"
)

type state struct{}

// Sweep does nothing where fenced sandboxes are not supported.
func (m *Manager) Sweep() error { return nil }

// Open always fails with ErrUnsupported: fenced sandboxes need Linux.
func (m *Manager) Open(context.Context, string, int) (Info, error) {
	return Info{}, fmt.Errorf("%w: network namespaces and nftables are Linux-only", ErrUnsupported)
}

// Attach always fails with ErrUnsupported: gateways need Linux.
func (m *Manager) Attach(context.Context, string, netip.Prefix, netip.Addr) (Info, error) {
	return Info{}, fmt.Errorf("%w: nftables is Linux-only", ErrUnsupported)
}

// Close reports ErrNotFound: there are no sandboxes.
func (m *Manager) Close(string) error { return ErrNotFound }

// List returns nothing.
func (m *Manager) List() []Info { return nil }

// Shutdown does nothing.
func (m *Manager) Shutdown() {}
