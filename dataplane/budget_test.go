package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aileronhq/aileron/policy"
)

// ledger is a session's budgets kept in memory, as package budgets keeps
// them in the shared state: a model list, and a bytes budget counted from
// what the proxy charges. It keeps every admission and charge it saw.
type ledger struct {
	mu       sync.Mutex
	admitted []Admission
	charged  Spent
	checked  int   // Check calls that let a request through uncounted
	fail     error // Admit's answer when set: the state cannot be reached
}

func (l *ledger) Admit(_ context.Context, s *Session, a Admission) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	if a.ModelCall && a.Upgrade && s.Limits.MaxTokens > 0 {
		return &BudgetError{Reason: policy.ReasonUpgradeRefused, Message: "no model WebSocket under a token budget"}
	}
	if a.ModelCall && !s.Limits.AllowsModel(a.Model) {
		return &BudgetError{Reason: policy.ReasonModelNotAllowed, Message: "model " + a.Model + " is not on the session's list"}
	}
	if s.Limits.MaxBytes > 0 && l.charged.Bytes >= s.Limits.MaxBytes || s.Limits.MaxTokens > 0 && l.charged.Tokens >= s.Limits.MaxTokens {
		return &BudgetError{Reason: policy.ReasonBudgetExhausted, Message: "bytes used up", RetryAfter: 89*time.Second + time.Millisecond}
	}
	l.admitted = append(l.admitted, a)
	return nil
}

// waitTokens waits (a bounded while) for the proxy to charge at least
// want tokens, which it does after the client has the whole answer, and
// returns what was charged.
func (l *ledger) waitTokens(want int64) int64 {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		got := l.charged.Tokens
		l.mu.Unlock()
		if got >= want || time.Now().After(deadline) {
			return got
		}
	}
}

func (l *ledger) Check(_ context.Context, s *Session, a Admission) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	if s.Limits.MaxBytes > 0 && l.charged.Bytes >= s.Limits.MaxBytes || s.Limits.MaxTokens > 0 && l.charged.Tokens >= s.Limits.MaxTokens {
		return &BudgetError{Reason: policy.ReasonBudgetExhausted, Message: "used up", RetryAfter: 89*time.Second + time.Millisecond}
	}
	l.checked++
	return nil
}

func (l *ledger) Charge(_ context.Context, _ *Session, u Spent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.charged.Bytes += u.Bytes
	l.charged.Tokens += u.Tokens
	return nil
}

// budgetSpec is testSpec with a model call (usage) beside its operations.
var budgetSpec = strings.Replace(testSpec, `"operations": [`,
	`"operations": [{"name": "messages", "method": "POST", "path": "/v1/messages", "hosts": ["api.example.com"], "usage": "anthropic"},
	{"name": "socket", "method": "GET", "path": "/v1/socket", "hosts": ["api.example.com"], "usage": "openai", "websocket": true},`, 1)

