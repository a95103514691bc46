package fence

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/nftables"
	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/policydns"
)

// maxSandboxes bounds the sandboxes one daemon fences at once.
const maxSandboxes = 1024

type state struct {
	mu    sync.Mutex
	boxes map[string]*sandbox
	bySrc map[netip.Addr]*sandbox
	used  map[int]bool
}

// sandbox is one fenced sandbox and what serves it.
type sandbox struct {
	info      Info
	idx       int
	link      link
	names     *policydns.Map
	dns       *policydns.Server
	listeners []net.Listener
	nflog     *mdnetlink.Conn
	pidfd     int
	done      chan struct{}
	once      sync.Once
}

func (m *Manager) prefix() string { return "aln" + m.Tag }

// Sweep removes the links and tables a previous run of this daemon left
// behind (a crash): links named aln<tag>… and tables aileron_<tag>_….
func (m *Manager) Sweep() error {
	var errs []error
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, k := range links {
		if strings.HasPrefix(k.Attrs().Name, m.prefix()) {
			if err := netlink.LinkDel(k); err != nil {
				errs = append(errs, fmt.Errorf("removing leftover link %s: %w", k.Attrs().Name, err))
			}
		}
	}
	c, err := nftables.New()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, t := range ts {
		if strings.HasPrefix(t.Name, "aileron_"+m.Tag+"_") {
			c.DelTable(t)
		}
	}
	return errors.Join(append(errs, c.Flush())...)
}

// Open fences the network namespace of process pid (which must be new and
// empty) for session: veth, addresses, route, fences, DNS and transparent
// listeners. The sandbox is closed when pid exits, by Close, or by
// Shutdown.
func (m *Manager) Open(ctx context.Context, session string, pid int) (Info, error) {
	if os.Geteuid() != 0 {
		return Info{}, fmt.Errorf("%w: the daemon runs as uid %d; it needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create the sandbox's link and fence", ErrUnsupported, os.Geteuid())
	}
	sess, err := m.Session(session)
	if err != nil {
		return Info{}, fmt.Errorf("%w: session %s: %v", ErrBadRequest, session, err)
	}
	pidfd, nsFD, err := openProcess(pid)
	if err != nil {
		return Info{}, err
	}
	defer unix.Close(nsFD)
	sb, err := m.reserve(Info{Session: sess.ID, PID: pid})
	if err != nil {
		_ = unix.Close(pidfd)
		return Info{}, err
	}
	sb.pidfd = pidfd
	if err := m.start(sb, sess, nsFD); err != nil {
		m.teardown(sb, false)
		return Info{}, err
	}
	go m.watch(sb)
	m.record(audit.Event{Name: audit.EventSandboxStarted, Session: sess.ID, Details: map[string]string{
		"sandbox": sb.info.ID, "pid": strconv.Itoa(pid), "address": sb.info.Address, "link": sb.info.Link}})
	return sb.info, nil
}

// openProcess returns a pidfd for pid and an fd of its network namespace,
// refusing the daemon's own namespace.
func openProcess(pid int) (pidfd, nsFD int, err error) {
	if pid <= 1 {
		return -1, -1, fmt.Errorf("%w: pid %d", ErrBadRequest, pid)
	}
	pidfd, err = unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("%w: process %d: %v", ErrBadRequest, pid, err)
	}
	nsFD, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(pidfd)
		return -1, -1, fmt.Errorf("%w: network namespace of process %d: %v", ErrBadRequest, pid, err)
	}
	var theirs, ours unix.Stat_t
	if unix.Fstat(nsFD, &theirs) != nil || unix.Stat("/proc/self/ns/net", &ours) != nil || theirs.Ino == ours.Ino {
		_ = unix.Close(pidfd)
		_ = unix.Close(nsFD)
		return -1, -1, fmt.Errorf("%w: process %d shares the daemon's network namespace; start it in a new one", ErrBadRequest, pid)
	}
	return pidfd, nsFD, nil
}

