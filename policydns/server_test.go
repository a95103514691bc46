package policydns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/aileronhq/aileron/policy"
)

type denials struct {
	mu  sync.Mutex
	got []Denial
}

func (d *denials) add(x Denial) { d.mu.Lock(); d.got = append(d.got, x); d.mu.Unlock() }
func (d *denials) all() []Denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Denial(nil), d.got...)
}

func newServer(t *testing.T) (*Server, *denials) {
	t.Helper()
	m, err := NewMap(DefaultV4, DefaultV6)
	if err != nil {
		t.Fatal(err)
	}
	d := &denials{}
	allowed := map[string]bool{"api.example.com": true, "aileron.internal": true}
	s := &Server{Map: m, Allowed: func(n string) bool { return allowed[n] }, Denied: d.add}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) }) // no flush left to fire after the test
	return s, d
}

// counted is how many refusals the reports in got account for: each
// report's own plus its Suppressed.
func counted(got []Denial) int64 {
	var n int64
	for _, x := range got {
		n += 1 + x.Suppressed
	}
	return n
}

// TestSuppressedCountsAddUp: however many refusals come at once, the
// reports account for each exactly once once the server shuts down, with
// no later query to carry the count (a burst just before a sandbox exits).
func TestSuppressedCountsAddUp(t *testing.T) {
	for _, n := range []int{1, 41, 42, 256, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s, d := newServer(t)
			s.FlushEvery = time.Hour // only Shutdown flushes here
			for i := range n {
				s.Answer(query(fmt.Sprintf("exfil-%d.example.net.", i), dns.TypeA), netip.AddrPort{})
			}
			if err := s.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := d.all()
			if c := counted(got); c != int64(n) {
				t.Fatalf("%d refusals, %d reports accounting for %d; want exactly %d", n, len(got), c, n)
			}
			if last := got[len(got)-1]; n > 41 && last.Name != fmt.Sprintf("exfil-%d.example.net", n-1) {
				t.Errorf("the flushed report is %q; want the latest refusal held back", last.Name)
			}
		})
	}
}

// TestSuppressedFlushedAfterSilence: refusals held back by the report
// rate are reported within FlushEvery without any further query, and
// counted once only.
func TestSuppressedFlushedAfterSilence(t *testing.T) {
	s, d := newServer(t)
	s.FlushEvery = 20 * time.Millisecond
	const n = 100
	for i := range n {
		s.Answer(query(fmt.Sprintf("burst-%d.example.net.", i), dns.TypeTXT), netip.AddrPort{})
	}
	deadline := time.Now().Add(10 * time.Second)
	for counted(d.all()) != n && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if c := counted(d.all()); c != n {
		t.Fatalf("after the burst and silence the reports account for %d of %d refusals", c, n)
	}
	s.Answer(query("after.example.net.", dns.TypeA), netip.AddrPort{}) // a later refusal carries no old count
	_ = s.Shutdown(context.Background())
	if c := counted(d.all()); c != n+1 {
		t.Fatalf("the reports account for %d refusals, want %d", c, n+1)
	}
}

// TestRefusalsDoNotWaitOnAFlushReport: while a flush's report is being
// written (the audit trail may be slow), the DNS handlers that refuse go
// on, holding their refusals back; and the counts still add up.
func TestRefusalsDoNotWaitOnAFlushReport(t *testing.T) {
	s, d := newServer(t)
	s.ReportRate = 0.001 // the first refusal reported, every later one held back
	entered, release := make(chan struct{}), make(chan struct{})
	s.Denied = func(x Denial) {
		if x.Name == "held-9.example.net" { // the latest held back: only a flush reports it
			close(entered)
			<-release
		}
		d.add(x)
	}
	s.FlushEvery = time.Millisecond
	refuse := func(label string, n int) {
		for i := range n {
			s.Answer(query(fmt.Sprintf("%s-%d.example.net.", label, i), dns.TypeA), netip.AddrPort{})
		}
	}
	refuse("held", 10)
	if !closes(entered) {
		t.Fatal("no flush reported the refusals held back")
	}
	done := make(chan struct{})
	go func() { defer close(done); refuse("during", 5) }()
	if !closes(done) {
		t.Error("a refusal waited on the flush's report")
	}
	close(release)
	<-done
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c := counted(d.all()); c != 15 {
		t.Fatalf("the reports account for %d refusals, want 15", c)
	}
}

