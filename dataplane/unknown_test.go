package dataplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aileronhq/aileron/inject"
	"github.com/aileronhq/aileron/policy"
)

// recordingProposals is a proposal store that keeps what it was given.
type recordingProposals struct {
	mu   sync.Mutex
	got  []UnknownRequest
	fail error
	// rejected, when set, is the reason a human rejected every proposal.
	rejected string
}

func (r *recordingProposals) Record(_ context.Context, u UnknownRequest) (Learned, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return Learned{}, r.fail
	}
	r.got = append(r.got, u)
	return Learned{ID: "prop-" + u.Method, Rejected: r.rejected != "", Reason: r.rejected}, nil
}

func (r *recordingProposals) learned() []UnknownRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]UnknownRequest(nil), r.got...)
}

// learnEnv is newEnv whose session s1 is in mode unknown, with props as
// the proposal store (nil: none).
func learnEnv(t *testing.T, unknown string, props Proposals) *env {
	e := newEnv(t, func(p *Proxy) { p.Proposals = props })
	e.proxy.Sessions.(staticSessions)["s1"].sess.Unknown = unknown // before any request
	return e
}

// TestLearnRecordsUnknownRequests: in learn mode a request no operation
// matches is refused as in deny mode, never reaches the upstream, and is
// handed to Proposals once, without its query or any header value; its
// envelope and message name the proposal. Matched and approval-gated requests are
// not learned.
func TestLearnRecordsUnknownRequests(t *testing.T) {
	props := &recordingProposals{}
	e := learnEnv(t, UnknownLearn, props)
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, tc := range []struct {
		method, url, auth string
		status            int
		reason, proposal  string
		want              *UnknownRequest
	}{
		{"GET", "https://api.example.com/v1/items/42", "", 200, "", "", nil},
		{"DELETE", "https://api.example.com/v1/items/42", "", 403, "approval_pending", "", nil},
		{"GET", "https://api.example.com/v1/items?token=SECRETQ", "Bearer SECRETH", 403, "no_matching_operation", "prop-GET",
			&UnknownRequest{Session: "s1", Method: "GET", Host: "api.example.com", Port: 443, Path: "/v1/items", Credential: true}},
		{"PUT", "https://api.example.com/v1/items/42", "", 403, "no_matching_operation", "prop-PUT",
			&UnknownRequest{Session: "s1", Method: "PUT", Host: "api.example.com", Port: 443, Path: "/v1/items/42"}},
	} {
		before, n := e.hits.Load(), len(props.learned())
		req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(""))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.url, err)
		}
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.url, resp.StatusCode, tc.status)
		}
		var env Refusal
		if tc.status != 200 {
			env = readEnvelope(t, resp.Body)
			if env.Reason != "approval_pending" && e.hits.Load() != before {
				t.Errorf("%s %s: refused request reached the upstream", tc.method, tc.url)
			}
		}
		_ = resp.Body.Close()
		if h := resp.Header.Get(HeaderProposalID); h != tc.proposal {
			t.Errorf("%s %s: %s %q, want %q", tc.method, tc.url, HeaderProposalID, h, tc.proposal)
		}
		if string(env.Reason) != tc.reason || env.ProposalID != tc.proposal {
			t.Errorf("%s %s: envelope %+v, want reason %q proposal_id %q", tc.method, tc.url, env, tc.reason, tc.proposal)
		}
		// The message says it too, and how to ask: some clients show only it.
		noted := strings.Contains(env.Message, "; recorded as proposal "+tc.proposal+" for a human to decide") &&
			strings.Contains(env.Message, "request_access")
		if noted != (tc.proposal != "") || noted != strings.Contains(resp.Header.Get("X-Aileron-Message"), "recorded as proposal") {
			t.Errorf("%s %s: message %q (header %q); want the proposal named in it: %v", tc.method, tc.url, env.Message,
				resp.Header.Get("X-Aileron-Message"), tc.proposal != "")
		}
		got := props.learned()[n:]
		if tc.want == nil {
			if len(got) != 0 {
				t.Errorf("%s %s: learned %+v, want nothing", tc.method, tc.url, got)
			}
			continue
		}
		if len(got) != 1 {
			t.Fatalf("%s %s: learned %d times, want once", tc.method, tc.url, len(got))
		}
		u := got[0]
		if u.AuditID == "" || u.AuditID != env.AuditID || u.Time.IsZero() {
			t.Errorf("%s %s: audit id %q (envelope %q), time %v", tc.method, tc.url, u.AuditID, env.AuditID, u.Time)
		}
		u.AuditID, u.Time = "", tc.want.Time
		if u != *tc.want {
			t.Errorf("%s %s: learned %+v, want %+v", tc.method, tc.url, u, *tc.want)
		}
	}
}

