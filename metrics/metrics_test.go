package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/internal/testkit"
)

// scrape serves one GET /metrics through Handler and parses the text
// exposition.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rr := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	m.Handler().ServeHTTP(rr, req)
	if rr.Code != http.StatusOK {
		t.Fatalf("scrape: status %d, body %q", rr.Code, rr.Body.String())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rr.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return fams
}

// find returns the metric of family name whose labels equal want exactly, or
// nil.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		ok := true
		for _, l := range m.GetLabel() {
			if v, has := want[l.GetName()]; !has || v != l.GetValue() {
				ok = false
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

// value is a counter, gauge or untyped value, or a histogram's sample count.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(fams, name, labels)
	if m == nil {
		t.Fatalf("no %s%v in scrape", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	t.Fatalf("%s%v has no value", name, labels)
	return 0
}

func lbl(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestObserveRequests(t *testing.T) {
	const gh = "github://aileronhq/github"
	records := []*dataplane.Record{
		{Event: audit.Event{Decision: "allow", Reason: "operation_matched", Connector: gh, BytesIn: 100, BytesOut: 1000,
			DurationMS: 20, UpstreamMS: 15, UpstreamStatus: 200}},
		{Event: audit.Event{Decision: "allow", Reason: "operation_matched", Connector: gh, BytesIn: 10, BytesOut: 20,
			DurationMS: 2000, UpstreamMS: 1000}},
		{Event: audit.Event{Decision: "deny", Reason: "no_matching_operation", Connector: gh, DurationMS: 1}},
		{Event: audit.Event{Decision: "deny", Reason: "host_not_allowed", DurationMS: 0.1}},
		{Event: audit.Event{Decision: "passthrough", Reason: "passthrough_rule", BytesIn: 5, BytesOut: 7}},
		{Event: audit.Event{Decision: "invalid_verdict(9)", Reason: "", BytesIn: -3, DurationMS: -1000}},
		nil,
	}
	m := New()
	for _, r := range records {
		m.Observe(r)
	}
	fams := scrape(t, m)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"aileron_proxy_requests_total", lbl("decision", "allow", "reason", "operation_matched", "connector", gh), 2},
		{"aileron_proxy_requests_total", lbl("decision", "deny", "reason", "no_matching_operation", "connector", gh), 1},
		{"aileron_proxy_requests_total", lbl("decision", "deny", "reason", "host_not_allowed", "connector", "none"), 1},
		{"aileron_proxy_requests_total", lbl("decision", "passthrough", "reason", "passthrough_rule", "connector", "none"), 1},
		{"aileron_proxy_requests_total", lbl("decision", "other", "reason", "none", "connector", "none"), 1},
		{"aileron_proxy_request_duration_seconds", lbl("decision", "allow"), 2},
		{"aileron_proxy_request_duration_seconds", lbl("decision", "deny"), 2},
		{"aileron_proxy_request_duration_seconds", lbl("decision", "other"), 1},
		{"aileron_proxy_upstream_duration_seconds", lbl("connector", gh), 2},
		{"aileron_proxy_bytes_total", lbl("direction", "in"), 115},
		{"aileron_proxy_bytes_total", lbl("direction", "out"), 1027},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.name, tt.labels), func(t *testing.T) {
			if got := value(t, fams, tt.name, tt.labels); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if f := fams["aileron_proxy_requests_total"]; len(f.GetMetric()) != 5 {
		t.Errorf("requests_total has %d series, want 5: %v", len(f.GetMetric()), f)
	}
	if up := find(fams, "aileron_proxy_upstream_duration_seconds", lbl("connector", "none")); up != nil {
		t.Errorf("records without upstream time observed upstream latency: %v", up)
	}
	h := find(fams, "aileron_proxy_upstream_duration_seconds", lbl("connector", gh)).GetHistogram()
	if got := h.GetSampleSum(); got < 1.0149 || got > 1.0151 {
		t.Errorf("upstream sum = %v, want 1.015", got)
	}
	if neg := find(fams, "aileron_proxy_request_duration_seconds", lbl("decision", "other")); neg.GetHistogram().GetSampleSum() != 0 {
		t.Errorf("negative duration not clamped: %v", neg)
	}
}

func TestHistogramBuckets(t *testing.T) {
	m := New()
	m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "operation_matched", DurationMS: 0.05}})
	m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "operation_matched", DurationMS: 60000}})
	h := find(scrape(t, m), "aileron_proxy_request_duration_seconds", lbl("decision", "allow")).GetHistogram()
	b := h.GetBucket()
	var at30 *dto.Bucket
	for _, x := range b {
		if x.GetUpperBound() == 30 {
			at30 = x
		}
	}
	if b[0].GetUpperBound() != 0.0001 || at30 == nil {
		t.Fatalf("buckets %v, want 0.0001 first and a 30 s bucket", b)
	}
	if b[0].GetCumulativeCount() != 1 || at30.GetCumulativeCount() != 1 || h.GetSampleCount() != 2 {
		t.Errorf("50µs should land in the first bucket and 1m above 30 s: %v", h)
	}
}

