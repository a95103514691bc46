package policydns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/aileronhq/aileron/policy"
)

// MaxAuditName bounds the part of a refused name a Denial keeps.
const MaxAuditName = 64

// Denial is one refused query, for the audit trail.
type Denial struct {
	// Name is the asked name cut to MaxAuditName bytes, lower case, with
	// bytes outside printable ASCII escaped.
	Name string
	// NameHash is the hex SHA-256 of the whole name, lower case, without
	// its trailing dot.
	NameHash string
	// Type is the query type ("TXT", "A", …); "" when there was no single
	// question.
	Type   string
	Reason policy.Reason
	Client netip.AddrPort
	// Suppressed counts the denials before this one that were not
	// reported, because denials came faster than ReportRate. Each denial
	// is in exactly one report: as its subject or in a Suppressed count.
	Suppressed int64
}

// Server answers one sandbox's queries. Map and Allowed are required;
// other zero fields take the defaults in parentheses.
type Server struct {
	Map *Map
	// Allowed reports whether the session may reach name (canonical: lower
	// case, IDNA, no trailing dot).
	Allowed func(name string) bool
	// From reports whether a query's source may be answered at all (the
	// sandbox's own addresses); others get no answer and no audit line,
	// so nobody else can enumerate the session's names or spend its
	// query allowance. Nil answers every source.
	From func(netip.Addr) bool
	// Denied receives refusals (at most ReportRate a second; the rest are
	// held back, and counted in the next report's Suppressed); nil reports
	// nothing. Refusals held back are reported at the latest FlushEvery
	// after the first of them, and by Shutdown: the latest of them, with
	// Suppressed counting the others.
	Denied func(Denial)
	// Rate and Burst bound the queries answered per second (100, burst 200);
	// queries beyond them are refused.
	Rate  rate.Limit
	Burst int
	// ReportRate bounds the Denied calls per second (20, burst 40), a
	// flush (FlushEvery) aside.
	ReportRate rate.Limit
	// FlushEvery bounds how long a refusal held back by ReportRate waits
	// to be reported when no later one carries its count (1 s).
	FlushEvery time.Duration
	// TTL of answers (300 s: a synthetic address never changes owner).
	TTL uint32

	once    sync.Once
	queries *rate.Limiter
	reports *rate.Limiter
	mu      sync.Mutex
	servers []*dns.Server
	held    heldDenials
}

// heldDenials are the refusals ReportRate held back.
type heldDenials struct {
	mu      sync.Mutex
	n       int64       // how many
	last    Denial      // the latest
	timer   *time.Timer // flushes them; nil when none is set
	stopped bool        // Shutdown ran: nothing is held back any more
	// flushing is held by a flush over its report (never by a refusal),
	// so that a flush by the timer has reported when Shutdown's returns.
	flushing sync.Mutex
}

func (s *Server) init() {
	s.once.Do(func() {
		r, b := s.Rate, s.Burst
		if r <= 0 {
			r, b = 100, 200
		}
		if b <= 0 {
			b = int(r) + 1
		}
		s.queries = rate.NewLimiter(r, b)
		rr := s.ReportRate
		if rr <= 0 {
			rr = 20
		}
		s.reports = rate.NewLimiter(rr, 2*int(rr)+1)
		if s.FlushEvery <= 0 {
			s.FlushEvery = time.Second
		}
		if s.TTL == 0 {
			s.TTL = 300
		}
	})
}

// Answer builds the reply to q from client. It never returns nil.
func (s *Server) Answer(q *dns.Msg, client netip.AddrPort) *dns.Msg {
	s.init()
	m := new(dns.Msg)
	if q.Response || q.Opcode != dns.OpcodeQuery || len(q.Question) != 1 {
		m.SetRcodeFormatError(q)
		m.Question = nil
		s.deny("", "", policy.ReasonDNSMalformed, client)
		return m
	}
	m.SetReply(q)
	m.RecursionAvailable = true
	question := q.Question[0]
	qtype := dns.TypeToString[question.Qtype]
	if qtype == "" {
		qtype = "TYPE" + strconv.Itoa(int(question.Qtype))
	}
	if !s.queries.Allow() {
		m.Rcode = dns.RcodeRefused
		s.deny(question.Name, qtype, policy.ReasonDNSRateLimited, client)
		return m
	}
	name, err := canonical(question.Name)
	if err != nil || question.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeRefused
		s.deny(question.Name, qtype, policy.ReasonDNSMalformed, client)
		return m
	}
	if !s.Allowed(name) {
		m.Rcode = dns.RcodeRefused
		s.deny(question.Name, qtype, policy.ReasonDNSNameNotAllowed, client)
		return m
	}
	if question.Qtype != dns.TypeA && question.Qtype != dns.TypeAAAA {
		s.deny(question.Name, qtype, policy.ReasonDNSTypeNotAllowed, client) // NOERROR, no data
		return m
	}
	a4, a6, err := s.Map.Addrs(name)
	if err != nil {
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	hdr := dns.RR_Header{Name: question.Name, Rrtype: question.Qtype, Class: dns.ClassINET, Ttl: s.TTL}
	if question.Qtype == dns.TypeA {
		m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: a4.AsSlice()}}
	} else {
		m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: a6.AsSlice()}}
	}
	return m
}