// closes reports whether ch is closed within 10 s: long enough that only
// a hang fails it.
func closes(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func TestAnswer(t *testing.T) {
	long := strings.Repeat("a", 60) + ".example.com."
	two := query("api.example.com.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	chaos := query("api.example.com.", dns.TypeA)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	notify := query("api.example.com.", dns.TypeA)
	notify.Opcode = dns.OpcodeNotify
	tests := []struct {
		name   string
		q      *dns.Msg
		rcode  int
		answer string // the A/AAAA address; "" for none
		reason policy.Reason
	}{
		{"allowed A", query("api.example.com.", dns.TypeA), dns.RcodeSuccess, "198.18.0.1", ""},
		{"allowed A any case", query("API.Example.COM.", dns.TypeA), dns.RcodeSuccess, "198.18.0.1", ""},
		{"allowed AAAA", query("api.example.com.", dns.TypeAAAA), dns.RcodeSuccess, "fd00:a11e:5eed::1", ""},
		{"api host", query("aileron.internal.", dns.TypeA), dns.RcodeSuccess, "198.18.0.2", ""},
		{"TXT on an allowed name", query("api.example.com.", dns.TypeTXT), dns.RcodeSuccess, "", policy.ReasonDNSTypeNotAllowed},
		{"HTTPS (ECH) on an allowed name", query("api.example.com.", dns.TypeHTTPS), dns.RcodeSuccess, "", policy.ReasonDNSTypeNotAllowed},
		{"SVCB", query("api.example.com.", dns.TypeSVCB), dns.RcodeSuccess, "", policy.ReasonDNSTypeNotAllowed},
		{"ANY", query("api.example.com.", dns.TypeANY), dns.RcodeSuccess, "", policy.ReasonDNSTypeNotAllowed},
		{"NULL", query("api.example.com.", dns.TypeNULL), dns.RcodeSuccess, "", policy.ReasonDNSTypeNotAllowed},
		{"unlisted name", query("evil.example.net.", dns.TypeA), dns.RcodeRefused, "", policy.ReasonDNSNameNotAllowed},
		{"subdomain of an allowed name", query("x.api.example.com.", dns.TypeA), dns.RcodeRefused, "", policy.ReasonDNSNameNotAllowed},
		{"60-character label", query(long, dns.TypeA), dns.RcodeRefused, "", policy.ReasonDNSNameNotAllowed},
		{"TXT on an unlisted name", query("data.evil.example.net.", dns.TypeTXT), dns.RcodeRefused, "", policy.ReasonDNSNameNotAllowed},
		{"escaped bytes", query(`api\000.example.com.`, dns.TypeA), dns.RcodeRefused, "", policy.ReasonDNSMalformed},
		{"root", query(".", dns.TypeA), dns.RcodeRefused, "", policy.ReasonDNSMalformed},
		{"two questions", two, dns.RcodeFormatError, "", policy.ReasonDNSMalformed},
		{"class CH", chaos, dns.RcodeRefused, "", policy.ReasonDNSMalformed},
		{"not a query", notify, dns.RcodeFormatError, "", policy.ReasonDNSMalformed},
	}
	s, d := newServer(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(d.all())
			m := s.Answer(tc.q, netip.MustParseAddrPort("10.0.0.2:5353"))
			if m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			got := ""
			for _, rr := range m.Answer {
				switch r := rr.(type) {
				case *dns.A:
					got = r.A.String()
				case *dns.AAAA:
					got = r.AAAA.String()
				default:
					t.Fatalf("unexpected record %v", rr)
				}
				if rr.Header().Name != tc.q.Question[0].Name {
					t.Fatalf("answer for %q, asked %q", rr.Header().Name, tc.q.Question[0].Name)
				}
			}
			if got != tc.answer || len(m.Answer) > 1 || len(m.Ns)+len(m.Extra) != 0 {
				t.Fatalf("answer %q (%d records, %d ns, %d extra), want %q", got, len(m.Answer), len(m.Ns), len(m.Extra), tc.answer)
			}
			after := d.all()
			if tc.reason == "" {
				if len(after) != before {
					t.Fatalf("reported %+v for an allowed query", after[before:])
				}
				return
			}
			if len(after) != before+1 || after[before].Reason != tc.reason {
				t.Fatalf("denials %+v, want one %s", after[before:], tc.reason)
			}
		})
	}
}