func TestLabelBounds(t *testing.T) {
	tests := []struct {
		name, reason, fqn       string
		wantReason, wantConnect string
	}{
		{"control chars", "bad\nreason", "github://a/b\x00", LabelOther, LabelOther},
		{"space", "has space", "github://a b/c", LabelOther, LabelOther},
		{"invalid utf8", "x\xff", "\xffgithub://a/b", LabelOther, LabelOther},
		{"too long", strings.Repeat("a", 201), "github://o/" + strings.Repeat("r", 200), LabelOther, LabelOther},
		{"empty", "", "", LabelNone, LabelNone},
		{"fqn ok", "operation_matched", "local://me/tool/sub", "operation_matched", "local://me/tool/sub"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.Observe(&dataplane.Record{Event: audit.Event{Decision: "deny", Reason: tt.reason, Connector: tt.fqn}})
			fams := scrape(t, m)
			want := lbl("decision", "deny", "reason", tt.wantReason, "connector", tt.wantConnect)
			if got := value(t, fams, "aileron_proxy_requests_total", want); got != 1 {
				t.Errorf("got %v, want 1", got)
			}
		})
	}
}

func TestCardinalityCap(t *testing.T) {
	m := New()
	for i := range MaxConnectors + 10 {
		m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: fmt.Sprintf("r%d", i),
			Connector: fmt.Sprintf("github://o/c%d", i), UpstreamMS: 1}})
	}
	fams := scrape(t, m)
	reasons, connectors := map[string]bool{}, map[string]bool{}
	for _, mt := range fams["aileron_proxy_requests_total"].GetMetric() {
		for _, l := range mt.GetLabel() {
			switch l.GetName() {
			case "reason":
				reasons[l.GetValue()] = true
			case "connector":
				connectors[l.GetValue()] = true
			}
		}
	}
	if len(reasons) != MaxReasons+1 || !reasons[LabelOther] {
		t.Errorf("%d distinct reasons (other=%v), want %d plus other", len(reasons), reasons[LabelOther], MaxReasons)
	}
	if len(connectors) != MaxConnectors+1 || !connectors[LabelOther] {
		t.Errorf("%d distinct connectors, want %d plus other", len(connectors), MaxConnectors)
	}
	if got := value(t, fams, "aileron_proxy_upstream_duration_seconds", lbl("connector", LabelOther)); got != 10 {
		t.Errorf("upstream histogram for other = %v, want 10", got)
	}
	// A value admitted before the cap keeps its own label afterwards.
	m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "r0", Connector: "github://o/c0"}})
	got := value(t, scrape(t, m), "aileron_proxy_requests_total",
		lbl("decision", "allow", "reason", "r0", "connector", "github://o/c0"))
	if got != 2 {
		t.Errorf("admitted label after cap: got %v, want 2", got)
	}
}