// budgetEnv is a proxy whose session s1 has limits l, with budgets b (nil:
// no budget stage) and approvals ap.
func budgetEnv(t *testing.T, l policy.Limits, b Budgets, ap Approvals, more ...func(*Proxy)) (*env, *http.Client) {
	t.Helper()
	spec, err := policy.ParseSpec("budget.json", []byte(budgetSpec))
	if err != nil {
		t.Fatal(err)
	}
	pol, errs := policy.Compile([]policy.Source{{Spec: spec, Hash: "h", Origin: "budget.json"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var e *env
	e = newEnv(t, func(p *Proxy) {
		p.Policy.Store(pol)
		p.Sessions = staticSessions{"s1": {"tok-" + t.Name(), &Session{ID: "s1", CA: p.Sessions.(staticSessions)["s1"].sess.CA, Limits: &l}}}
		p.Budgets, p.Approvals = b, ap
		for _, f := range more {
			f(p)
		}
	})
	return e, e.client(t, url.UserPassword("s1", e.token))
}

func post(t *testing.T, c *http.Client, method, target, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// expectRefusal checks resp is the refusal status/reason, with the reason
// in Proxy-Status too.
func expectRefusal(t *testing.T, resp *http.Response, status int, reason policy.Reason) Refusal {
	t.Helper()
	ref := readEnvelope(t, resp.Body)
	if resp.StatusCode != status || ref.Reason != reason {
		t.Fatalf("answer %d %s (%s); want %d %s", resp.StatusCode, ref.Reason, ref.Message, status, reason)
	}
	if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, `details="`+string(reason)+": ") {
		t.Errorf("Proxy-Status %q does not give the reason %s", ps, reason)
	}
	return ref
}

// Budgets learns the model a call asks for: a model call outside the
// session's models is refused 403 before anything is sent, also when its
// model cannot be read; one on the list, and a request that is no model
// call, go on.
func TestModelNotAllowed(t *testing.T) {
	led := &ledger{}
	e, c := budgetEnv(t, policy.Limits{Models: []string{"claude-sonnet-*"}}, led, nil)
	for _, body := range []string{`{"model":"gpt-4o","max_tokens":5}`, `{"max_tokens":5}`} {
		resp := post(t, c, "POST", "https://api.example.com/v1/messages", body)
		expectRefusal(t, resp, http.StatusForbidden, policy.ReasonModelNotAllowed)
	}
	if e.hits.Load() != 0 {
		t.Error("a refused model call reached the upstream")
	}
	resp := post(t, c, "POST", "https://api.example.com/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":5}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Echo-Body") != `{"model":"claude-sonnet-4-5","max_tokens":5}` {
		t.Errorf("a model call on the list: %d, upstream got %q; want 200 and the whole body", resp.StatusCode, resp.Header.Get("X-Echo-Body"))
	}
	if resp := post(t, c, "POST", "https://api.example.com/v1/items", `{}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a request that is no model call: %d; want 200", resp.StatusCode)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	want := []Admission{{ModelCall: true, Model: "claude-sonnet-4-5"}, {}}
	if len(led.admitted) != 2 || led.admitted[0] != want[0] || led.admitted[1] != want[1] {
		t.Errorf("admissions %+v; want %+v", led.admitted, want)
	}
}

// A request that starts under budget is sent whole and charged after, its
// head and body; the next is refused 429 budget_exhausted with Retry-After
// (rounded up to seconds) before the approval gate asks anyone and before
// anything is sent.
func TestBudgetExhausted(t *testing.T) {
	led, ap := &ledger{}, &scriptedApprovals{outcome: ApprovalApproved}
	e, c := budgetEnv(t, policy.Limits{MaxBytes: 100, Window: time.Hour}, led, ap)
	body := strings.Repeat("b", 1000)
	resp := post(t, c, "POST", "https://api.example.com/v1/items", body)
	if resp.StatusCode != http.StatusOK || len(resp.Header.Get("X-Echo-Body")) != len(body) {
		t.Fatalf("the first request: %d, upstream got %d body bytes; want 200 and all %d", resp.StatusCode, len(resp.Header.Get("X-Echo-Body")), len(body))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	led.mu.Lock()
	charged := led.charged.Bytes
	led.mu.Unlock()
	if charged < int64(len(body)+len("POST /v1/items HTTP/1.1\r\n")) || charged > int64(len(body))+1024 {
		t.Errorf("charged %d bytes; want the body's %d and the head", charged, len(body))
	}
	for _, m := range []string{"POST", "DELETE"} { // DELETE needs approval: refused before anyone is asked
		target := "https://api.example.com/v1/items"
		if m == "DELETE" {
			target += "/9"
		}
		resp = post(t, c, m, target, "x")
		expectRefusal(t, resp, http.StatusTooManyRequests, policy.ReasonBudgetExhausted)
		if ra := resp.Header.Get("Retry-After"); ra != "90" {
			t.Errorf("%s: Retry-After %q; want 90", m, ra)
		}
	}
	if e.hits.Load() != 1 {
		t.Errorf("upstream hits %d; want 1: a refused request was sent", e.hits.Load())
	}
	ap.mu.Lock()
	defer ap.mu.Unlock()
	if len(ap.asked) != 0 {
		t.Error("an over-budget request was held for a human's approval")
	}
}

// Without a budget stage, or when the stage cannot tell, a session with
// limits is refused 503: never served unbounded.
func TestBudgetsFailClosed(t *testing.T) {
	for name, b := range map[string]Budgets{"no stage": nil, "state unreachable": &ledger{fail: errors.New("connection refused")}} {
		t.Run(name, func(t *testing.T) {
			e, c := budgetEnv(t, policy.Limits{MaxRequests: 5}, b, nil)
			resp := post(t, c, "POST", "https://api.example.com/v1/items", "{}")
			if ref := readEnvelope(t, resp.Body); resp.StatusCode != http.StatusServiceUnavailable || ref.Reason != policy.ReasonNotReady {
				t.Errorf("answer %d %s; want 503 not_ready", resp.StatusCode, ref.Reason)
			}
			if e.hits.Load() != 0 {
				t.Error("the request was sent")
			}
		})
	}
}

// tokenEnv is a model upstream answering h, read by the usage reader,
// for session s1 with limits l and budgets led.
func tokenEnv(t *testing.T, h http.Handler, l policy.Limits, led *ledger) (*env, *http.Client) {
	t.Helper()
	var e *env
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.hits.Add(1); h.ServeHTTP(w, r) })
	e = newModelEnv(t, counted, func(p *Proxy) {
		p.Sessions = staticSessions{"s1": {"tok-" + t.Name(), &Session{ID: "s1", CA: p.Sessions.(staticSessions)["s1"].sess.CA, Limits: &l}}}
		p.Budgets, p.Usage = led, usageReader{}
	})
	return e, e.client(t, url.UserPassword("s1", e.token))
}

// A model call that starts under its token budget is sent whole and
// charged every token it reported, over the budget; the next call is
// refused.
func TestTokenBudgetCrossedByOneCall(t *testing.T) {
	led := &ledger{}
	e, c := tokenEnv(t, jsonAnswer(`{"type":"message","usage":{"input_tokens":700,"output_tokens":400}}`, true), policy.Limits{MaxTokens: 1000}, led)
	body := `{"model":"claude-sonnet-4-5","max_tokens":400}`
	if resp := post(t, c, "POST", "https://api.example.com/v1/messages", body); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first call: %d; want 200", resp.StatusCode)
	}
	if tokens := led.waitTokens(1100); tokens != 1100 {
		t.Errorf("charged %d tokens; want the 1100 the call reported", tokens)
	}
	resp := post(t, c, "POST", "https://api.example.com/v1/messages", body)
	expectRefusal(t, resp, http.StatusTooManyRequests, policy.ReasonBudgetExhausted)
	if e.hits.Load() != 1 {
		t.Errorf("upstream hits %d; want 1", e.hits.Load())
	}
}

// A model call whose successful answer reports no usage (a chat stream
// asked without include_usage, a batch, a client that leaves before the
// last event) cannot be counted, so under a token budget it is charged
// the whole budget: the next call is refused. A call that costs nothing
// (Gemini's countTokens) and an error answer are not charged.
func TestTokenBudgetUnreportedUsage(t *testing.T) {
	stream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasSuffix(r.URL.Path, ":countTokens"):
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"totalTokens":12}`)
		case r.URL.Path == "/v1/responses":
			http.Error(w, `{"error":{"type":"invalid_request_error"}}`, http.StatusBadRequest)
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			}
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		}
	})
	led := &ledger{}
	e, c := tokenEnv(t, stream, policy.Limits{MaxTokens: 10000}, led)
	free := post(t, c, "POST", "https://api.example.com/v1beta/models/gemini-2.5-flash:countTokens", `{"contents":[]}`)
	bad := post(t, c, "POST", "https://api.example.com/v1/responses", `{"model":"gpt-5","input":"x"}`)
	_, _ = io.Copy(io.Discard, free.Body)
	_, _ = io.Copy(io.Discard, bad.Body)
	resp := post(t, c, "POST", "https://api.example.com/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[]}`)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %d %v; want 200", resp.StatusCode, err)
	}
	// exactly the budget: countTokens and the error answer were charged nothing
	if tokens := led.waitTokens(10000); tokens != 10000 {
		t.Errorf("charged %d tokens; want the whole budget, 10000, for the stream that reported no usage and none for the others", tokens)
	}
	resp = post(t, c, "POST", "https://api.example.com/v1/chat/completions", `{"model":"gpt-4o","stream":true,"messages":[]}`)
	expectRefusal(t, resp, http.StatusTooManyRequests, policy.ReasonBudgetExhausted)
	if n := e.hits.Load(); n != 3 {
		t.Errorf("upstream hits %d; want 3", n)
	}
}

