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

// Bounds: the sandboxes one daemon fences at once; the connections each of
// a sandbox's four transparent listeners serves at once (more wait in the
// kernel's backlog); the DNS-over-TCP connections a sandbox holds at once.
const (
	maxSandboxes        = 1024
	maxConnsPerListener = 512
	maxDNSConns         = 32
)

// state is what a Manager tracks. A sandbox is in boxes only once it is
// fully up (so Close and List never see one half built); its index stays
// in used from reserve until its link and table are gone, and for good
// when removing them failed (Sweep at the next start clears them).
type state struct {
	mu       sync.Mutex
	boxes    map[string]*sandbox
	used     map[int]bool
	gateways map[string]*sandbox // from claim to teardown, so two Attach calls never take one interface
	closed   bool                // Shutdown ran: Open refuses
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
	proc      *os.File     // the process's pidfd, in the runtime's poller; nil for a gateway
	source    netip.Prefix // a gateway's clients; invalid for a fenced sandbox
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
// Shutdown. An index whose link name or addresses are taken (left by
// another program) is set aside and the next one tried.
func (m *Manager) Open(ctx context.Context, session string, pid int) (Info, error) {
	if err := privileged(unix.CAP_NET_ADMIN, unix.CAP_SYS_ADMIN); err != nil {
		return Info{}, err
	}
	sess, err := m.Session(session)
	if err != nil {
		return Info{}, fmt.Errorf("%w: session %s: %v", ErrBadRequest, session, err)
	}
	proc, nsFD, err := openProcess(pid)
	if err != nil {
		return Info{}, err
	}
	defer unix.Close(nsFD)
	var sb *sandbox
	for attempt := 0; ; attempt++ {
		if sb, err = m.reserve(Info{Session: sess.ID, PID: pid}); err != nil {
			_ = proc.Close()
			return Info{}, err
		}
		if err = m.start(sb, sess, nsFD); err == nil {
			break
		}
		taken := errors.Is(err, unix.EEXIST) || errors.Is(err, unix.EADDRINUSE)
		m.teardown(sb, false, taken)
		if !taken || attempt == 3 {
			_ = proc.Close()
			return Info{}, err
		}
		m.logger().Warn().Str("event", "sandbox.index_taken").Str("link", sb.link.hostName).Err(err).Msg("trying the next one")
	}
	sb.proc = proc
	if err := m.publish(sb); err != nil {
		m.teardown(sb, false, false)
		return Info{}, err
	}
	go m.watch(sb)
	m.record(audit.Event{Name: audit.EventSandboxStarted, Session: sess.ID, Details: map[string]string{
		"sandbox": sb.info.ID, "pid": strconv.Itoa(pid), "address": sb.info.Address, "link": sb.info.Link}})
	return sb.info, nil
}

// privileged checks the daemon holds caps (effective), saying how to fix
// it when not.
func privileged(caps ...uintptr) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("%w: reading the daemon's capabilities: %v", ErrUnsupported, err)
	}
	var missing []string
	names := map[uintptr]string{unix.CAP_NET_ADMIN: "CAP_NET_ADMIN", unix.CAP_SYS_ADMIN: "CAP_SYS_ADMIN"}
	for _, c := range caps {
		if data[c/32].Effective&(1<<(c%32)) == 0 {
			missing = append(missing, names[c])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: the daemon (uid %d) lacks %s; restart it as root (sudo aileron daemon --home DIR), or in a container with cap_add: [NET_ADMIN]",
			ErrUnsupported, os.Geteuid(), strings.Join(missing, " and "))
	}
	return nil
}

// openProcess returns a pidfd for pid (non-blocking, so the runtime's
// poller waits on it) and an fd of its network namespace, refusing the
// daemon's own namespace.
func openProcess(pid int) (proc *os.File, nsFD int, err error) {
	if pid <= 1 {
		return nil, -1, fmt.Errorf("%w: pid %d", ErrBadRequest, pid)
	}
	pidfd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, -1, fmt.Errorf("%w: process %d: %v (the launcher must share the daemon's PID namespace)", ErrBadRequest, pid, err)
	}
	proc = os.NewFile(uintptr(pidfd), "pidfd")
	nsFD, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = proc.Close()
		return nil, -1, fmt.Errorf("%w: network namespace of process %d: %v", ErrBadRequest, pid, err)
	}
	var theirs, ours unix.Stat_t
	if unix.Fstat(nsFD, &theirs) != nil || unix.Stat("/proc/self/ns/net", &ours) != nil || theirs.Ino == ours.Ino {
		_ = proc.Close()
		_ = unix.Close(nsFD)
		return nil, -1, fmt.Errorf("%w: process %d shares the daemon's network namespace; start it in a new one", ErrBadRequest, pid)
	}
	return proc, nsFD, nil
}