func TestCallbacksAtScrape(t *testing.T) {
	var conns, tunnels, pending, custom atomic.Int64
	var hits, misses, mints, lines, errs atomic.Uint64
	var last atomic.Int64
	m := New()
	regs := []error{
		m.ConnectionsOpen(func() float64 { return float64(conns.Load()) }),
		m.TunnelsOpen(func() float64 { return float64(tunnels.Load()) }),
		m.ApprovalsPending(func() float64 { return float64(pending.Load()) }),
		m.CertCache(func() (uint64, uint64, uint64) { return hits.Load(), misses.Load(), mints.Load() }),
		m.AuditStats(func() (uint64, uint64, time.Duration) {
			return lines.Load(), errs.Load(), time.Duration(last.Load())
		}),
		m.Register("aileron_custom_total", "Custom counter.", Counter, func() float64 { return float64(custom.Load()) }),
	}
	for i, err := range regs {
		if err != nil {
			t.Fatalf("registration %d: %v", i, err)
		}
	}
	check := func(want map[string]float64) {
		t.Helper()
		fams := scrape(t, m)
		for name, w := range want {
			if got := value(t, fams, name, nil); got != w {
				t.Errorf("%s = %v, want %v", name, got, w)
			}
		}
	}
	check(map[string]float64{"aileron_proxy_connections_open": 0, "aileron_ca_leaf_mints_total": 0,
		"aileron_audit_lines_total": 0, "aileron_custom_total": 0})
	conns.Store(3)
	tunnels.Store(2)
	pending.Store(1)
	hits.Store(10)
	misses.Store(4)
	mints.Store(3)
	lines.Store(42)
	errs.Store(1)
	last.Store(int64(1500 * time.Microsecond))
	custom.Store(7)
	check(map[string]float64{
		"aileron_proxy_connections_open": 3, "aileron_proxy_tunnels_open": 2, "aileron_approvals_pending": 1,
		"aileron_ca_leaf_cache_hits_total": 10, "aileron_ca_leaf_cache_misses_total": 4,
		"aileron_ca_leaf_mints_total": 3, "aileron_audit_lines_total": 42,
		"aileron_audit_write_errors_total": 1, "aileron_audit_last_write_duration_seconds": 0.0015,
		"aileron_custom_total": 7,
	})
	fams := scrape(t, m)
	for name, typ := range map[string]dto.MetricType{
		"aileron_proxy_tunnels_open": dto.MetricType_GAUGE, "aileron_ca_leaf_cache_hits_total": dto.MetricType_COUNTER,
		"aileron_audit_write_errors_total": dto.MetricType_COUNTER, "aileron_custom_total": dto.MetricType_COUNTER,
	} {
		if got := fams[name].GetType(); got != typ {
			t.Errorf("%s type %v, want %v", name, got, typ)
		}
	}
}

func TestRegisterErrors(t *testing.T) {
	m := New()
	if err := m.TunnelsOpen(func() float64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"duplicate", m.TunnelsOpen(func() float64 { return 1 })},
		{"nil fn", m.Register("aileron_x", "x", Gauge, nil)},
		{"bad kind", m.Register("aileron_y", "y", Kind(9), func() float64 { return 0 })},
		{"bad name", m.Register("0 bad name", "z", Gauge, func() float64 { return 0 })},
		{"empty name", m.Register("", "z", Gauge, func() float64 { return 0 })},
		{"nil cert cache", m.CertCache(nil)},
		{"nil audit", m.AuditStats(nil)},
		{"clash with builtin", m.Register("aileron_proxy_bytes_total", "b", Counter, func() float64 { return 0 })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, ErrRegister) {
				t.Fatalf("err = %v, want one wrapping ErrRegister", tt.err)
			}
		})
	}
	// A failed registration leaves the registry scrapable.
	scrape(t, m)
}

