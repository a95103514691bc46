package policydns

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// ErrExhausted is returned by Map.Addrs when every synthetic address of a
// range is taken, or MaxNames names have addresses. Addresses are never
// reassigned while the Map lives.
var ErrExhausted = errors.New("synthetic address range exhausted")

// MaxNames bounds the names one Map gives addresses to (and so its
// memory): a session whose policy allows a wildcard could otherwise make
// a sandbox's map grow with every name it invents.
const MaxNames = 1 << 14

// Map hands out one synthetic IPv4 and one IPv6 address per name and maps
// them back. An address, once given to a name, stays with it for the
// Map's life. Safe for concurrent use.
type Map struct {
	v4, v6 netip.Prefix

	mu     sync.Mutex
	byName map[string][2]netip.Addr
	byAddr map[netip.Addr]string
	next4  netip.Addr // the next addresses to hand out (the network address is never used)
	next6  netip.Addr
}

// DefaultV4 and DefaultV6 are the default synthetic ranges: 198.18.0.0/15 is
// reserved for benchmarking (RFC 2544) and fd00:a11e:5eed::/64 is a
// unique-local range of Aileron's own.
var (
	DefaultV4 = netip.MustParsePrefix("198.18.0.0/15")
	DefaultV6 = netip.MustParsePrefix("fd00:a11e:5eed::/64")
)

// NewMap returns a Map over v4 (an IPv4 prefix) and v6 (an IPv6 prefix).
func NewMap(v4, v6 netip.Prefix) (*Map, error) {
	if !v4.IsValid() || !v4.Addr().Is4() || v4.Bits() > 30 {
		return nil, fmt.Errorf("synthetic IPv4 range %s: want an IPv4 prefix of /30 or wider", v4)
	}
	if !v6.IsValid() || !v6.Addr().Is6() || v6.Addr().Is4In6() || v6.Bits() > 126 {
		return nil, fmt.Errorf("synthetic IPv6 range %s: want an IPv6 prefix of /126 or wider", v6)
	}
	v4, v6 = v4.Masked(), v6.Masked()
	return &Map{v4: v4, v6: v6, byName: map[string][2]netip.Addr{}, byAddr: map[netip.Addr]string{},
		next4: v4.Addr().Next(), next6: v6.Addr().Next()}, nil
}

// Prefixes returns the IPv4 and IPv6 ranges the Map hands out from.
func (m *Map) Prefixes() (v4, v6 netip.Prefix) { return m.v4, m.v6 }

// Addrs returns name's synthetic addresses, assigning them on first use.
// name must be canonical (lower case, no trailing dot).
func (m *Map) Addrs(name string) (v4, v6 netip.Addr, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.byName[name]; ok {
		return a[0], a[1], nil
	}
	a4, a6 := m.next4, m.next6
	// the range's last address (broadcast, for IPv4) is never handed out
	if !m.v4.Contains(a4.Next()) || !m.v6.Contains(a6.Next()) || len(m.byName) >= MaxNames {
		return netip.Addr{}, netip.Addr{}, ErrExhausted
	}
	m.next4, m.next6 = a4.Next(), a6.Next()
	m.byName[name] = [2]netip.Addr{a4, a6}
	m.byAddr[a4], m.byAddr[a6] = name, name
	return a4, a6, nil
}

// Name returns the name a was handed out for.
func (m *Map) Name(a netip.Addr) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.byAddr[a.Unmap()]
	return n, ok
}