// reserve picks a free link index and registers the sandbox.
func (m *Manager) reserve(info Info) (*sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("%w: the daemon is stopping", ErrUnsupported)
	}
	if m.boxes == nil {
		m.boxes, m.used = map[string]*sandbox{}, map[int]bool{}
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
	sb := &sandbox{info: info, idx: idx, link: l, done: make(chan struct{})}
	m.used[idx] = true
	return sb, nil
}

// publish makes a started sandbox visible to Close, List and Shutdown,
// unless Shutdown has begun.
func (m *Manager) publish(sb *sandbox) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("%w: the daemon is stopping", ErrUnsupported)
	}
	m.boxes[sb.info.ID] = sb
	return nil
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
	return m.serve(sb, sess, []netip.Addr{sb.link.host4, sb.link.host6}, nsFD, nflogGroup)
}

// serve starts a sandbox's DNS server (on the first of addrs), its
// transparent listeners (on each of addrs, ports 443 and 80) and the
// reader of NFLOG group in the namespace nsFD (0: the daemon's).
func (m *Manager) serve(sb *sandbox, sess *dataplane.Session, addrs []netip.Addr, nsFD int, group uint16) error {
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
		From:   sb.from,
		Denied: func(d policydns.Denial) { m.dnsDenied(sb, d) }}
	dnsAddr := net.JoinHostPort(addrs[0].String(), "53")
	pc, err := net.ListenPacket("udp", dnsAddr)
	if err != nil {
		return fmt.Errorf("DNS on %s: %w", dnsAddr, err)
	}
	dl, err := net.Listen("tcp", dnsAddr)
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("DNS on %s/tcp: %w", dnsAddr, err)
	}
	sb.dns.Serve(pc, limitTCP(dl.(*net.TCPListener), maxDNSConns))
	for _, a := range addrs {
		for _, port := range []string{"443", "80"} {
			raw, err := net.Listen("tcp", net.JoinHostPort(a.String(), port))
			if err != nil {
				return fmt.Errorf("transparent listener on %s: %w", net.JoinHostPort(a.String(), port), err)
			}
			l := limitTCP(raw.(*net.TCPListener), maxConnsPerListener)
			sb.listeners = append(sb.listeners, l)
			go func() { _ = m.Proxy.ServeTransparent(l, origins{m, sb}, port == "443") }()
		}
	}
	if sb.nflog, err = openNFLOG(nsFD, group); err != nil {
		return fmt.Errorf("NFLOG group %d: %w", group, err)
	}
	go readNFLOG(sb.nflog, func(b blocked) { m.blocked(sb, b) })
	return nil
}

// blocked audits a packet the fence refused: its source as the client,
// its destination as the host, and whether it was dropped unanswered for
// a source the sandbox does not own.
func (m *Manager) blocked(sb *sandbox, b blocked) {
	det := map[string]string{"sandbox": sb.info.ID, "protocol": b.proto}
	if b.foreign {
		det["foreign_source"] = "true"
	}
	m.record(audit.Event{Name: audit.EventEgressBlocked, Session: sb.info.Session, Client: b.src.String(),
		Host: b.dst.String(), Port: b.port, Decision: policy.Deny.String(), Reason: string(policy.ReasonEgressBlocked),
		Details: det})
}

func (m *Manager) dnsDenied(sb *sandbox, d policydns.Denial) {
	det := map[string]string{"sandbox": sb.info.ID, "name": d.Name, "name_sha256": d.NameHash, "type": d.Type}
	if d.Suppressed > 0 {
		det["suppressed"] = strconv.FormatInt(d.Suppressed, 10)
	}
	m.record(audit.Event{Name: audit.EventDNSDenied, Session: sb.info.Session, Client: d.Client.String(),
		Decision: policy.Deny.String(), Reason: string(d.Reason), Details: det})
}

