package dataplane

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// scriptedApprovals answers Await with a fixed outcome and keeps what it
// was asked; the real store lives in the control plane.
type scriptedApprovals struct {
	mu      sync.Mutex
	outcome ApprovalOutcome
	asked   []*ApprovalRequest
}

func (s *scriptedApprovals) Await(_ context.Context, req *ApprovalRequest, _ time.Duration) (ApprovalResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, req)
	return ApprovalResult{ID: "ap_test", Outcome: s.outcome, Reason: "not today", ReviewURL: "http://127.0.0.1:9091/"}, nil
}

func (s *scriptedApprovals) Covers(_ context.Context, id, _, _ string) error {
	if id != "ap_action" {
		return errors.New("not an approved action")
	}
	return nil
}

func TestApprovalGate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome ApprovalOutcome
		body    string
		status  int
		reason  policy.Reason
	}{
		{"approved forwards the previewed body", ApprovalApproved, `{"note":"hello"}`, 200, ""},
		{"denied", ApprovalDenied, `{"note":"x"}`, 403, "approval_denied"},
		{"still pending", ApprovalPending, `{"note":"x"}`, 403, "approval_pending"},
		{"already consumed", ApprovalConsumed, `{"note":"x"}`, 403, "approval_consumed"},
		{"too large to approve", ApprovalApproved, strings.Repeat("a", 2048), 403, "body_too_large_for_approval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap := &scriptedApprovals{outcome: tc.outcome}
			e := newEnv(t, func(p *Proxy) { p.Approvals = ap; p.ApprovalMaxBody = 1024 })
			c := e.client(t, url.UserPassword("s1", e.token))
			req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/9?force=1", strings.NewReader(tc.body))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.reason == "" {
				if e.hits.Load() != 1 {
					t.Fatalf("approved request reached the upstream %d times", e.hits.Load())
				}
				return
			}
			got := readEnvelope(t, resp.Body)
			if got.Reason != tc.reason || e.hits.Load() != 0 {
				t.Fatalf("envelope %+v, upstream hits %d", got, e.hits.Load())
			}
			if tc.outcome == ApprovalPending && (got.ApprovalID != "ap_test" || resp.Header.Get("Retry-After") == "") {
				t.Errorf("pending answer lacks the approval id or Retry-After: %+v %v", got, resp.Header)
			}
		})
	}
}

func TestApprovalPreviewAndDigest(t *testing.T) {
	ap := &scriptedApprovals{outcome: ApprovalPending}
	e := newEnv(t, func(p *Proxy) { p.Approvals = ap })
	c := e.client(t, url.UserPassword("s1", e.token))
	sends := []struct{ body, ctype, extra string }{
		{`{"note":"A"}`, "application/json", ""},
		{`{"note":"B"}`, "application/json", ""},
		{`{"note":"A"}`, "application/json", ""},
		{`{"note":"A"}`, "text/plain", ""},               // another Content-Type: another approval
		{`{"note":"A"}`, "application/json", "yes"},      // one more header: another approval
		{`{"note":"A"}`, "application/json, text/x", ""}, // a second value: another approval
	}
	for _, sd := range sends {
		req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/9?cc=x%1b", strings.NewReader(sd.body))
		req.Header.Set("Content-Type", sd.ctype)
		if sd.extra != "" {
			req.Header.Set("X-Extra", sd.extra)
		}
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "not forwarded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if len(ap.asked) != len(sends) {
		t.Fatalf("asked %d times", len(ap.asked))
	}
	digests := map[string]int{}
	for i, a := range ap.asked {
		if j, seen := digests[a.Digest]; seen && !(i == 2 && j == 0) {
			t.Errorf("send %d has the digest of send %d: the approval does not bind what differs", i, j)
		}
		digests[a.Digest] = i
	}
	if ap.asked[0].Digest != ap.asked[2].Digest {
		t.Errorf("identical retries have different digests")
	}
	pv := ap.asked[0].Preview
	if pv.Operation != "items.delete" || pv.Method != "DELETE" || pv.Host != "api.example.com:443" || pv.Path != "/v1/items/9" ||
		pv.Query != "cc=x%1b" || pv.BodyBytes != len(`{"note":"A"}`) {
		t.Errorf("preview %+v", pv)
	}
	want := []PreviewField{{Source: "path", Name: "id", Value: "9", Declared: true}, {Source: "query", Name: "cc", Value: "x\x1b"},
		{Source: "body", Name: "note", Value: `"A"`}}
	if !slices.Equal(pv.Fields, want) {
		t.Errorf("preview fields %+v, want %+v", pv.Fields, want)
	}
	for _, h := range pv.Headers {
		if h.Name == "X-Hop" || h.Name == "Connection" || h.Name == "Proxy-Authorization" {
			t.Errorf("preview shows %s, which is not forwarded", h.Name)
		}
	}
}