// reserve picks a free link index and registers the sandbox.
func (m *Manager) reserve(info Info) (*sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.boxes == nil {
		m.boxes, m.bySrc, m.used = map[string]*sandbox{}, map[netip.Addr]*sandbox{}, map[int]bool{}
	}
	idx := -1
	for i := 0; i < maxSandboxes; i++ {
		if !m.used[i] {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("%w: %d sandboxes are already fenced", ErrBadRequest, maxSandboxes)
	}
	l, err := m.linkFor(idx)
	if err != nil {
		return nil, err
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	info.ID = "sbx-" + hex.EncodeToString(id[:])
	info.DNS, info.Address, info.Address6, info.Link = l.host4.String(), l.sand4.String(), l.sand6.String(), l.hostName
	sb := &sandbox{info: info, idx: idx, link: l, pidfd: -1, done: make(chan struct{})}
	m.used[idx] = true
	m.boxes[info.ID] = sb
	return sb, nil
}

// linkFor computes sandbox idx's names and addresses.
func (m *Manager) linkFor(idx int) (link, error) {
	l4, l6 := m.Links, m.Links6
	if !l4.IsValid() {
		l4 = netip.MustParsePrefix("10.237.0.0/16")
	}
	if !l6.IsValid() {
		l6 = netip.MustParsePrefix("fd00:a11e:f00d::/48")
	}
	s4, s6 := m.Synthetic4, m.Synthetic6
	if !s4.IsValid() {
		s4 = policydns.DefaultV4
	}
	if !s6.IsValid() {
		s6 = policydns.DefaultV6
	}
	if 1<<(32-l4.Bits()) < 4*(idx+1) || l6.Bits() > 48 {
		return link{}, fmt.Errorf("%w: sandbox.link_cidr %s has no room for sandbox %d (or link_cidr6 %s is narrower than /48)", ErrBadRequest, l4, idx, l6)
	}
	b4 := l4.Masked().Addr().As4()
	n := uint32(b4[0])<<24 | uint32(b4[1])<<16 | uint32(b4[2])<<8 | uint32(b4[3]) + uint32(4*idx)
	at4 := func(k uint32) netip.Addr {
		v := n + k
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	b6 := l6.Masked().Addr().As16()
	b6[6], b6[7] = byte(idx>>8), byte(idx)
	at6 := func(k byte) netip.Addr { a := b6; a[15] = k; return netip.AddrFrom16(a) }
	return link{hostName: m.prefix() + strconv.FormatInt(int64(idx), 16), table: "aileron_" + m.Tag + "_" + strconv.Itoa(idx),
		host4: at4(1), sand4: at4(2), host6: at6(1), sand6: at6(2), synth4: s4, synth6: s6}, nil
}

// start wires the link and starts the sandbox's servers.
func (m *Manager) start(sb *sandbox, sess *dataplane.Session, nsFD int) error {
	if err := wire(nsFD, sb.link); err != nil {
		return err
	}
	names, err := policydns.NewMap(sb.link.synth4, sb.link.synth6)
	if err != nil {
		return err
	}
	sb.names = names
	sb.dns = &policydns.Server{Map: names, Rate: m.DNSRate,
		Allowed: func(name string) bool {
			s, err := m.Session(sess.ID)
			return err == nil && m.Proxy.MayReach(s, name)
		},
		Denied: func(d policydns.Denial) { m.dnsDenied(sb, d) }}
	host4 := sb.link.host4.String()
	pc, err := net.ListenPacket("udp4", net.JoinHostPort(host4, "53"))
	if err != nil {
		return fmt.Errorf("DNS on %s:53: %w", host4, err)
	}
	dl, err := net.Listen("tcp4", net.JoinHostPort(host4, "53"))
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("DNS on %s:53/tcp: %w", host4, err)
	}
	sb.dns.Serve(pc, dl)
	for _, a := range []netip.Addr{sb.link.host4, sb.link.host6} {
		for _, port := range []string{"443", "80"} {
			l, err := net.Listen("tcp", net.JoinHostPort(a.String(), port))
			if err != nil {
				return fmt.Errorf("transparent listener on %s: %w", net.JoinHostPort(a.String(), port), err)
			}
			sb.listeners = append(sb.listeners, l)
			go func() { _ = m.Proxy.ServeTransparent(l, m, port == "443") }()
		}
	}
	if sb.nflog, err = openNFLOG(nsFD); err != nil {
		return fmt.Errorf("NFLOG in the sandbox's namespace: %w", err)
	}
	go readNFLOG(sb.nflog, func(b blocked) { m.blocked(sb, b) })
	m.mu.Lock()
	m.bySrc[sb.link.sand4], m.bySrc[sb.link.sand6] = sb, sb
	m.mu.Unlock()
	return nil
}

func (m *Manager) blocked(sb *sandbox, b blocked) {
	m.record(audit.Event{Name: audit.EventEgressBlocked, Session: sb.info.Session, Host: b.dst.String(), Port: b.port,
		Decision: policy.Deny.String(), Reason: string(policy.ReasonEgressBlocked),
		Details: map[string]string{"sandbox": sb.info.ID, "protocol": b.proto}})
}

func (m *Manager) dnsDenied(sb *sandbox, d policydns.Denial) {
	det := map[string]string{"sandbox": sb.info.ID, "name": d.Name, "name_sha256": d.NameHash, "type": d.Type}
	if d.Suppressed > 0 {
		det["suppressed"] = strconv.FormatInt(d.Suppressed, 10)
	}
	m.record(audit.Event{Name: audit.EventDNSDenied, Session: sb.info.Session, Client: d.Client.String(),
		Decision: policy.Deny.String(), Reason: string(d.Reason), Details: det})
}

// watch closes the sandbox when its process exits.
func (m *Manager) watch(sb *sandbox) {
	fds := []unix.PollFd{{Fd: int32(sb.pidfd), Events: unix.POLLIN}}
	for {
		select {
		case <-sb.done:
			return
		default:
		}
		n, err := unix.Poll(fds, 250)
		if err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		if n > 0 {
			break
		}
	}
	m.teardown(sb, true)
}

// Close removes sandbox id now.
func (m *Manager) Close(id string) error {
	m.mu.Lock()
	sb := m.boxes[id]
	m.mu.Unlock()
	if sb == nil {
		return ErrNotFound
	}
	m.teardown(sb, true)
	return nil
}

// List returns the fenced sandboxes.
func (m *Manager) List() []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Info, 0, len(m.boxes))
	for _, sb := range m.boxes {
		out = append(out, sb.info)
	}
	return out
}