// watch closes the sandbox when its process exits (its pidfd becomes
// readable), waiting in the runtime's poller rather than on a thread of its
// own; teardown closing the pidfd ends the wait too.
func (m *Manager) watch(sb *sandbox) {
	if raw, err := sb.proc.SyscallConn(); err == nil {
		_ = raw.Read(func(fd uintptr) bool {
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
			return n > 0 || (err != nil && err != unix.EINTR)
		})
	}
	m.teardown(sb, true, false)
}

// Close removes sandbox id now.
func (m *Manager) Close(id string) error {
	m.mu.Lock()
	sb := m.boxes[id]
	m.mu.Unlock()
	if sb == nil {
		return fmt.Errorf("%w: %s (aileron sandbox list shows the open ones)", ErrNotFound, id)
	}
	m.teardown(sb, true, false)
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

// Shutdown removes every sandbox (their processes keep running with no
// network at all) and makes Open refuse from then on.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	m.closed = true
	var all []*sandbox
	for _, sb := range m.boxes {
		all = append(all, sb)
	}
	m.mu.Unlock()
	for _, sb := range all {
		m.teardown(sb, true, false)
	}
}

// teardown stops the sandbox's servers and removes its link and tables.
// Its index is freed unless keepIndex is set or the removal failed: an
// index whose link or table may still exist is never handed out again.
func (m *Manager) teardown(sb *sandbox, audited, keepIndex bool) {
	sb.once.Do(func() {
		close(sb.done)
		m.mu.Lock()
		if m.boxes[sb.info.ID] == sb {
			delete(m.boxes, sb.info.ID)
		}
		if m.gateways[sb.info.ID] == sb {
			delete(m.gateways, sb.info.ID)
		}
		m.mu.Unlock()
		for _, l := range sb.listeners {
			_ = l.Close()
		}
		if sb.dns != nil { // its Shutdown reports the refusals it held back, before sandbox.stopped below
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = sb.dns.Shutdown(ctx)
			cancel()
		}
		if sb.nflog != nil {
			_ = sb.nflog.Close()
		}
		err := unwire(sb.link)
		if sb.proc != nil {
			_ = sb.proc.Close() // ends watch's wait
		}
		if err != nil {
			m.logger().Error().Str("event", "sandbox.cleanup_failed").Str("sandbox", sb.info.ID).Err(err).Msg("the next start removes what is left")
		}
		if err == nil && !keepIndex {
			m.mu.Lock()
			delete(m.used, sb.idx)
			m.mu.Unlock()
		}
		if audited {
			m.record(audit.Event{Name: audit.EventSandboxStopped, Session: sb.info.Session, Details: map[string]string{"sandbox": sb.info.ID}})
		}
	})
}

// from reports whether a is one of the sandbox's own addresses (a
// fenced sandbox) or in its source range (a gateway).
func (sb *sandbox) from(a netip.Addr) bool {
	if sb.source.IsValid() {
		return sb.source.Contains(a)
	}
	return a == sb.link.sand4 || a == sb.link.sand6
}

// origins implements dataplane.Origins for one sandbox's listeners: a
// connection must come from that sandbox's own address, and go to an
// address its DNS handed out.
type origins struct {
	m  *Manager
	sb *sandbox
}

func (o origins) Origin(src, dst netip.AddrPort) (*dataplane.Session, string, error) {
	if a := src.Addr(); !o.sb.from(a) {
		return nil, "", fmt.Errorf("%w: %s is not sandbox %s", dataplane.ErrProxyAuth, a, o.sb.info.ID)
	}
	select {
	case <-o.sb.done:
		return nil, "", fmt.Errorf("%w: sandbox %s is closed", dataplane.ErrProxyAuth, o.sb.info.ID)
	default:
	}
	sess, err := o.m.Session(o.sb.info.Session)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %v", dataplane.ErrProxyAuth, err)
	}
	name, ok := o.sb.names.Name(dst.Addr())
	if !ok {
		return nil, "", fmt.Errorf("%w: %s", dataplane.ErrNotResolved, dst.Addr())
	}
	return sess, name, nil
}
