package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ErrPrivateAddress is wrapped by every dial the SSRF guard refuses.
var ErrPrivateAddress = errors.New("destination address is not publicly routable")

// AddrError says which address the guard refused and why.
type AddrError struct {
	Host  string     // the name that was asked for
	Addr  netip.Addr // the address it resolved to
	Class string     // e.g. "loopback", "metadata", "ipv4_mapped(loopback)"
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("%s resolves to %s (%s), which the proxy does not dial; add it to egress.allow_cidrs if it is meant to be reachable", e.Host, e.Addr, e.Class)
}

func (e *AddrError) Unwrap() error { return ErrPrivateAddress }

// Resolver is the part of *net.Resolver the guard uses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Guard dials upstreams for the proxy: it resolves a name once, classifies
// every address, and dials only a vetted one, so DNS cannot change its answer
// between the check and the dial. The zero value resolves with the system
// resolver, allows no special-purpose address and dials with a 10 s timeout.
type Guard struct {
	// Resolve overrides resolution: "host:port" → "ip:port". The target is
	// still classified.
	Resolve map[string]netip.AddrPort
	// Allow lists prefixes dialled despite their class.
	Allow []netip.Prefix
	// Resolver resolves names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one TCP connect; zero means 10 s.
	DialTimeout time.Duration
	// Dial makes the TCP connection to a vetted address; nil means a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu   sync.RWMutex
	self []netip.AddrPort // the daemon's own listening addresses
}

// AddSelf records one of the daemon's own listening addresses (the proxy's,
// the approvals page's, any other), which is never dialled even when Allow
// covers it: a sandbox must not reach the daemon through itself. A dial to
// 0.0.0.0 or :: at that port counts too (it reaches a local listener), and
// a wildcard listener (0.0.0.0, ::) stands for every loopback address and
// every address of the machine at the time of the dial.
func (g *Guard) AddSelf(ap netip.AddrPort) {
	g.mu.Lock()
	g.self = append(g.self, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	g.mu.Unlock()
}

// removeSelf forgets one AddSelf of ap (a listener that closed). The same
// address added twice stays until removed twice.
func (g *Guard) removeSelf(ap netip.AddrPort) {
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.self, ap); i >= 0 {
		g.self = slices.Delete(g.self, i, i+1)
	}
}

// isSelf reports whether dialling ip:port reaches one of the daemon's own
// listeners.
func (g *Guard) isSelf(ip netip.Addr, port uint16) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, s := range g.self {
		switch {
		case s.Port() != port:
		case s.Addr() == ip, ip.IsUnspecified():
			return true
		case s.Addr().IsUnspecified() && (ip.IsLoopback() || isLocalAddr(ip)):
			return true
		}
	}
	return false
}

// isLocalAddr reports whether ip is assigned to an interface of this
// machine now (read at each call: interfaces come and go).
func isLocalAddr(ip netip.Addr) bool {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return true // cannot tell: treat it as the daemon's, fail closed
	}
	for _, a := range ifas {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

// DialContext dials addr ("host:port") through the guard. Refusals wrap
// ErrPrivateAddress (as *AddrError); resolution and dial failures are returned
// as they are.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	targets, err := g.vet(ctx, addr)
	if err != nil {
		return nil, err
	}
	timeout := g.dialTimeout()
	dial := g.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
		dial = d.DialContext
	}
	var last error
	for _, t := range targets {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		c, err := dial(dctx, "tcp", t.String())
		cancel()
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// vet resolves addr once and returns the addresses that may be dialled, in
// resolver order.
func (g *Guard) vet(ctx context.Context, addr string) ([]netip.AddrPort, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("invalid port in %q", addr)
	}
	var cands []netip.AddrPort
	if ap, ok := g.Resolve[addr]; ok {
		cands = []netip.AddrPort{ap}
	} else if ip, err := netip.ParseAddr(host); err == nil {
		cands = []netip.AddrPort{netip.AddrPortFrom(ip, uint16(port))}
	} else {
		r := g.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		ips, err := r.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		for _, ip := range ips {
			cands = append(cands, netip.AddrPortFrom(ip, uint16(port)))
		}
	}
	var ok []netip.AddrPort
	var refused *AddrError
	for _, c := range cands {
		if class := g.refuse(c); class != "" {
			if refused == nil {
				refused = &AddrError{Host: host, Addr: c.Addr(), Class: class}
			}
			continue
		}
		ok = append(ok, netip.AddrPortFrom(c.Addr().Unmap(), c.Port()))
	}
	if len(ok) == 0 {
		if refused == nil {
			return nil, fmt.Errorf("%s resolved to no address", host)
		}
		return nil, refused
	}
	return ok, nil
}

// refuse returns the class that forbids dialling ap, or "".
func (g *Guard) refuse(ap netip.AddrPort) string {
	ip := ap.Addr().Unmap()
	if g.isSelf(ip, ap.Port()) {
		return "the daemon's own address"
	}
	for _, p := range g.Allow {
		if p.Contains(ip) || p.Contains(ap.Addr()) {
			return ""
		}
	}
	return Classify(ap.Addr())
}

func (g *Guard) dialTimeout() time.Duration {
	if g.DialTimeout <= 0 {
		return 10 * time.Second
	}
	return g.DialTimeout
}
