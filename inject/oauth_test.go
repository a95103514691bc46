package inject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testClientSecret = "client-secret-0123456789"
	testRefresh      = "refresh-token-old-0123456789"
)

// tokenServer is a token endpoint that counts calls.
type tokenServer struct {
	*httptest.Server
	calls   atomic.Int64
	fail    atomic.Bool // answer 400 invalid_grant echoing what it got
	rotate  bool        // issue a new refresh token each time
	entered chan struct{}
	release chan struct{} // when non-nil, each call waits for it

	mu      sync.Mutex
	gotRTs  []string // refresh tokens received
	counter int
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{entered: make(chan struct{}, 100)}
	ts.Server = httptest.NewServer(http.HandlerFunc(ts.serve))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) serve(w http.ResponseWriter, r *http.Request) {
	ts.calls.Add(1)
	ts.entered <- struct{}{}
	if ts.release != nil {
		<-ts.release
	}
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	if ts.fail.Load() {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"invalid_grant","error_description":"bad refresh token %s for secret %s"}`, r.PostForm.Get("refresh_token"), testClientSecret)
		return
	}
	ts.mu.Lock()
	ts.counter++
	n := ts.counter
	ts.gotRTs = append(ts.gotRTs, r.PostForm.Get("refresh_token"))
	ts.mu.Unlock()
	resp := map[string]any{"access_token": fmt.Sprintf("access-%d", n), "token_type": "Bearer", "expires_in": 3600}
	if ts.rotate {
		resp["refresh_token"] = fmt.Sprintf("refresh-%d", n)
	}
	_ = json.NewEncoder(w).Encode(resp)
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type persisted struct {
	mu   sync.Mutex
	toks []OAuthToken
	err  error
}

func (p *persisted) save(t OAuthToken) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.toks = append(p.toks, t)
	return p.err
}

func (p *persisted) all() []OAuthToken {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]OAuthToken(nil), p.toks...)
}

func newSource(ts *tokenServer, clk *fakeClock, tok OAuthToken, p *persisted) *OAuthSource {
	return &OAuthSource{
		Config:     OAuthConfig{TokenURL: ts.URL + "/token", ClientID: "client", ClientSecret: testClientSecret},
		Token:      tok,
		Persist:    p.save,
		HTTPClient: ts.Client(),
		Now:        clk.Now,
		Backoff:    func(int) time.Duration { return time.Minute },
	}
}

func TestOAuthRefreshWhenNeeded(t *testing.T) {
	start := time.Now()
	tests := []struct {
		name        string
		tok         OAuthToken
		wantRefresh bool
	}{
		{"expired", OAuthToken{AccessToken: "old", RefreshToken: testRefresh, Expiry: start.Add(-time.Minute)}, true},
		{"within skew", OAuthToken{AccessToken: "old", RefreshToken: testRefresh, Expiry: start.Add(30 * time.Second)}, true},
		{"missing access token", OAuthToken{RefreshToken: testRefresh}, true},
		{"valid", OAuthToken{AccessToken: "old", RefreshToken: testRefresh, Expiry: start.Add(time.Hour)}, false},
		{"no expiry", OAuthToken{AccessToken: "old", RefreshToken: testRefresh}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTokenServer(t)
			p := &persisted{}
			s := newSource(ts, &fakeClock{t: start}, tc.tok, p)
			for range 3 {
				got, err := s.AccessToken(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				want := "old"
				if tc.wantRefresh {
					want = "access-1"
				}
				if got != want {
					t.Fatalf("AccessToken = %q, want %q", got, want)
				}
			}
			wantCalls := int64(0)
			if tc.wantRefresh {
				wantCalls = 1
			}
			if n := ts.calls.Load(); n != wantCalls {
				t.Fatalf("token endpoint called %d times, want %d", n, wantCalls)
			}
			if toks := p.all(); int64(len(toks)) != wantCalls {
				t.Fatalf("persisted %d tokens, want %d", len(toks), wantCalls)
			} else if wantCalls == 1 && (toks[0].AccessToken != "access-1" || toks[0].RefreshToken != testRefresh || toks[0].Expiry.IsZero()) {
				t.Fatalf("persisted %+v; want the new access token, the kept refresh token and an expiry", toks[0])
			}
		})
	}
}

func TestOAuthSingleFlight(t *testing.T) {
	ts := newTokenServer(t)
	ts.release = make(chan struct{})
	clk := &fakeClock{t: time.Now()}
	s := newSource(ts, clk, OAuthToken{AccessToken: "old", RefreshToken: testRefresh, Expiry: clk.Now().Add(-time.Second)}, &persisted{})
	const callers = 50
	var wg sync.WaitGroup
	results := make(chan string, callers)
	for range callers {
		wg.Go(func() {
			tok, err := s.AccessToken(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- tok
		})
	}
	<-ts.entered // one refresh is in flight; let it finish
	close(ts.release)
	wg.Wait()
	close(results)
	for tok := range results {
		if tok != "access-1" {
			t.Errorf("a caller got %q, want access-1", tok)
		}
	}
	if n := ts.calls.Load(); n != 1 {
		t.Fatalf("token endpoint called %d times by %d concurrent callers, want 1", n, callers)
	}
}

func TestOAuthRotatedRefreshTokenPersisted(t *testing.T) {
	ts := newTokenServer(t)
	ts.rotate = true
	clk := &fakeClock{t: time.Now()}
	p := &persisted{}
	s := newSource(ts, clk, OAuthToken{RefreshToken: testRefresh}, p)
	for i := 1; i <= 2; i++ {
		tok, err := s.AccessToken(context.Background())
		if err != nil || tok != fmt.Sprintf("access-%d", i) {
			t.Fatalf("refresh %d: %q, %v", i, tok, err)
		}
		clk.Add(2 * time.Hour) // expire it
	}
	toks := p.all()
	if len(toks) != 2 || toks[0].RefreshToken != "refresh-1" || toks[1].RefreshToken != "refresh-2" {
		t.Fatalf("persisted %+v; want the rotated refresh tokens", toks)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.gotRTs) != 2 || ts.gotRTs[0] != testRefresh || ts.gotRTs[1] != "refresh-1" {
		t.Fatalf("endpoint received refresh tokens %q; the second refresh must use the rotated one", ts.gotRTs)
	}
}

func TestOAuthFailureBackoff(t *testing.T) {
	ts := newTokenServer(t)
	ts.fail.Store(true)
	clk := &fakeClock{t: time.Now()}
	var failures, successes int
	s := newSource(ts, clk, OAuthToken{AccessToken: "old-access-0123", RefreshToken: testRefresh, Expiry: clk.Now().Add(-time.Second)}, &persisted{})
	s.OnRefresh = func(ok bool, err error) {
		if ok != (err == nil) {
			t.Errorf("OnRefresh(%v, %v)", ok, err)
		}
		if ok {
			successes++
		} else {
			failures++
		}
	}
	check := func(step string, wantErr bool) {
		t.Helper()
		_, err := s.AccessToken(context.Background())
		if wantErr != errors.Is(err, ErrRefreshFailed) {
			t.Fatalf("%s: err = %v, want ErrRefreshFailed = %v", step, err, wantErr)
		}
		if err != nil {
			for _, secret := range []string{testRefresh, testClientSecret, "old-access-0123"} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("%s: error %q reveals a secret", step, err)
				}
			}
		}
	}
	check("first", true)
	afterFirst := ts.calls.Load()
	if afterFirst == 0 {
		t.Fatal("the endpoint was never called")
	}
	clk.Add(30 * time.Second)
	check("within backoff", true)
	if n := ts.calls.Load(); n != afterFirst {
		t.Fatalf("a call within the backoff window reached the endpoint (%d → %d calls)", afterFirst, n)
	}
	clk.Add(31 * time.Second)
	check("after backoff", true)
	if n := ts.calls.Load(); n <= afterFirst {
		t.Fatalf("no retry after the backoff window (%d calls)", n)
	}
	ts.fail.Store(false)
	clk.Add(2 * time.Minute)
	check("recovered", false)
	if failures != 2 || successes != 1 {
		t.Fatalf("OnRefresh saw %d failures and %d successes, want 2 and 1", failures, successes)
	}
}

func TestOAuthOldTokenUsableDuringFailure(t *testing.T) {
	ts := newTokenServer(t)
	ts.fail.Store(true)
	clk := &fakeClock{t: time.Now()}
	s := newSource(ts, clk, OAuthToken{AccessToken: "still-valid", RefreshToken: testRefresh, Expiry: clk.Now().Add(30 * time.Second)}, &persisted{})
	for _, step := range []string{"refresh fails", "inside backoff"} {
		tok, err := s.AccessToken(context.Background())
		if err != nil || tok != "still-valid" {
			t.Fatalf("%s: %q, %v; want the unexpired old token", step, tok, err)
		}
	}
	clk.Add(31 * time.Second) // now really expired, still inside backoff
	if _, err := s.AccessToken(context.Background()); !errors.Is(err, ErrRefreshFailed) {
		t.Fatalf("expired token inside backoff: err = %v", err)
	}
}

func TestOAuthNoRefreshToken(t *testing.T) {
	ts := newTokenServer(t)
	clk := &fakeClock{t: time.Now()}
	s := newSource(ts, clk, OAuthToken{AccessToken: "x", Expiry: clk.Now().Add(-time.Second)}, &persisted{})
	if _, err := s.AccessToken(context.Background()); !errors.Is(err, ErrRefreshFailed) {
		t.Fatalf("err = %v", err)
	}
	if ts.calls.Load() != 0 {
		t.Fatal("the endpoint was called without a refresh token")
	}
}

func TestOAuthPersistFailure(t *testing.T) {
	ts := newTokenServer(t)
	clk := &fakeClock{t: time.Now()}
	p := &persisted{err: errors.New("disk full")}
	var events []error
	s := newSource(ts, clk, OAuthToken{RefreshToken: testRefresh}, p)
	s.OnRefresh = func(ok bool, err error) { events = append(events, err) }
	tok, err := s.AccessToken(context.Background())
	if tok != "access-1" || !errors.Is(err, ErrPersistFailed) || strings.Contains(err.Error(), "access-1") {
		t.Fatalf("AccessToken = %q, %v; want the new token and ErrPersistFailed", tok, err)
	}
	if tok, err = s.AccessToken(context.Background()); tok != "access-1" || err != nil || ts.calls.Load() != 1 {
		t.Fatalf("second call = %q, %v after %d calls; want the new token in use", tok, err, ts.calls.Load())
	}
	if len(events) != 1 || !errors.Is(events[0], ErrPersistFailed) {
		t.Fatalf("OnRefresh events %v", events)
	}
}

func TestOAuthCallerCancelDoesNotAbortRefresh(t *testing.T) {
	ts := newTokenServer(t)
	ts.release = make(chan struct{})
	clk := &fakeClock{t: time.Now()}
	s := newSource(ts, clk, OAuthToken{RefreshToken: testRefresh}, &persisted{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.AccessToken(ctx)
		errc <- err
	}()
	<-ts.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		tok, _ := s.AccessToken(context.Background())
		done <- tok
	}()
	close(ts.release)
	if tok := <-done; tok != "access-1" || ts.calls.Load() != 1 {
		t.Fatalf("second caller got %q after %d calls; want the shared refresh's token", tok, ts.calls.Load())
	}
}

func TestOAuthDefaultBackoff(t *testing.T) {
	s := &OAuthSource{}
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {100, 5 * time.Minute}} {
		if got := s.backoff(tc.n); got != tc.want {
			t.Errorf("backoff(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
	if s.skew() != DefaultSkew {
		t.Errorf("default skew %s", s.skew())
	}
}
