//go:build !linux

package fence

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aileronhq/aileron/dataplane"
)

type state struct{}

// Sweep does nothing where fenced sandboxes are not supported.
func (m *Manager) Sweep() error { return nil }

// Open always fails with ErrUnsupported: fenced sandboxes need Linux.
func (m *Manager) Open(context.Context, string, int) (Info, error) {
	return Info{}, fmt.Errorf("%w: network namespaces and nftables are Linux-only", ErrUnsupported)
}

// Close reports ErrNotFound: there are no sandboxes.
func (m *Manager) Close(string) error { return ErrNotFound }

// List returns nothing.
func (m *Manager) List() []Info { return nil }

// Shutdown does nothing.
func (m *Manager) Shutdown() {}

// Origin refuses every connection.
func (m *Manager) Origin(netip.AddrPort, netip.AddrPort) (*dataplane.Session, string, error) {
	return nil, "", dataplane.ErrProxyAuth
}
