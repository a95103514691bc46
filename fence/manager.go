package fence

import (
	"errors"
	"net"
	"net/netip"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
)

// Errors returned by Manager.Open; callers test them with errors.Is.
var (
	// ErrUnsupported: fenced sandboxes need Linux, and a daemon with
	// CAP_NET_ADMIN and CAP_SYS_ADMIN (root); gateways need CAP_NET_ADMIN.
	ErrUnsupported = errors.New("fenced sandboxes are not supported here")
	// ErrNotFound: no sandbox has that id.
	ErrNotFound = errors.New("no such sandbox")
	// ErrBadRequest: the process or its namespace cannot be fenced (not a
	// new network namespace, no such process), or the gateway asked for
	// cannot be set up (ranges, addresses).
	ErrBadRequest = errors.New("cannot set up that sandbox")
)

// Proxy is what the fence needs of the data plane.
type Proxy interface {
	ServeTransparent(l net.Listener, o dataplane.Origins, tls bool) error
	MayReach(s *dataplane.Session, host string) bool
}

// Manager creates and removes fenced sandboxes. Proxy and Session are
// required; other zero fields take the defaults in parentheses.
type Manager struct {
	Proxy Proxy
	// Session returns a live session by id.
	Session func(id string) (*dataplane.Session, error)
	// Record writes an audit event; nil records nothing.
	Record func(audit.Event)
	// Log receives operational lines; nil discards.
	Log *zerolog.Logger
	// Links is the IPv4 range carved into one /30 per sandbox
	// (10.237.0.0/16); Links6 the IPv6 range carved into one /64 per
	// sandbox (fd00:a11e:f00d::/48).
	Links, Links6 netip.Prefix
	// Synthetic4 and Synthetic6 are the DNS's synthetic ranges
	// (policydns.DefaultV4, DefaultV6).
	Synthetic4, Synthetic6 netip.Prefix
	// DNSRate bounds each sandbox's DNS queries per second (100).
	DNSRate rate.Limit
	// Tag makes the names of links and tables this daemon creates its own
	// (four hex digits), so Sweep never touches another daemon's.
	Tag string

	state
}

// Info describes a fenced sandbox, or a gateway (Attach).
type Info struct {
	ID      string `json:"id"`
	Session string `json:"session"`
	PID     int    `json:"pid"`
	// DNS is the resolver address the sandbox must use (its resolv.conf).
	DNS string `json:"dns"`
	// Address and Address6 are the sandbox's own addresses; Link the
	// daemon's end of its veth, or the interface a gateway takes.
	Address  string `json:"address,omitempty"`
	Address6 string `json:"address6,omitempty"`
	Link     string `json:"link,omitempty"`
	// Source is a gateway's client range (Attach); PID is 0 then.
	Source string `json:"source,omitempty"`
}

func (m *Manager) logger() *zerolog.Logger {
	if m.Log != nil {
		return m.Log
	}
	l := zerolog.Nop()
	return &l
}

func (m *Manager) record(ev audit.Event) {
	if m.Record != nil {
		m.Record(ev)
	}
}
