package inject

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// strictEndpoint is a token endpoint that counts how often each refresh
// token is presented, answers its first request with a fault, and accepts
// the client only in one authentication style.
type strictEndpoint struct {
	*httptest.Server
	fault     func(http.ResponseWriter) // the first answer
	wantBasic bool                      // client in Authorization: Basic, else in the body
	secret    string                    // the client secret the endpoint expects

	mu        sync.Mutex
	requests  int
	presented map[string]int
	wrong     []string // requests made in another style, described
}

func newStrictEndpoint(t *testing.T, fault func(http.ResponseWriter), wantBasic bool, secret string) *strictEndpoint {
	e := &strictEndpoint{fault: fault, wantBasic: wantBasic, secret: secret, presented: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *strictEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	e.mu.Lock()
	e.requests++
	n := e.requests
	e.presented[r.PostForm.Get("refresh_token")]++
	style := e.checkStyle(r)
	if style != "" {
		e.wrong = append(e.wrong, fmt.Sprintf("request %d: %s", n, style))
	}
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case n == 1:
		e.fault(w)
	case style != "":
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
	default:
		fmt.Fprintf(w, `{"access_token":"access-%d","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-%d"}`, n, n)
	}
}

// checkStyle describes how r authenticates the client if that is not the
// endpoint's style, else returns "".
func (e *strictEndpoint) checkStyle(r *http.Request) string {
	user, pass, basic := r.BasicAuth()
	body := r.PostForm
	if e.wantBasic {
		if !basic || user != "client" || pass != url.QueryEscape(e.secret) || body.Has("client_id") || body.Has("client_secret") {
			return fmt.Sprintf("want Basic only; got basic=%v body client_id=%v client_secret=%v", basic, body.Has("client_id"), body.Has("client_secret"))
		}
		return ""
	}
	if basic || body.Get("client_id") != "client" || body.Get("client_secret") != e.secret {
		return fmt.Sprintf("want the client in the body only; got basic=%v body client_id=%v client_secret=%v", basic, body.Has("client_id"), body.Has("client_secret"))
	}
	return ""
}

func (e *strictEndpoint) counts() (requests int, presented map[string]int, wrong []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := map[string]int{}
	for k, v := range e.presented {
		p[k] = v
	}
	return e.requests, p, append([]string(nil), e.wrong...)
}

// A refresh that the endpoint answers with an error or a malformed body is
// not repeated in another authentication style: a provider that rotates
// refresh tokens would see the same token twice and revoke the chain. Each
// refresh attempt presents the refresh token once, in the style the entry
// chooses.
func TestOAuthRefreshPresentsTokenOncePerAttempt(t *testing.T) {
	faults := map[string]func(http.ResponseWriter){
		"error answer": func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_request"}`)
		},
		"server error": func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `<html>bad gateway</html>`)
		},
		"malformed body": func(w http.ResponseWriter) { fmt.Fprint(w, `{"access_token":`) },
	}
	styles := []struct {
		name      string
		secret    string
		method    string
		wantBasic bool
	}{
		{"secret, default", testClientSecret, "", true},
		{"public client, default", "", "", false},
		{"client_secret_basic", testClientSecret, AuthMethodBasic, true},
		{"client_secret_post", testClientSecret, AuthMethodPost, false},
		{"none", "", AuthMethodNone, false},
	}
	for fname, fault := range faults {
		for _, st := range styles {
			t.Run(fname+"/"+st.name, func(t *testing.T) {
				e := newStrictEndpoint(t, fault, st.wantBasic, st.secret)
				clk := &fakeClock{t: time.Now()}
				s := &OAuthSource{
					Config:     OAuthConfig{TokenURL: e.URL + "/token", ClientID: "client", ClientSecret: st.secret, AuthMethod: st.method},
					Token:      OAuthToken{RefreshToken: testRefresh},
					HTTPClient: e.Client(),
					Now:        clk.Now,
					Backoff:    func(int) time.Duration { return time.Minute },
				}
				_, err := s.AccessToken(context.Background())
				if n, p, _ := e.counts(); n != 1 || p[testRefresh] != 1 {
					t.Fatalf("after one refresh attempt: %d requests, refresh token presented %d times; want 1 and 1", n, p[testRefresh])
				}
				if !errors.Is(err, ErrRefreshFailed) {
					t.Fatalf("first refresh: err = %v, want ErrRefreshFailed", err)
				}
				clk.Add(2 * time.Minute)
				if got, err := s.AccessToken(context.Background()); err != nil || got != "access-2" {
					t.Fatalf("second refresh: %q, %v; want access-2", got, err)
				}
				clk.Add(2 * time.Hour)
				if got, err := s.AccessToken(context.Background()); err != nil || got != "access-3" {
					t.Fatalf("third refresh: %q, %v; want access-3", got, err)
				}
				n, p, wrong := e.counts()
				if n != 3 || p[testRefresh] != 2 || p["refresh-2"] != 1 || len(p) != 2 {
					t.Errorf("after three attempts: %d requests, presented %v; want 3, the first token twice (once per attempt), refresh-2 once", n, p)
				}
				if len(wrong) != 0 {
					t.Errorf("client authenticated in the wrong style: %v", wrong)
				}
			})
		}
	}
}