// canonical turns a question name into the policy's form, refusing names
// longer than DNS allows (253 bytes, labels of 63) or with bytes a host
// name cannot hold.
func canonical(qname string) (string, error) {
	if qname == "." || qname == "" {
		return "", errors.New("empty name")
	}
	if _, ok := dns.IsDomainName(qname); !ok {
		return "", errors.New("not a domain name")
	}
	name := strings.TrimSuffix(qname, ".")
	if len(name) > 253 || strings.ContainsRune(name, '\\') {
		return "", errors.New("name too long or escaped bytes")
	}
	for l := range strings.SplitSeq(name, ".") {
		if len(l) == 0 || len(l) > 63 {
			return "", errors.New("bad label length")
		}
	}
	return policy.CanonicalHost(name)
}

func (s *Server) deny(qname, qtype string, reason policy.Reason, client netip.AddrPort) {
	if s.Denied == nil {
		return
	}
	name := strings.ToLower(strings.TrimSuffix(qname, "."))
	sum := sha256.Sum256([]byte(name))
	d := Denial{Name: cut(name), NameHash: hex.EncodeToString(sum[:]), Type: qtype, Reason: reason, Client: client}
	h := &s.held
	h.mu.Lock()
	if !h.stopped && !s.reports.Allow() {
		h.n++
		h.last = d
		if h.timer == nil {
			h.timer = time.AfterFunc(s.FlushEvery, s.flush)
		}
		h.mu.Unlock()
		return
	}
	d.Suppressed, h.n = h.n, 0
	h.mu.Unlock()
	s.Denied(d)
}

// flush reports the refusals held back, if any: the latest of them, its
// Suppressed counting the others. It takes them under held.mu and reports
// after releasing it, so that no refusal waits on the report; one flush
// reports at a time (held.flushing).
func (s *Server) flush() {
	h := &s.held
	h.flushing.Lock()
	defer h.flushing.Unlock()
	h.mu.Lock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	n, d := h.n, h.last
	h.n, h.last = 0, Denial{}
	h.mu.Unlock()
	if n > 0 {
		d.Suppressed = n - 1
		s.Denied(d)
	}
}

// cut keeps the first MaxAuditName bytes of name, escaping anything
// outside printable ASCII.
func cut(name string) string {
	var b strings.Builder
	for i := 0; i < len(name) && b.Len() < MaxAuditName; i++ {
		c := name[i]
		if c < 0x21 || c > 0x7e {
			b.WriteString(`\x` + hex.EncodeToString([]byte{c}))
			continue
		}
		b.WriteByte(c)
	}
	if len(name) > MaxAuditName {
		b.WriteString("…")
	}
	return b.String()
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	client, _ := netip.ParseAddrPort(w.RemoteAddr().String())
	if s.From != nil && !s.From(client.Addr().Unmap()) {
		_ = w.Close() // TCP: hang up; UDP: nothing is sent
		return
	}
	_ = w.WriteMsg(s.Answer(q, client))
}

// Serve answers on pc (UDP) and l (TCP) until Shutdown. Either may be nil.
func (s *Server) Serve(pc net.PacketConn, l net.Listener) {
	s.init()
	for _, srv := range []*dns.Server{{PacketConn: pc}, {Listener: l}} {
		if srv.PacketConn == nil && srv.Listener == nil {
			continue
		}
		srv.Handler, srv.ReadTimeout, srv.WriteTimeout = s, 5*time.Second, 5*time.Second
		srv.MaxTCPQueries = 16
		srv.MsgAcceptFunc = accept
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		s.mu.Lock()
		s.servers = append(s.servers, srv)
		s.mu.Unlock()
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
		}
	}
}

// accept lets every query reach Answer, so that malformed ones are
// reported too; responses are dropped unanswered (no reflection loops).
func accept(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&(1<<15) != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// Shutdown stops serving, closes the sockets given to Serve, and then
// reports the refusals held back, so that every refusal is counted before
// the sandbox is said to have ended. Refusals after it are each reported.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		if err := srv.ShutdownContext(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.held.mu.Lock()
	s.held.stopped = true
	s.held.mu.Unlock()
	s.flush()
	return errors.Join(errs...)
}
