package dataplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/ca"
	"github.com/aileronhq/aileron/policy"
)

// deciderApprovals answers Await through decide, and keeps what it was
// asked; the real store (digest joins, the per-session limit, the
// compare-and-swap) lives in the control plane and is tested there and in
// integration/ask_test.go.
type deciderApprovals struct {
	mu     sync.Mutex
	asked  []*ApprovalRequest
	decide func(req *ApprovalRequest) (ApprovalResult, error)
}

func (a *deciderApprovals) Await(_ context.Context, req *ApprovalRequest, _ time.Duration) (ApprovalResult, error) {
	a.mu.Lock()
	a.asked = append(a.asked, req)
	a.mu.Unlock()
	return a.decide(req)
}

func (a *deciderApprovals) Covers(context.Context, string, string, string) error {
	return fmt.Errorf("no actions here")
}

func (a *deciderApprovals) requests() []*ApprovalRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*ApprovalRequest(nil), a.asked...)
}

// askEnv is newEnv whose session s1 is in ask mode, with a proposal
// store, approvals answered by decide and a recorder.
func askEnv(t *testing.T, decide func(*ApprovalRequest) (ApprovalResult, error)) (*env, *deciderApprovals, *recordingProposals, *listRecorder) {
	ap, props, rec := &deciderApprovals{decide: decide}, &recordingProposals{}, &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Approvals, p.Proposals, p.Recorder = ap, props, rec })
	e.proxy.Sessions.(staticSessions)["s1"].sess.Unknown = UnknownAsk
	return e, ap, props, rec
}

func outcome(o ApprovalOutcome) func(*ApprovalRequest) (ApprovalResult, error) {
	return func(*ApprovalRequest) (ApprovalResult, error) {
		return ApprovalResult{ID: "ap_ask", Outcome: o, Reason: "use the staging host"}, nil
	}
}

// TestAskHoldsUnknownRequest: in ask mode a request no operation matches
// is learned into a proposal and held for a human with a preview that
// names the proposal and no operation. Approved, with still no operation
// matching it, it is sent once, exactly the previewed bytes, with no
// credential, and recorded as allow_after_approval, unknown_approved;
// pending, denied (with the human's reason) and over the limit, nothing is
// sent and the envelope names both the approval and the proposal.
func TestAskHoldsUnknownRequest(t *testing.T) {
	const body = `{"note":"hello","n":[1,2]}`
	for _, tc := range []struct {
		name     string
		decide   func(*ApprovalRequest) (ApprovalResult, error)
		status   int
		reason   policy.Reason
		approval string
	}{
		{"approved: sent once", outcome(ApprovalApproved), 200, "", ""},
		{"pending", outcome(ApprovalPending), 403, policy.ReasonApprovalPending, "ap_ask"},
		{"denied with a reason", outcome(ApprovalDenied), 403, policy.ReasonApprovalDenied, "ap_ask"},
		{"consumed by an identical request", outcome(ApprovalConsumed), 403, policy.ReasonApprovalConsumed, "ap_ask"},
		{"over the limit", func(*ApprovalRequest) (ApprovalResult, error) {
			return ApprovalResult{}, fmt.Errorf("%w: session s1 already has 20 approvals waiting", ErrApprovalLimit)
		}, 429, policy.ReasonApprovalLimit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, ap, props, rec := askEnv(t, tc.decide)
			c := e.client(t, url.UserPassword("s1", e.token))
			req, _ := http.NewRequest("POST", "https://api.example.com/v1/unknown/7?dry=1", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer client-own")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			asked := ap.requests()
			if len(asked) != 1 || len(props.learned()) != 1 {
				t.Fatalf("asked %d times, learned %d; want once each", len(asked), len(props.learned()))
			}
			a := asked[0]
			pv := a.Preview
			if a.Op != nil || pv.ProposalID != "prop-POST" || pv.Operation != "" || pv.Connector != "" || pv.Credential != "" ||
				pv.Body == nil || string(pv.Body.Raw) != body || pv.Query != "dry=1" || a.Digest == "" {
				t.Errorf("asked %+v with preview %+v; want the whole request, its proposal, no operation", a, pv)
			}
			for _, f := range pv.Fields {
				if f.Declared {
					t.Errorf("field %s %s marked declared: no operation declares anything", f.Source, f.Name)
				}
			}
			if tc.status == 200 {
				if resp.StatusCode != 200 || e.hits.Load() != 1 || resp.Header.Get("X-Echo-Body") != body ||
					resp.Header.Get("X-Echo-Authorization") != "Bearer client-own" {
					t.Fatalf("got %d, upstream hits %d, body %q, authorization %q; want the previewed bytes sent once, as sent",
						resp.StatusCode, e.hits.Load(), resp.Header.Get("X-Echo-Body"), resp.Header.Get("X-Echo-Authorization"))
				}
				rec.mu.Lock()
				d := rec.decided
				rec.mu.Unlock()
				if len(d) != 1 || d[0].Decision != "allow_after_approval" || d[0].Reason != string(policy.ReasonUnknownApproved) ||
					d[0].Details["approval_id"] != "ap_ask" || d[0].Details["proposal_id"] != "prop-POST" || d[0].Operation != "" {
					t.Errorf("recorded %+v; want one allow_after_approval unknown_approved naming the approval and proposal", d)
				}
				return
			}
			env := readEnvelope(t, resp.Body)
			if resp.StatusCode != tc.status || env.Reason != tc.reason || env.ProposalID != "prop-POST" || env.ApprovalID != tc.approval ||
				resp.Header.Get(HeaderProposalID) != "prop-POST" || e.hits.Load() != 0 {
				t.Errorf("got %d %+v, upstream hits %d; want %d %s naming proposal prop-POST and approval %q, nothing sent",
					resp.StatusCode, env, e.hits.Load(), tc.status, tc.reason, tc.approval)
			}
			if tc.reason == policy.ReasonApprovalDenied && !strings.Contains(env.Message, "use the staging host") {
				t.Errorf("denied: %q does not carry the human's reason", env.Message)
			}
		})
	}
}