func TestSetLimitsAppliesToTheNextRequest(t *testing.T) {
	ap := &scriptedApprovals{outcome: ApprovalApproved}
	e := newEnv(t, func(p *Proxy) { p.Approvals = ap; p.ApprovalMaxBody = 1024 })
	c := e.client(t, url.UserPassword("s1", e.token))
	send := func() int {
		req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/9", strings.NewReader(strings.Repeat("b", 1500)))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := send(); s != 403 {
		t.Fatalf("1500-byte body under a 1024-byte limit: %d, want 403", s)
	}
	e.proxy.SetLimits(Limits{ApprovalMaxBody: 2048})
	if s := send(); s != 200 {
		t.Fatalf("after raising the limit to 2048: %d, want 200", s)
	}
}

// blockingApprovals waits for ctx like a store with nobody deciding.
type blockingApprovals struct{ entered chan struct{} }

func (b *blockingApprovals) Await(ctx context.Context, _ *ApprovalRequest, _ time.Duration) (ApprovalResult, error) {
	close(b.entered)
	<-ctx.Done()
	return ApprovalResult{ID: "ap_held", Outcome: ApprovalPending}, ctx.Err()
}

func (b *blockingApprovals) Covers(context.Context, string, string, string) error {
	return errors.New("no")
}

func TestHeldClientGetsAnEnvelopeAtShutdown(t *testing.T) {
	ap := &blockingApprovals{entered: make(chan struct{})}
	e := newEnv(t, func(p *Proxy) { p.Approvals = ap; p.ApprovalHold = time.Hour })
	c := e.client(t, url.UserPassword("s1", e.token))
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/9", nil)
		resp, err := c.Do(req)
		got <- answer{resp, err}
	}()
	<-ap.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.proxy.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a held request: %v", err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("held client got %v, want the approval_pending envelope", a.err)
	}
	defer a.resp.Body.Close()
	env := readEnvelope(t, a.resp.Body)
	if a.resp.StatusCode != 403 || env.Reason != "approval_pending" || env.ApprovalID != "ap_held" || !strings.Contains(env.Message, "shutting down") {
		t.Fatalf("%d %+v", a.resp.StatusCode, env)
	}
}

// gateApprovals holds every Await until release is closed.
type gateApprovals struct {
	waiting chan struct{}
	release chan struct{}
}

func (b *gateApprovals) Await(ctx context.Context, _ *ApprovalRequest, _ time.Duration) (ApprovalResult, error) {
	b.waiting <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return ApprovalResult{ID: "ap_block", Outcome: ApprovalPending}, nil
}

func (b *gateApprovals) Covers(context.Context, string, string, string) error {
	return errors.New("no")
}

// TestHeldBytesBudget: the bodies of requests held at once may not pass
// ApprovalMaxHeld, nor one session's ApprovalMaxHeldPerSession; one more
// is refused 429 approval_limit at once, naming the limit, and the budget
// comes back when the holds end.
func TestHeldBytesBudget(t *testing.T) {
	for _, tc := range []struct {
		name              string
		total, perSession int64
		limit             string
	}{
		{"in all", 1500, 10000, "approval.max_held_bytes "},
		{"per session", 10000, 1500, "approval.max_held_bytes_per_session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap := &gateApprovals{waiting: make(chan struct{}, 4), release: make(chan struct{})}
			e := newEnv(t, func(p *Proxy) {
				p.Approvals, p.ApprovalMaxBody, p.ApprovalMaxHeld, p.ApprovalMaxHeldPerSession = ap, 1024, tc.total, tc.perSession
			})
			c := e.client(t, url.UserPassword("s1", e.token))
			send := func(n int) (int, Refusal, http.Header) {
				req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/9", strings.NewReader(strings.Repeat("a", n)))
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return 0, Refusal{}, nil
				}
				defer resp.Body.Close()
				return resp.StatusCode, readEnvelope(t, resp.Body), resp.Header
			}
			first := make(chan int, 1)
			go func() { st, _, _ := send(1000); first <- st }()
			<-ap.waiting // 1000 bytes held
			st, ref, h := send(1000)
			if st != http.StatusTooManyRequests || ref.Reason != "approval_limit" || ref.Class != ClassLimited ||
				!strings.Contains(ref.Message+" ", tc.limit) || h.Get("Retry-After") == "" {
				t.Errorf("second held body: %d %+v (Retry-After %q), want 429 approval_limit naming %s", st, ref, h.Get("Retry-After"), tc.limit)
			}
			close(ap.release)
			<-first
			if st, ref, _ := send(1000); ref.Reason == "approval_limit" {
				t.Errorf("after the hold ended: %d %s, want the budget back", st, ref.Reason)
			}
			if e.proxy.held.total != 0 || len(e.proxy.held.bySession) != 0 {
				t.Errorf("budget after every hold ended: %d bytes, %v", e.proxy.held.total, e.proxy.held.bySession)
			}
		})
	}
}