// Shutdown removes every sandbox: their processes keep running with no
// network at all.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	var all []*sandbox
	for _, sb := range m.boxes {
		all = append(all, sb)
	}
	m.mu.Unlock()
	for _, sb := range all {
		m.teardown(sb, true)
	}
}

// teardown stops the sandbox's servers and removes its link and tables.
func (m *Manager) teardown(sb *sandbox, audited bool) {
	sb.once.Do(func() {
		close(sb.done)
		m.mu.Lock()
		delete(m.boxes, sb.info.ID)
		if m.bySrc[sb.link.sand4] == sb {
			delete(m.bySrc, sb.link.sand4)
			delete(m.bySrc, sb.link.sand6)
		}
		m.mu.Unlock()
		for _, l := range sb.listeners {
			_ = l.Close()
		}
		if sb.dns != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = sb.dns.Shutdown(ctx)
			cancel()
		}
		if sb.nflog != nil {
			_ = sb.nflog.Close()
		}
		err := unwire(sb.link)
		if sb.pidfd >= 0 {
			_ = unix.Close(sb.pidfd)
		}
		if err != nil {
			m.logger().Error().Str("event", "sandbox.cleanup_failed").Str("sandbox", sb.info.ID).Err(err).Msg("the next start removes what is left")
		}
		m.mu.Lock()
		delete(m.used, sb.idx)
		m.mu.Unlock()
		if audited {
			m.record(audit.Event{Name: audit.EventSandboxStopped, Session: sb.info.Session, Details: map[string]string{"sandbox": sb.info.ID}})
		}
	})
}

// Origin implements dataplane.Origins: the session of the sandbox at src,
// and the name its DNS handed dst out for.
func (m *Manager) Origin(src, dst netip.AddrPort) (*dataplane.Session, string, error) {
	m.mu.Lock()
	sb := m.bySrc[src.Addr()]
	m.mu.Unlock()
	if sb == nil {
		return nil, "", fmt.Errorf("%w: %s is no fenced sandbox", dataplane.ErrProxyAuth, src.Addr())
	}
	sess, err := m.Session(sb.info.Session)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", dataplane.ErrProxyAuth, err)
	}
	name, ok := sb.names.Name(dst.Addr())
	if !ok {
		return nil, "", fmt.Errorf("%w: %s", dataplane.ErrNotResolved, dst.Addr())
	}
	return sess, name, nil
}
