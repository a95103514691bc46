package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const testPEM = "-----BEGIN CERTIFICATE-----\nTUlJQg==\n-----END CERTIFICATE-----\n"

func TestMergeEnv(t *testing.T) {
	vars := []EnvVar{{"HTTPS_PROXY", "http://s:t@127.0.0.1:9080"}, {"https_proxy", "http://s:t@127.0.0.1:9080"}, {"NO_PROXY", "localhost"}, {"LINEAR_API_KEY", "placeholder"}}
	tests := []struct {
		name string
		base []string
		want []string
	}{
		{"empty base", nil, []string{"HTTPS_PROXY=http://s:t@127.0.0.1:9080", "https_proxy=http://s:t@127.0.0.1:9080", "NO_PROXY=localhost", "LINEAR_API_KEY=placeholder"}},
		{"inherited proxies and keys are replaced, the rest kept in order",
			[]string{"A=1", "https_proxy=http://corp:3128", "HTTPS_PROXY=http://corp:3128", "B=2", "NO_PROXY=*", "LINEAR_API_KEY=lin_real_secret", "C=x=y"},
			[]string{"A=1", "B=2", "C=x=y", "HTTPS_PROXY=http://s:t@127.0.0.1:9080", "https_proxy=http://s:t@127.0.0.1:9080", "NO_PROXY=localhost", "LINEAR_API_KEY=placeholder"}},
		{"session-owned names go even when the session does not set them",
			[]string{"ALL_PROXY=socks5://x", "all_proxy=socks5://x", "AILERON_API_URL=https://old", "AILERON_SESSION_ID=s_old", "no_proxy=*"},
			[]string{"no_proxy=*", "HTTPS_PROXY=http://s:t@127.0.0.1:9080", "https_proxy=http://s:t@127.0.0.1:9080", "NO_PROXY=localhost", "LINEAR_API_KEY=placeholder"}},
		{"every duplicate goes", []string{"HTTPS_PROXY=a", "HTTPS_PROXY=b", "=weird", "NOEQUALS"},
			[]string{"=weird", "NOEQUALS", "HTTPS_PROXY=http://s:t@127.0.0.1:9080", "https_proxy=http://s:t@127.0.0.1:9080", "NO_PROXY=localhost", "LINEAR_API_KEY=placeholder"}},
		{"names compare exactly", []string{"Https_Proxy=keep", "HTTPS_PROXY_EXTRA=keep"},
			[]string{"Https_Proxy=keep", "HTTPS_PROXY_EXTRA=keep", "HTTPS_PROXY=http://s:t@127.0.0.1:9080", "https_proxy=http://s:t@127.0.0.1:9080", "NO_PROXY=localhost", "LINEAR_API_KEY=placeholder"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MergeEnv(tt.base, vars); !slices.Equal(got, tt.want) {
				t.Errorf("MergeEnv =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestPrependPath(t *testing.T) {
	for _, c := range []struct{ env, want []string }{
		{[]string{"A=1", "PATH=/usr/bin:/bin"}, []string{"A=1", "PATH=/x/bin:/y:/usr/bin:/bin"}},
		{[]string{"A=1"}, []string{"A=1", "PATH=/x/bin:/y"}},
	} {
		if got := prependPath(c.env, []string{"/x/bin", "/y"}); !slices.Equal(got, c.want) {
			t.Errorf("prependPath(%q) = %q, want %q", c.env, got, c.want)
		}
	}
}

// TestLaunchEnvironment runs a real child: the session's variables replace
// inherited ones, the CA bundle is a private file while the child runs and
// is gone afterwards.
func TestLaunchEnvironment(t *testing.T) {
	info := testInfo()
	info.Placeholders = map[string]string{"LINEAR_API_KEY": "aileron-placeholder"}
	tmp := t.TempDir()
	var out, errOut bytes.Buffer
	script := `printf '%s\n' "$HTTPS_PROXY" "$https_proxy" "$HTTP_PROXY" "$http_proxy" "$NO_PROXY" "$no_proxy" "${ALL_PROXY-unset}" "${all_proxy-unset}" ` +
		`"$KEEP" "$LINEAR_API_KEY" "$AILERON_API_URL" "$AILERON_SESSION_ID" "$SSL_CERT_FILE" "$CURL_CA_BUNDLE" "$REQUESTS_CA_BUNDLE"; ` +
		`ls -ln "$SSL_CERT_FILE" | cut -c1-10; cat "$SSL_CERT_FILE"`
	code, err := Launch(context.Background(), info, []byte(testPEM), []string{"sh", "-c", script}, LaunchOptions{
		Environ: []string{"PATH=" + os.Getenv("PATH"), "HTTPS_PROXY=http://evil:1", "https_proxy=http://evil:1", "http_proxy=http://evil:1",
			"ALL_PROXY=socks5://evil", "all_proxy=socks5://evil", "NO_PROXY=*", "no_proxy=*", "KEEP=me", "LINEAR_API_KEY=lin_real_secret"},
		TempDir: tmp, Stdout: &out, Stderr: &errOut,
	})
	if err != nil || code != 0 {
		t.Fatalf("Launch = %d, %v; stderr %s", code, err, errOut.String())
	}
	lines := strings.SplitN(out.String(), "\n", 17)
	if len(lines) != 17 {
		t.Fatalf("output %q", out.String())
	}
	caFile := lines[12]
	want := []string{info.ProxyURL, info.ProxyURL, info.ProxyURL, info.ProxyURL, NoProxy, NoProxy, "unset", "unset",
		"me", "aileron-placeholder", DefaultAPIURL, info.ID, caFile, caFile, caFile, "-rw-------", testPEM}
	if !slices.Equal(lines, want) {
		t.Errorf("child saw\n%q\nwant\n%q", lines, want)
	}
	if filepath.Dir(caFile) != tmp {
		t.Errorf("CA file %s is not in TempDir %s", caFile, tmp)
	}
	if _, err := os.Stat(caFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CA file still there after the child ended: %v", err)
	}
}

func TestLaunchExitStatus(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "hello"), []byte("#!/bin/sh\nexit 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv []string
		opts LaunchOptions
		want int
	}{
		{[]string{"sh", "-c", "exit 7"}, LaunchOptions{}, 7},
		{[]string{"sh", "-c", "kill -KILL $$"}, LaunchOptions{}, 128 + 9},
		{[]string{"hello"}, LaunchOptions{PathPrefix: []string{bin}}, 5},
		{[]string{filepath.Join(bin, "hello")}, LaunchOptions{}, 5},
		{[]string{"sh", "-c", `[ "$(pwd)" = "$1" ]`, "sh", bin}, LaunchOptions{Dir: bin}, 0},
	} {
		c.opts.TempDir = t.TempDir()
		code, err := Launch(context.Background(), testInfo(), []byte(testPEM), c.argv, c.opts)
		if err != nil || code != c.want {
			t.Errorf("Launch(%q) = %d, %v; want %d", c.argv, code, err, c.want)
		}
	}
}

func TestLaunchErrors(t *testing.T) {
	noCA := testInfo()
	noCA.CABundlePath = ""
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		argv   []string
		ca     string
		info   bool
		is     error
		substr string
	}{
		{"no command", nil, testPEM, true, ErrLaunch, "no command given"},
		{"empty command", []string{""}, testPEM, true, ErrLaunch, "no command given"},
		{"not in PATH", []string{"aileron-no-such-command"}, testPEM, true, ErrCommandNotFound, `"aileron-no-such-command" is not in PATH`},
		{"missing path", []string{"/nonexistent/agent"}, testPEM, true, ErrCommandNotFound, "/nonexistent/agent"},
		{"a directory", []string{dir}, testPEM, true, ErrCommandNotFound, "is a directory"},
		{"CA not PEM", []string{"true"}, "not a certificate", true, ErrLaunch, "not PEM"},
		{"no CA at all", []string{"true"}, "", false, ErrLaunch, "no CA bundle"},
	} {
		info := testInfo()
		if !c.info {
			info = noCA
		}
		tmp := t.TempDir()
		code, err := Launch(context.Background(), info, []byte(c.ca), c.argv, LaunchOptions{TempDir: tmp})
		if code != -1 || !errors.Is(err, c.is) || !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), c.substr) {
			t.Errorf("%s: Launch = %d, %v; want -1 and %v containing %q", c.name, code, err, c.is, c.substr)
		}
		if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
			t.Errorf("%s: left %s behind", c.name, entries[0].Name())
		}
	}
}