// TestRequestTrailersAreNotForwarded: trailers of a chunked request reach
// neither the upstream of a plain request nor that of an approved one,
// where no preview or digest saw them.
func TestRequestTrailersAreNotForwarded(t *testing.T) {
	ap := &scriptedApprovals{outcome: ApprovalApproved}
	e := newEnv(t, func(p *Proxy) { p.Approvals = ap })
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, tc := range []struct{ method, path string }{{"POST", "/v1/items"}, {"DELETE", "/v1/items/9"}} {
		req, _ := http.NewRequest(tc.method, "https://api.example.com"+tc.path, io.MultiReader(strings.NewReader("hello")))
		req.ContentLength = -1 // chunked
		req.Trailer = http.Header{"X-Http-Method-Override": {"PUT"}, "X-A": {"1"}}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Echo-Body") != "hello" || resp.Header.Get("X-Echo-Trailers") != "0 map[]" {
			t.Errorf("%s %s: %d, upstream saw body %q and trailers %q; want the body and no trailer", tc.method, tc.path,
				resp.StatusCode, resp.Header.Get("X-Echo-Body"), resp.Header.Get("X-Echo-Trailers"))
		}
	}
}

// TestBodyMethodOverride: a "_method" field in a form or multipart body is
// refused (method_override) and the upstream never gets the whole request,
// wherever the field sits and however the reads split it; other bodies,
// and forms without it, pass.
func TestBodyMethodOverride(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client(t, url.UserPassword("s1", e.token))
	const mp = "--b\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"
	for _, tc := range []struct {
		name, ctype, body string
		refused           bool
	}{
		{"form", "application/x-www-form-urlencoded", "a=1&_method=DELETE", true},
		{"form, first", "application/x-www-form-urlencoded", "_method=DELETE&a=1", true},
		{"form, encoded name", "application/x-www-form-urlencoded", "a=1&%5Fmethod=DELETE", true},
		{"form, PHP-rewritten name", "application/x-www-form-urlencoded", "a=1&.method=DELETE", true},
		{"form, after a long value", "application/x-www-form-urlencoded", "a=" + strings.Repeat("x", 70000) + "&_METHOD=DELETE", true},
		{"form, name without value", "application/x-www-form-urlencoded", "a=1&_method", true},
		{"multipart", "multipart/form-data; boundary=b", mp, true},
		{"form without it", "application/x-www-form-urlencoded", "a=1&method=x&x_method=y&v=_method", false},
		{"JSON (not a form)", "application/json", `{"a":"_method=DELETE"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole := e.wholeBodies.Load()
			// One byte per read: names split across every boundary.
			req, _ := http.NewRequest("POST", "https://api.example.com/v1/items", iotest.OneByteReader(strings.NewReader(tc.body)))
			req.ContentLength = int64(len(tc.body))
			req.Header.Set("Content-Type", tc.ctype)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if !tc.refused {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
				return
			}
			if got := readEnvelope(t, resp.Body); resp.StatusCode != 403 || got.Reason != policy.ReasonMethodOverride {
				t.Fatalf("%d %+v, want 403 method_override", resp.StatusCode, got)
			}
			if e.wholeBodies.Load() != whole {
				t.Errorf("the upstream received the whole request")
			}
		})
	}
}