func TestDenialCutsAndHashesTheName(t *testing.T) {
	s, d := newServer(t)
	name := strings.Repeat("secretdata", 12) + ".evil.example.net."
	s.Answer(query(name, dns.TypeA), netip.AddrPort{})
	got := d.all()
	if len(got) != 1 {
		t.Fatalf("denials %+v", got)
	}
	if len(got[0].Name) > MaxAuditName+len("…") || strings.Contains(got[0].Name, strings.Repeat("secretdata", 7)) {
		t.Fatalf("name not cut: %q", got[0].Name)
	}
	if len(got[0].NameHash) != 64 || got[0].Type != "A" {
		t.Fatalf("denial %+v", got[0])
	}
}

func TestRateLimit(t *testing.T) {
	s, d := newServer(t)
	s.Rate, s.Burst, s.ReportRate = 1, 3, 1
	refused := 0
	for range 10 {
		if s.Answer(query("api.example.com.", dns.TypeA), netip.AddrPort{}).Rcode == dns.RcodeRefused {
			refused++
		}
	}
	if refused != 7 {
		t.Fatalf("%d of 10 refused, want 7 (burst 3)", refused)
	}
	got := d.all()
	if len(got) == 0 || len(got) >= 7 || got[0].Reason != policy.ReasonDNSRateLimited {
		t.Fatalf("denials %+v: want rate-limited reports, themselves limited", got)
	}
}

func TestMap(t *testing.T) {
	m, err := NewMap(netip.MustParsePrefix("198.18.0.0/30"), netip.MustParsePrefix("fd00::/126"))
	if err != nil {
		t.Fatal(err)
	}
	a1, b1, _ := m.Addrs("a.example")
	a2, b2, _ := m.Addrs("b.example")
	again, _, _ := m.Addrs("a.example")
	if a1 == a2 || b1 == b2 || again != a1 || a1.String() != "198.18.0.1" || b2.String() != "fd00::2" {
		t.Fatalf("addresses %v %v %v %v %v", a1, a2, b1, b2, again)
	}
	if _, _, err := m.Addrs("c.example"); err != ErrExhausted {
		t.Fatalf("third name in a /30: %v, want ErrExhausted (no reuse, no broadcast)", err)
	}
	for a, want := range map[netip.Addr]string{a1: "a.example", b2: "b.example", netip.AddrFrom16(a2.As16()): "b.example"} {
		if n, ok := m.Name(a); !ok || n != want {
			t.Fatalf("Name(%v) = %q %v, want %q", a, n, ok, want)
		}
	}
	if _, ok := m.Name(netip.MustParseAddr("198.18.0.3")); ok {
		t.Fatal("an address never handed out maps to a name")
	}
	for _, bad := range [][2]string{{"198.18.0.0/31", "fd00::/64"}, {"fd00::/64", "fd00::/64"}, {"198.18.0.0/15", "::ffff:0:0/96"}} {
		if _, err := NewMap(netip.MustParsePrefix(bad[0]), netip.MustParsePrefix(bad[1])); err == nil {
			t.Fatalf("NewMap(%v) accepted", bad)
		}
	}
}