// startTrapping launches a child that exits 7 on SIGTERM and returns once it
// has set its trap, with a channel for Launch's result.
func startTrapping(t *testing.T, ctx context.Context, signals <-chan os.Signal) <-chan [2]any {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	result := make(chan [2]any, 1)
	go func() {
		defer pw.Close()
		code, err := Launch(ctx, testInfo(), []byte(testPEM),
			[]string{"sh", "-c", `trap 'kill $! 2>/dev/null; exit 7' TERM; echo ready; while :; do sleep 5 & wait $!; done`},
			LaunchOptions{TempDir: t.TempDir(), Stdout: pw, Signals: signals})
		result <- [2]any{code, err}
	}()
	if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	return result
}

func TestLaunchRelaysSignals(t *testing.T) {
	signals := make(chan os.Signal, 1)
	result := startTrapping(t, context.Background(), signals)
	signals <- syscall.SIGTERM
	if r := <-result; r[0] != 7 || r[1] != nil {
		t.Errorf("Launch = %v, %v; want 7 (the child's SIGTERM trap), nil", r[0], r[1])
	}
}

func TestLaunchContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	result := startTrapping(t, ctx, make(chan os.Signal))
	cancel()
	r := <-result
	err, _ := r[1].(error)
	if r[0] != 7 || !errors.Is(err, context.Canceled) || !errors.Is(err, ErrLaunch) {
		t.Errorf("Launch = %v, %v; want 7 and context.Canceled", r[0], r[1])
	}
}
