package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// scrape reads one sample from the daemon's /metrics on its admin socket;
// a missing sample reads as 0.
func scrape(t *testing.T, d *daemon, sample *regexp.Regexp) float64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", d.AdminSocket)
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://aileron/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, body)
	}
	m := sample.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("sample %q: %v", m[0], err)
	}
	return v
}

func TestMetricsMoveWithDecisions(t *testing.T) {
	d := theSuite.mainDaemon(t)
	s := d.newSession(t)
	c := goClient(t, s)
	allowed := regexp.MustCompile(`(?m)^aileron_proxy_requests_total\{connector="github://acme/aileron-connector-google",decision="allow",reason="operation_matched"\} (\S+)$`)
	denied := regexp.MustCompile(`(?m)^aileron_proxy_requests_total\{connector="none",decision="deny",reason="no_matching_operation"\} (\S+)$`)
	mints := regexp.MustCompile(`(?m)^aileron_ca_leaf_mints_total (\S+)$`)
	a0, d0, m0 := scrape(t, d, allowed), scrape(t, d, denied), scrape(t, d, mints)

	for range 3 {
		if st, _, body := goDo(t, c, http.MethodGet, "https://gmail.googleapis.com/gmail/v1/users/me/messages/m1", ""); st != 200 {
			t.Fatalf("allowed request: %d %s", st, body)
		}
	}
	if st, _, body := goDo(t, c, http.MethodDelete, "https://gmail.googleapis.com/gmail/v1/users/me/messages/m1", ""); st != 403 {
		t.Fatalf("denied request: %d %s", st, body)
	}
	if got := scrape(t, d, allowed) - a0; got != 3 {
		t.Errorf("allowed counter moved by %v, want 3", got)
	}
	if got := scrape(t, d, denied) - d0; got != 1 {
		t.Errorf("denied counter moved by %v, want 1", got)
	}
	if got := scrape(t, d, mints) - m0; got < 1 {
		t.Errorf("a new session's first tunnel minted no leaf (mints moved by %v)", got)
	}
}