func TestAuditWriteAndOAuth(t *testing.T) {
	m := New()
	fams := scrape(t, m)
	for _, r := range []string{"ok", "failed"} {
		if got := value(t, fams, "aileron_oauth_refreshes_total", lbl("result", r)); got != 0 {
			t.Errorf("oauth %s before any refresh = %v, want 0", r, got)
		}
	}
	m.ObserveAuditWrite(200*time.Microsecond, nil)
	m.ObserveAuditWrite(time.Millisecond, nil)
	m.ObserveAuditWrite(5*time.Millisecond, errors.New("disk full"))
	m.OAuthRefresh(true)
	m.OAuthRefresh(true)
	m.OAuthRefresh(false)
	fams = scrape(t, m)
	tests := []struct {
		name, result string
		want         float64
	}{
		{"aileron_audit_write_duration_seconds", "ok", 2},
		{"aileron_audit_write_duration_seconds", "failed", 1},
		{"aileron_oauth_refreshes_total", "ok", 2},
		{"aileron_oauth_refreshes_total", "failed", 1},
	}
	for _, tt := range tests {
		if got := value(t, fams, tt.name, lbl("result", tt.result)); got != tt.want {
			t.Errorf("%s{result=%s} = %v, want %v", tt.name, tt.result, got, tt.want)
		}
	}
}

func TestNoDefaultRegistry(t *testing.T) {
	m := New()
	m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "operation_matched", Connector: "github://a/b",
		UpstreamMS: 1, BytesIn: 1}})
	m.ObserveAuditWrite(time.Millisecond, nil)
	if err := m.ApprovalsPending(func() float64 { return 1 }); err != nil {
		t.Fatal(err)
	}
	own := scrape(t, m)
	if own["aileron_proxy_requests_total"] == nil || own["aileron_approvals_pending"] == nil {
		t.Fatal("own registry misses aileron metrics; the test below would prove nothing")
	}
	fams, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "aileron_") {
			t.Errorf("global default registry holds %s", f.GetName())
		}
	}
	// Two Metrics never collide: each has its own registry.
	if err := New().ApprovalsPending(func() float64 { return 1 }); err != nil {
		t.Errorf("second Metrics: %v", err)
	}
}

func TestNewRegistersEverything(t *testing.T) {
	m := New()
	m.Observe(&dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "operation_matched", UpstreamMS: 1, BytesIn: 1}})
	m.ObserveAuditWrite(time.Millisecond, nil)
	fams := scrape(t, m)
	for _, name := range []string{
		"aileron_proxy_requests_total", "aileron_proxy_request_duration_seconds",
		"aileron_proxy_upstream_duration_seconds", "aileron_proxy_bytes_total",
		"aileron_audit_write_duration_seconds", "aileron_oauth_refreshes_total",
		"go_goroutines", "promhttp_metric_handler_errors_total",
	} {
		if fams[name] == nil {
			t.Errorf("%s missing from scrape", name)
		}
	}
}

// failing reports a collector error so the handler's error path runs.
type failing struct{ d *prometheus.Desc }

func (f failing) Describe(ch chan<- *prometheus.Desc) { ch <- f.d }
func (f failing) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(f.d, errors.New("boom"))
}

func TestHandlerLogsCollectorErrors(t *testing.T) {
	m := New()
	logs := &testkit.Log{}
	m.Log = logs.Logger()
	if err := m.register("aileron_failing", failing{desc("aileron_failing", "fails")}); err != nil {
		t.Fatal(err)
	}
	if err := m.TunnelsOpen(func() float64 { return 4 }); err != nil {
		t.Fatal(err)
	}
	scrape(t, m) // promhttp counts a gathering error after serving it
	fams := scrape(t, m)
	if got := value(t, fams, "aileron_proxy_tunnels_open", nil); got != 4 {
		t.Errorf("other metrics not served after a collector error: tunnels = %v", got)
	}
	if got := value(t, fams, "promhttp_metric_handler_errors_total", lbl("cause", "gathering")); got != 1 {
		t.Errorf("handler error counter = %v, want 1", got)
	}
	if n := strings.Count(logs.String(), `"event":"metrics.scrape_error"`); n != 2 || !strings.Contains(logs.String(), "boom") {
		t.Errorf("logged %s, want one line per scrape naming the error", logs)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := New()
	r := &dataplane.Record{Event: audit.Event{Decision: "allow", Reason: "operation_matched", Connector: "github://aileronhq/github",
		DurationMS: 3, UpstreamMS: 2, BytesIn: 100, BytesOut: 2000}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Observe(r)
		}
	})
}

