package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"
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

// TestMetricsListen: with admin.metrics_listen set, a scraper that cannot
// reach the admin socket (Prometheus in another container) reads the same
// /metrics over TCP.
func TestMetricsListen(t *testing.T) {
	cfg, err := theSuite.baseConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := cfg["admin"].(map[string]any)
	if admin == nil {
		admin = map[string]any{}
	}
	admin["metrics_listen"] = "127.0.0.1:0"
	cfg["admin"] = admin
	d := theSuite.startTestDaemon(t, cfg, nil)
	var m []string // the daemon writes its info lines within 0.1 s, and its start-up lines once ready
	waitFor(t, "the metrics.listening line", 10*time.Second, func() bool {
		m = regexp.MustCompile(`"event":"metrics.listening","addr":"([0-9.:]+)"`).FindStringSubmatch(d.logTail(1 << 20))
		return m != nil
	})
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !regexp.MustCompile(`(?m)^aileron_`).Match(body) {
		t.Fatalf("GET /metrics over TCP: %d\n%.500s", resp.StatusCode, body)
	}
	resp, err = http.Get("http://" + m[1] + "/v1/sessions")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the metrics port serves more than /metrics: %v %v", err, resp)
	}
}