// askedRuleSpec is the rule a human accepts while a request is held: it
// matches the held request.
const askedRuleSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://learned/s1", "version": "1.0.0"},
  "tools": [{"name": "learned", "operations": [
    {"name": "unknown.post", "method": "POST", "path": "/v1/unknown/{id}", "hosts": ["api.example.com"]}
  ]}]
}`

// TestAskApprovedDecidedByNewRule: a rule that matches the held request,
// installed and reloaded while the human decides, decides it once
// approved: it goes on as that operation (its audit line names it, reason
// operation_matched, with the approval and proposal), sent once.
func TestAskApprovedDecidedByNewRule(t *testing.T) {
	var e *env
	e, _, _, rec := askEnv(t, func(*ApprovalRequest) (ApprovalResult, error) {
		spec, err := policy.ParseSpec("rule.json", []byte(askedRuleSpec))
		if err != nil {
			return ApprovalResult{}, err
		}
		pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h2", Origin: "rule.json"}}, nil)
		if len(errs) > 0 {
			return ApprovalResult{}, errs[0]
		}
		e.proxy.Policy.Store(pol) // the human accepted the proposal as a rule, then approved
		return ApprovalResult{ID: "ap_rule", Outcome: ApprovalApproved}, nil
	})
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Post("https://api.example.com/v1/unknown/9", "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || e.hits.Load() != 1 || resp.Header.Get("X-Echo-Body") != `{"x":1}` {
		t.Fatalf("got %d, upstream hits %d; want the request sent once", resp.StatusCode, e.hits.Load())
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decided) != 1 {
		t.Fatalf("recorded %d decisions, want 1", len(rec.decided))
	}
	d := rec.decided[0]
	if d.Connector != "local://learned/s1" || d.Operation != "unknown.post" || d.Decision != "allow" ||
		d.Reason != string(policy.ReasonMatched) || d.Details["approval_id"] != "ap_rule" || d.Details["proposal_id"] != "prop-POST" {
		t.Errorf("recorded %+v; want the new rule's operation, approved by ap_rule", d)
	}
}

// TestAskOnlyWhereItCan: a session in ask mode without an approval stage
// learns (refused, with a proposal, not held); a request carrying a
// placeholder is refused as such and learned, not held; a matched request
// is not held; a session switched live from deny to ask has its next
// request on the same tunnel held.
func TestAskOnlyWhereItCan(t *testing.T) {
	t.Run("no approvals: as learn", func(t *testing.T) {
		props := &recordingProposals{}
		e := learnEnv(t, UnknownAsk, props)
		c := e.client(t, url.UserPassword("s1", e.token))
		resp, err := c.Get("https://api.example.com/v1/other")
		if err != nil {
			t.Fatal(err)
		}
		env := readEnvelope(t, resp.Body)
		_ = resp.Body.Close()
		if env.Reason != policy.ReasonNoMatchingOperation || env.ProposalID != "prop-GET" || len(props.learned()) != 1 || e.hits.Load() != 0 {
			t.Errorf("got %+v, learned %d; want refused and learned, nothing sent", env, len(props.learned()))
		}
	})
	t.Run("placeholder and matched", func(t *testing.T) {
		e, ap, props, _ := askEnv(t, outcome(ApprovalApproved))
		c := e.client(t, url.UserPassword("s1", e.token))
		req, _ := http.NewRequest("GET", "https://api.example.com/v1/other", nil)
		req.Header.Set("X-Api-Key", "aileron-placeholder-0123456789abcdef")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		env := readEnvelope(t, resp.Body)
		_ = resp.Body.Close()
		if env.Reason != policy.ReasonPlaceholder || env.ProposalID != "prop-GET" || len(ap.requests()) != 0 {
			t.Errorf("placeholder: got %+v, asked %d; want placeholder_misuse, learned, not held", env, len(ap.requests()))
		}
		resp, err = c.Post("https://api.example.com/v1/items", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || len(ap.requests()) != 0 || len(props.learned()) != 1 {
			t.Errorf("matched: %d, asked %d, learned %d; want sent, neither asked nor learned", resp.StatusCode, len(ap.requests()), len(props.learned()))
		}
	})
	t.Run("switched live from deny to ask", func(t *testing.T) {
		ap, props := &deciderApprovals{decide: outcome(ApprovalPending)}, &recordingProposals{}
		var sw *switchingSessions
		e := newEnv(t, func(p *Proxy) {
			p.Approvals, p.Proposals = ap, props
			sw = &switchingSessions{staticSessions: p.Sessions.(staticSessions), mode: UnknownDeny}
			p.Sessions = sw
		})
		cc := e.h2Client(t) // one tunnel, authenticated in deny mode
		for _, mode := range []string{UnknownDeny, UnknownAsk} {
			sw.set(mode)
			req, _ := http.NewRequest("GET", "https://api.example.com/v1/other", nil)
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			env := readEnvelope(t, resp.Body)
			_ = resp.Body.Close()
			held := env.Reason == policy.ReasonApprovalPending && env.ApprovalID == "ap_ask" && env.ProposalID == "prop-GET"
			if held != (mode == UnknownAsk) {
				t.Errorf("mode %s: %+v; want held only in ask mode", mode, env)
			}
		}
		if len(ap.requests()) != 1 || e.hits.Load() != 0 {
			t.Errorf("asked %d times, upstream hits %d; want asked once, nothing sent", len(ap.requests()), e.hits.Load())
		}
	})
}

// TestAskSentOnceOnABrokenConnection: an unknown request a human approved
// (a GET, which a transport would otherwise send again on a fresh
// connection) that the upstream received on a pooled connection, which
// then broke before the answer, is not sent a second time.
func TestAskSentOnceOnABrokenConnection(t *testing.T) {
	upCA, err := ca.New(ca.Options{CommonName: "raw h1 root"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[r.URL.Path]++
			mu.Unlock()
			if strings.HasPrefix(r.URL.Path, "/v1/unknown/") {
				c, _, _ := http.NewResponseController(w).Hijack()
				_ = c.Close() // acted on it, then the connection broke before the answer
			}
		}),
		TLSConfig: &tls.Config{NextProtos: []string{"http/1.1"}, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return upCA.Leaf("api.example.com")
		}},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	e := newEnvUp(t, func(p *Proxy) {
		p.RootCAs = roots
		p.Guard.Resolve = map[string]netip.AddrPort{"api.example.com:443": netip.MustParseAddrPort(ln.Addr().String())}
		p.Approvals, p.Proposals = &deciderApprovals{decide: outcome(ApprovalApproved)}, &recordingProposals{}
	}, false)
	e.proxy.Sessions.(staticSessions)["s1"].sess.Unknown = UnknownAsk
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, path := range []string{"/v1/items/1", "/v1/unknown/1"} { // the first leaves a pooled connection
		resp, err := c.Get("https://api.example.com" + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["/v1/unknown/1"] != 1 {
		t.Fatalf("the approved unknown request reached the upstream %d times, want once (%v)", seen["/v1/unknown/1"], seen)
	}
}

// TestAskUnknownHostOverConnect: in ask mode a CONNECT to a host no
// connector names is intercepted as in learn mode, and its request is
// learned and held; once approved it is sent to that host with verified
// TLS like any (the stand-in upstream's certificate names only
// api.example.com, so here the send fails upstream_tls_failed). A private
// address is still refused at the CONNECT.
func TestAskUnknownHostOverConnect(t *testing.T) {
	props := &recordingProposals{}
	e := connectLearnEnv(t, UnknownAsk, props)
	ap := &deciderApprovals{decide: outcome(ApprovalApproved)}
	e.proxy.Approvals = ap
	c := e.client(t, url.UserPassword("s1", e.token))
	resp, err := c.Get("https://unknown.example.net/v2/things/9")
	if err != nil {
		t.Fatal(err)
	}
	env := readEnvelope(t, resp.Body)
	_ = resp.Body.Close()
	if len(props.learned()) != 1 || props.learned()[0].Host != "unknown.example.net" || len(ap.requests()) != 1 ||
		env.Reason != policy.ReasonUpstreamTLS {
		t.Errorf("got %d %+v, learned %+v, asked %d; want learned, asked, then sent with verified TLS", resp.StatusCode, env, props.learned(), len(ap.requests()))
	}
	if _, connResp := rawConnect(t, e, "10.0.0.1:443"); connResp.StatusCode != 403 {
		t.Errorf("CONNECT to a private address in ask mode: %d, want 403", connResp.StatusCode)
	}
}

// TestRejectedProposalIsNotAskedAgain: a request whose proposal a human
// rejected is refused at once with the human's reason, in ask mode never
// held again (approval_denied, nothing asked, nothing sent), in learn mode
// with the reason in place of the invitation to ask.
func TestRejectedProposalIsNotAskedAgain(t *testing.T) {
	for _, mode := range []string{UnknownAsk, UnknownLearn} {
		t.Run(mode, func(t *testing.T) {
			e, ap, props, _ := askEnv(t, outcome(ApprovalApproved))
			e.proxy.Sessions.(staticSessions)["s1"].sess.Unknown = mode
			props.rejected = "use the staging host"
			c := e.client(t, url.UserPassword("s1", e.token))
			resp, err := c.Get("https://api.example.com/v1/unknown/7")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			env := readEnvelope(t, resp.Body)
			want := policy.ReasonApprovalDenied
			if mode == UnknownLearn {
				want = policy.ReasonNoMatchingOperation
			}
			if resp.StatusCode != 403 || env.Reason != want || env.ProposalID != "prop-GET" ||
				!strings.Contains(env.Message, "use the staging host") || strings.Contains(env.Message, "request_access") ||
				len(ap.requests()) != 0 || e.hits.Load() != 0 {
				t.Errorf("got %d %+v, asked %d, upstream hits %d; want 403 %s with the human's reason, nothing asked or sent",
					resp.StatusCode, env, len(ap.requests()), e.hits.Load(), want)
			}
		})
	}
}
