package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The loopback listener takes one answer: a code with this login's state,
// or it fails the login (a state that is not its own, the provider's
// error, no code); it then answers nothing more and closes.
func TestLoginCallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		query  func(state string) url.Values
		status int
		code   string
		says   string
	}{
		{"code", func(s string) url.Values { return url.Values{"state": {s}, "code": {"CODE-0123456789"}} }, 200, "CODE-0123456789", ""},
		{"wrong state", func(s string) url.Values { return url.Values{"state": {s + "x"}, "code": {"CODE-0123456789"}} }, 400, "", "state is not this login's"},
		{"no state", func(string) url.Values { return url.Values{"code": {"CODE-0123456789"}} }, 400, "", "state is not this login's"},
		{"two states", func(s string) url.Values { return url.Values{"state": {s, s}, "code": {"CODE-0123456789"}} }, 400, "", "state is not this login's"},
		{"access denied", func(s string) url.Values {
			return url.Values{"state": {s}, "error": {"access_denied"}, "error_description": {"The user said no\u202e"}}
		}, 400, "", `the provider refused the authorization: access_denied (The user said no\u202e)`},
		{"no code", func(s string) url.Values { return url.Values{"state": {s}} }, 400, "", "no authorization code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cb, err := listenCallback()
			if err != nil {
				t.Fatal(err)
			}
			defer cb.close()
			if !strings.HasPrefix(cb.redirect, "http://127.0.0.1:") || len(cb.state) < 43 {
				t.Fatalf("redirect %q, state of %d characters; want 127.0.0.1 and 256 random bits", cb.redirect, len(cb.state))
			}
			// Another path is not the answer.
			if st, _ := get(t, strings.TrimSuffix(cb.redirect, "callback")+"favicon.ico"); st != http.StatusNotFound {
				t.Errorf("GET /favicon.ico = %d; want 404", st)
			}
			st, page := get(t, cb.redirect+"?"+tc.query(cb.state).Encode())
			if st != tc.status || !strings.Contains(page, "You may close this window") {
				t.Errorf("the browser got %d %q; want %d and a page saying it may close", st, page, tc.status)
			}
			code, err := cb.wait(t.Context(), time.Minute)
			if code != tc.code || tc.says == "" && err != nil || tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)) {
				t.Fatalf("wait = %q, %v; want %q, an error saying %q", code, err, tc.code, tc.says)
			}
			// One answer only: a second, even a good one, is told the login ended.
			if st, _ := get(t, cb.redirect+"?"+url.Values{"state": {cb.state}, "code": {"CODE-2"}}.Encode()); st != http.StatusGone {
				t.Errorf("a second answer got %d; want 410", st)
			}
			addr := strings.TrimSuffix(strings.TrimPrefix(cb.redirect, "http://"), "/callback")
			cb.close()
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				t.Errorf("the listener still accepts connections after the login")
			}
		})
	}
}

// No answer within the timeout fails the login, saying how to wait longer.
func TestLoginCallbackTimeout(t *testing.T) {
	cb, err := listenCallback()
	if err != nil {
		t.Fatal(err)
	}
	defer cb.close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := cb.wait(ctx, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer on "+cb.redirect+" within 50ms") ||
		!strings.Contains(err.Error(), "--timeout") {
		t.Fatalf("wait = %v; want a timeout naming --timeout", err)
	}
}

// A browser is opened only where there is a display, with the desktop's
// opener found on PATH.
func TestOpenBrowser(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("xdg-open is the Linux opener")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "opened")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > " + out + "\n"
	if err := os.WriteFile(filepath.Join(dir, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	const u = "https://auth.example.com/authorize?state=s&code_challenge=c"
	if openBrowser(u, func(string) string { return "" }) {
		t.Fatal("opened a browser without DISPLAY or WAYLAND_DISPLAY")
	}
	if !openBrowser(u, func(k string) string { return map[string]string{"WAYLAND_DISPLAY": "wayland-0"}[k] }) {
		t.Fatal("no browser opened with WAYLAND_DISPLAY set and xdg-open on PATH")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if got, err := os.ReadFile(out); err == nil && string(got) == u {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("xdg-open was not run with the authorize URL")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get fetches u and returns the status and body.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