func TestOAuthAuthMethodRefused(t *testing.T) {
	tests := []struct {
		name, method, secret, want string
	}{
		{"unknown", "private_key_jwt", testClientSecret, "private_key_jwt"},
		{"basic without secret", AuthMethodBasic, "", "client_secret"},
		{"post without secret", AuthMethodPost, "", "client_secret"},
		{"none with secret", AuthMethodNone, testClientSecret, "client_secret"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAuthMethod(tc.method, tc.secret)
			if !errors.Is(err, ErrBadSecret) || !containsAll(err.Error(), tc.want, "token_endpoint_auth_method") {
				t.Fatalf("CheckAuthMethod = %v, want ErrBadSecret naming %q", err, tc.want)
			}
			if tc.secret != "" && containsAll(err.Error(), tc.secret) {
				t.Fatalf("error quotes the secret: %v", err)
			}
			e := newStrictEndpoint(t, func(w http.ResponseWriter) {}, true, tc.secret)
			s := &OAuthSource{
				Config:     OAuthConfig{TokenURL: e.URL, ClientID: "client", ClientSecret: tc.secret, AuthMethod: tc.method},
				Token:      OAuthToken{RefreshToken: testRefresh},
				HTTPClient: e.Client(),
			}
			if _, err := s.AccessToken(context.Background()); !errors.Is(err, ErrRefreshFailed) {
				t.Fatalf("refresh: err = %v, want ErrRefreshFailed", err)
			}
			if n, _, _ := e.counts(); n != 0 {
				t.Fatalf("the endpoint got %d requests; a refresh with an unusable method must not reach it", n)
			}
		})
	}
}

// containsAll reports whether s contains each of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A refresh the endpoint refuses for the client's authentication names the
// method used and where to choose another; it is not retried another way.
func TestOAuthRefreshInvalidClientNamesMethod(t *testing.T) {
	e := newStrictEndpoint(t, func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
	}, false, testClientSecret)
	s := &OAuthSource{
		Config:     OAuthConfig{TokenURL: e.URL, ClientID: "client", ClientSecret: testClientSecret},
		Token:      OAuthToken{RefreshToken: testRefresh},
		HTTPClient: e.Client(),
	}
	_, err := s.AccessToken(context.Background())
	if !errors.Is(err, ErrRefreshFailed) || !containsAll(err.Error(), "HTTP 401", "invalid_client", "token_endpoint_auth_method client_secret_basic") {
		t.Fatalf("err = %v, want ErrRefreshFailed naming invalid_client and client_secret_basic", err)
	}
	if strings.Contains(err.Error(), testClientSecret) || strings.Contains(err.Error(), testRefresh) {
		t.Fatalf("error leaks a secret: %v", err)
	}
	if n, _, _ := e.counts(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}