// serveLoopback serves s on loopback UDP and TCP until t ends and returns
// the two endpoints.
func serveLoopback(t *testing.T, s *Server) []struct{ net, addr string } {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Serve(pc, l)
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return []struct{ net, addr string }{{"udp", pc.LocalAddr().String()}, {"tcp", l.Addr().String()}}
}

// TestServeUDPAndTCP answers real queries over loopback sockets.
func TestServeUDPAndTCP(t *testing.T) {
	s, d := newServer(t)
	for _, c := range serveLoopback(t, s) {
		cl := &dns.Client{Net: c.net, Timeout: 2 * time.Second}
		r, _, err := cl.Exchange(query("api.example.com.", dns.TypeA), c.addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("%s: %v %v", c.net, r, err)
		}
		two := query("evil.example.net.", dns.TypeA)
		two.Question = append(two.Question, two.Question[0])
		r, _, err = cl.Exchange(two, c.addr)
		if err != nil || r.Rcode != dns.RcodeFormatError {
			t.Fatalf("%s two questions: %v %v", c.net, r, err)
		}
	}
	if got := d.all(); len(got) != 2 || got[0].Reason != policy.ReasonDNSMalformed {
		t.Fatalf("denials %+v", got)
	}
}

// TestServeAnswersOnlyItsSandbox: a query from a source From rejects gets
// no answer and no audit line, over UDP and TCP.
func TestServeAnswersOnlyItsSandbox(t *testing.T) {
	s, d := newServer(t)
	s.From = func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }
	for _, c := range serveLoopback(t, s) {
		for _, src := range []string{"127.0.0.1", "127.0.0.2"} {
			cl := &dns.Client{Net: c.net, Timeout: 300 * time.Millisecond}
			if c.net == "udp" {
				cl.Dialer = &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}, Timeout: cl.Timeout}
			} else {
				cl.Dialer = &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: cl.Timeout}
			}
			r, _, err := cl.Exchange(query("api.example.com.", dns.TypeA), c.addr)
			answered := err == nil && r != nil && len(r.Answer) == 1
			if answered != (src == "127.0.0.2") {
				t.Errorf("%s from %s: answered=%v (%v)", c.net, src, answered, err)
			}
		}
	}
	if got := d.all(); len(got) != 0 {
		t.Errorf("queries from elsewhere were audited: %+v", got)
	}
}

func FuzzAnswer(f *testing.F) {
	for _, q := range []*dns.Msg{query("api.example.com.", dns.TypeA), query("x.example.", dns.TypeTXT)} {
		b, _ := q.Pack()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := NewMap(DefaultV4, DefaultV6)
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{Map: m, Allowed: func(n string) bool { return n == "api.example.com" }, Denied: func(d Denial) {
			if len(d.Name) > MaxAuditName+len("…") || strings.ContainsAny(d.Name, "\x00\n\r") {
				t.Fatalf("denial name %q not cut or escaped", d.Name)
			}
		}}
		q := new(dns.Msg)
		if q.Unpack(b) != nil {
			return
		}
		r := s.Answer(q, netip.AddrPort{})
		for _, rr := range r.Answer {
			if !strings.EqualFold(rr.Header().Name, "api.example.com.") {
				t.Fatalf("answered %v", rr)
			}
		}
		if _, err := r.Pack(); err != nil {
			t.Fatalf("reply does not pack: %v", err)
		}
	})
}

// TestMapBoundsItsNames: however wide the range, a Map gives addresses to
// MaxNames names at most, and still answers for those it has.
func TestMapBoundsItsNames(t *testing.T) {
	m, err := NewMap(DefaultV4, DefaultV6)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxNames {
		if _, _, err := m.Addrs(fmt.Sprintf("n%d.example", i)); err != nil {
			t.Fatalf("name %d: %v", i, err)
		}
	}
	if _, _, err := m.Addrs("one-more.example"); err != ErrExhausted {
		t.Fatalf("name %d: %v, want ErrExhausted", MaxNames+1, err)
	}
	if _, _, err := m.Addrs("n7.example"); err != nil {
		t.Fatalf("a name already mapped: %v", err)
	}
}