// TestLearnOverH2: an HTTP/2 stream no operation matches is learned like
// an HTTP/1.1 request, and never sent.
func TestLearnOverH2(t *testing.T) {
	props := &recordingProposals{}
	e := learnEnv(t, UnknownLearn, props)
	cc := e.h2Client(t)
	req, _ := http.NewRequest("POST", "https://api.example.com/v1/other/7?k=SECRETQ", strings.NewReader("{}"))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"proposal_id":"prop-POST"`) {
		t.Errorf("got %d %s; want 403 with proposal_id prop-POST", resp.StatusCode, body)
	}
	if e.hits.Load() != 0 {
		t.Error("a learned request reached the upstream")
	}
	got := props.learned()
	if len(got) != 1 || got[0].Path != "/v1/other/7" || got[0].Method != "POST" || got[0].Credential {
		t.Errorf("learned %+v; want one POST /v1/other/7 without a credential", got)
	}
}

// TestLearnOnlyInLearnMode: a session in deny mode, a learn session on a
// daemon without a proposal store, and a failing store all refuse as in
// deny mode, with no proposal id.
func TestLearnOnlyInLearnMode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unknown string
		props   *recordingProposals
		learned int
	}{
		{"deny mode", UnknownDeny, &recordingProposals{}, 0},
		{"default mode", "", &recordingProposals{}, 0},
		{"no store", UnknownLearn, nil, 0},
		{"failing store", UnknownLearn, &recordingProposals{fail: errors.New("disk full")}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var props Proposals
			if tc.props != nil {
				props = tc.props
			}
			e := learnEnv(t, tc.unknown, props)
			c := e.client(t, url.UserPassword("s1", e.token))
			resp, err := c.Get("https://api.example.com/v1/items")
			if err != nil {
				t.Fatal(err)
			}
			env := readEnvelope(t, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 403 || env.Reason != "no_matching_operation" || env.ProposalID != "" {
				t.Errorf("got %d %+v; want 403 no_matching_operation without a proposal", resp.StatusCode, env)
			}
			if e.hits.Load() != 0 {
				t.Error("a refused request reached the upstream")
			}
			if tc.props != nil && len(tc.props.learned()) != tc.learned {
				t.Errorf("learned %+v", tc.props.learned())
			}
		})
	}
}

// switchingSessions is staticSessions whose unknown-request mode a test
// changes while tunnels are open, as sessions.Manager's SetUnknown does.
type switchingSessions struct {
	staticSessions
	mu   sync.Mutex
	mode string
}

func (s *switchingSessions) set(mode string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mode = mode
}

func (s *switchingSessions) Session(id string) (*Session, error) {
	base, err := s.staticSessions.Session(id)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *base
	c.Unknown = s.mode
	return &c, nil
}

// TestLearnModeChangeTakesEffectOnOpenTunnel: a session switched to learn
// (and back) while its tunnel is open has the next request on that tunnel
// decided under the new mode.
func TestLearnModeChangeTakesEffectOnOpenTunnel(t *testing.T) {
	props := &recordingProposals{}
	var sw *switchingSessions
	e := newEnv(t, func(p *Proxy) {
		p.Proposals = props
		sw = &switchingSessions{staticSessions: p.Sessions.(staticSessions), mode: UnknownDeny}
		p.Sessions = sw
	})
	cc := e.h2Client(t) // one tunnel, authenticated once, in deny mode
	for i, mode := range []string{UnknownDeny, UnknownLearn, UnknownDeny} {
		sw.set(mode)
		req, _ := http.NewRequest("GET", "https://api.example.com/v1/items", nil)
		resp, err := cc.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		env := readEnvelope(t, resp.Body)
		_ = resp.Body.Close()
		if learned := env.ProposalID != ""; learned != (mode == UnknownLearn) || len(props.learned()) != min(i, 1) {
			t.Errorf("request %d in mode %s: envelope %+v, learned %d; want learned only in learn mode", i, mode, env, len(props.learned()))
		}
	}
	if e.hits.Load() != 0 {
		t.Error("a refused request reached the upstream")
	}
}

// TestLearnPlaceholderRequest: an unknown request carrying a session
// placeholder is refused as such (reason placeholder) and still learned,
// marked as carrying a credential, without the placeholder's value.
func TestLearnPlaceholderRequest(t *testing.T) {
	props := &recordingProposals{}
	e := learnEnv(t, UnknownLearn, props)
	c := e.client(t, url.UserPassword("s1", e.token))
	req, _ := http.NewRequest("GET", "https://api.example.com/v1/other", nil)
	req.Header.Set("X-Api-Key", inject.PlaceholderPrefix+"0123456789abcdef")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	env := readEnvelope(t, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 403 || env.Reason != policy.ReasonPlaceholder || env.ProposalID != "prop-GET" {
		t.Errorf("got %d %+v; want 403 placeholder with proposal prop-GET", resp.StatusCode, env)
	}
	got := props.learned()
	if len(got) != 1 || !got[0].Credential || got[0].Path != "/v1/other" || e.hits.Load() != 0 {
		t.Errorf("learned %+v, upstream hits %d; want one credential-carrying GET /v1/other, nothing sent", got, e.hits.Load())
	}
}