// Budgets learns that a model call opens a WebSocket, and refuses it
// before it is sent.
func TestModelWebSocketAdmission(t *testing.T) {
	led := &ledger{}
	e, c := budgetEnv(t, policy.Limits{MaxTokens: 1000}, led, nil)
	req, err := http.NewRequest("GET", "https://api.example.com/v1/socket", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	expectRefusal(t, resp, http.StatusForbidden, policy.ReasonUpgradeRefused)
	if e.hits.Load() != 0 {
		t.Error("the refused WebSocket reached the upstream")
	}
}

// spendingApprovals approves after the session used up its budget while
// the request waited (another call of it charged its tokens).
type spendingApprovals struct {
	scriptedApprovals
	led *ledger
}

func (s *spendingApprovals) Await(ctx context.Context, req *ApprovalRequest, d time.Duration) (ApprovalResult, error) {
	s.led.mu.Lock()
	s.led.charged.Tokens += 500
	s.led.mu.Unlock()
	return s.scriptedApprovals.Await(ctx, req, d)
}

// A held request admitted under budget is refused, not sent, when its
// session used the budget up while it waited for the human who approved it.
func TestHeldRequestRecheckedAfterApproval(t *testing.T) {
	led := &ledger{}
	ap := &spendingApprovals{scriptedApprovals: scriptedApprovals{outcome: ApprovalApproved}, led: led}
	e, c := budgetEnv(t, policy.Limits{MaxTokens: 100}, led, ap)
	resp := post(t, c, "DELETE", "https://api.example.com/v1/items/9", "x")
	expectRefusal(t, resp, http.StatusTooManyRequests, policy.ReasonBudgetExhausted)
	if n := e.hits.Load(); n != 0 {
		t.Errorf("upstream hits %d; want 0: the approved request was sent over budget", n)
	}
}

// A held request is counted once approved, not while it waits: polling for
// a pending approval costs the session no request.
func TestHeldRequestCountedOnceApproved(t *testing.T) {
	led, ap := &ledger{}, &scriptedApprovals{outcome: ApprovalPending}
	_, c := budgetEnv(t, policy.Limits{MaxRequests: 5}, led, ap)
	for range 3 {
		resp := post(t, c, "DELETE", "https://api.example.com/v1/items/9", "x")
		expectRefusal(t, resp, http.StatusForbidden, policy.ReasonApprovalPending)
	}
	ap.mu.Lock()
	ap.outcome = ApprovalApproved
	ap.mu.Unlock()
	if resp := post(t, c, "DELETE", "https://api.example.com/v1/items/9", "x"); resp.StatusCode != http.StatusOK {
		t.Fatalf("approved: %d; want 200", resp.StatusCode)
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	if len(led.admitted) != 1 || led.checked != 4 {
		t.Errorf("admitted %d, checked %d; want 1 admitted (once approved) and 4 checked (each wait)", len(led.admitted), led.checked)
	}
}