func TestAuditTrailFigures(t *testing.T) {
	m := New()
	if err := m.AuditTrail(nil); err == nil {
		t.Fatal("a nil callback registered")
	}
	err := m.AuditTrail(func() (uint64, uint64, []WitnessFigures) {
		return 7, 6999, []WitnessFigures{{URL: "http://w1:7380", Cosigned: 6999}, {URL: "http://w2:7380", Failures: 3}}
	})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"aileron_audit_checkpoints_total", nil, 7},
		{"aileron_audit_signed_lines", nil, 6999},
		{"aileron_audit_witness_cosigned_lines", map[string]string{"witness": "http://w1:7380"}, 6999},
		{"aileron_audit_witness_failures_total", map[string]string{"witness": "http://w2:7380"}, 3},
	} {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestModelTokens: a model call's reported tokens are counted per provider,
// model and direction; a WebSocket turn adds tokens but no request; model
// labels are cut, capped and kept well-formed.
func TestModelTokens(t *testing.T) {
	m := New()
	call := func(name audit.EventName, api, model string, in, out, cached int64) *dataplane.Record {
		return &dataplane.Record{API: api, Event: audit.Event{Name: name, Decision: "allow", Reason: "operation_matched",
			Model: model, InputTokens: in, OutputTokens: out, CachedTokens: cached}}
	}
	m.Observe(call(audit.EventCompleted, "anthropic", "claude-sonnet-4-5", 100, 20, 64))
	m.Observe(call(audit.EventCompleted, "anthropic", "claude-sonnet-4-5", 1, 2, 0))
	m.Observe(call(audit.EventTurn, "openai", "gpt-5-codex", 7, 3, 0))
	m.Observe(call(audit.EventCompleted, "weird", "claude\u202e", 5, 0, 0))
	m.Observe(call(audit.EventCompleted, "gemini", strings.Repeat("g", 100), 9, 0, 0))
	for i := range MaxModels + 5 {
		m.Observe(call(audit.EventCompleted, "openai", fmt.Sprintf("m-%d", i), 1, 0, 0))
	}
	fams := scrape(t, m)
	const name = "aileron_model_tokens_total"
	for _, tc := range []struct {
		provider, model, dir string
		want                 float64
	}{
		{"anthropic", "claude-sonnet-4-5", "input", 101},
		{"anthropic", "claude-sonnet-4-5", "output", 22},
		{"anthropic", "claude-sonnet-4-5", "cached", 64},
		{"openai", "gpt-5-codex", "output", 3},
		{"other", "other", "input", 5},
		{"gemini", strings.Repeat("g", MaxModelLabel), "input", 9},
	} {
		if got := value(t, fams, name, lbl("provider", tc.provider, "model", tc.model, "direction", tc.dir)); got != tc.want {
			t.Errorf("%s/%s/%s = %v, want %v", tc.provider, tc.model, tc.dir, got, tc.want)
		}
	}
	models := map[string]bool{}
	for _, mm := range fams[name].GetMetric() {
		for _, l := range mm.GetLabel() {
			if l.GetName() == "model" {
				models[l.GetValue()] = true
			}
		}
	}
	if len(models) > MaxModels+1 || !models[LabelOther] {
		t.Errorf("%d distinct model labels, want at most %d and %q", len(models), MaxModels+1, LabelOther)
	}
	if got := value(t, fams, "aileron_proxy_requests_total", lbl("decision", "allow", "reason", "operation_matched", "connector", LabelNone)); got != float64(4+MaxModels+5) {
		t.Errorf("requests counted %v: a turn is not a request", got)
	}
}
