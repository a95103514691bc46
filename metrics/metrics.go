package metrics

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
)

// Label values used when a record's field is empty or not admitted.
const (
	// LabelNone is the label for an empty connector or reason.
	LabelNone = "none"
	// LabelOther is the label for a value outside the closed set, not
	// well-formed, or past the cardinality cap.
	LabelOther = "other"
)

// Cardinality caps: the number of distinct reason and connector label values
// admitted per Metrics; later new values are counted under LabelOther.
const (
	MaxReasons    = 64
	MaxConnectors = 512
	// MaxModels bounds the model names (which a sandbox chooses) kept as
	// labels; each is first cut to MaxModelLabel bytes.
	MaxModels     = 64
	MaxModelLabel = 64
)

// latencyBuckets spans 0.1 ms to 30 s for request and upstream durations.
func latencyBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05,
		.1, .25, .5, 1, 2.5, 5, 10, 30}
}

// auditBuckets spans 10 µs to 1 s for one audit line write (with fsync).
func auditBuckets() []float64 {
	return []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025,
		.005, .01, .025, .05, .1, .25, .5, 1}
}

// decisionLabel maps a record's verdict to the closed set of decision labels
// (policy.Verdict's String forms), anything else to LabelOther.
func decisionLabel(v string) string {
	switch v {
	case "allow", "allow_after_approval", "passthrough", "deny":
		return v
	}
	return LabelOther
}

// Metrics holds the daemon's collectors and its own registry. Create it with
// New; the zero value is not usable. All methods are safe for concurrent use.
type Metrics struct {
	// Log receives errors met while serving a scrape (a callback panicking
	// is not caught; a collector error is). Nil discards them. Set it before
	// the first scrape.
	Log *zerolog.Logger

	reg     *prometheus.Registry
	handler http.Handler

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	bytes    *prometheus.CounterVec
	auditDur *prometheus.HistogramVec
	// auditOK and auditFailed: auditDur's two series, looked up once (a
	// line is written per decision and per outcome).
	auditOK, auditFailed prometheus.Observer
	oauth                *prometheus.CounterVec
	bytesIn              prometheus.Counter
	bytesOut             prometheus.Counter
	reasons              *labelSet
	connector            *labelSet
	tokens               *prometheus.CounterVec
	models               *labelSet
}

// New returns Metrics with a fresh registry holding the request, byte,
// audit-write and OAuth collectors plus the Go runtime and process
// collectors. Callback gauges are added with Register or the helpers.
func New() *Metrics {
	m := &Metrics{
		reg:       prometheus.NewRegistry(),
		reasons:   newLabelSet(MaxReasons),
		connector: newLabelSet(MaxConnectors),
		models:    newLabelSet(MaxModels),
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aileron_proxy_requests_total",
		Help: "Proxy decisions by decision, machine reason and connector FQN.",
	}, []string{"decision", "reason", "connector"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aileron_proxy_request_duration_seconds",
		Help:    "Total time from request receipt to the end of the exchange, by decision.",
		Buckets: latencyBuckets(),
	}, []string{"decision"})
	m.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aileron_proxy_upstream_duration_seconds",
		Help:    "Time spent waiting on the upstream, by connector FQN.",
		Buckets: latencyBuckets(),
	}, []string{"connector"})
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aileron_proxy_bytes_total",
		Help: "Bytes relayed by the proxy; direction in is from the client, out is to the client.",
	}, []string{"direction"})
	m.auditDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "aileron_audit_write_duration_seconds",
		Help:    "Duration of one audit line write, by result (ok or failed).",
		Buckets: auditBuckets(),
	}, []string{"result"})
	m.oauth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aileron_oauth_refreshes_total",
		Help: "OAuth2 token refreshes by result (ok or failed).",
	}, []string{"result"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aileron_model_tokens_total",
		Help: "Tokens model providers reported, by provider (the operation's usage dialect), model asked for and direction (input, output or cached).",
	}, []string{"provider", "model", "direction"})
	m.bytesIn = m.bytes.WithLabelValues("in")
	m.bytesOut = m.bytes.WithLabelValues("out")
	m.auditOK, m.auditFailed = m.auditDur.WithLabelValues("ok"), m.auditDur.WithLabelValues("failed")
	for _, r := range []string{"ok", "failed"} {
		m.oauth.WithLabelValues(r)
	}
	// Distinct names on a fresh registry: Register cannot fail here (and
	// TestNewRegistersEverything proves each family is exposed).
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.upstream, m.bytes,
		m.auditDur, m.oauth, m.tokens, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		_ = m.reg.Register(c)
	}
	// Built here, before any caller-named metric exists, so promhttp's own
	// error counter always registers cleanly.
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      printer{m},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
	return m
}

// Handler serves the registry in the Prometheus exposition formats. A
// collector error is logged through Log and the remaining metrics are still
// served. Mount it on the admin API only.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Observe counts one finished record: the request counter, the total and
// upstream latency histograms, and the byte counters. A nil record is
// ignored. Upstream latency is observed only when UpstreamMS is positive;
// negative byte counts and durations count as zero.
func (m *Metrics) Observe(r *dataplane.Record) {
	if r == nil {
		return
	}
	m.observeTokens(r)
	if r.Name == audit.EventTurn {
		return // a turn of a WebSocket whose request is counted once, when it ends
	}
	decision := decisionLabel(r.Decision)
	connector := m.connector.admit(r.Connector)
	m.requests.WithLabelValues(decision, m.reasons.admit(r.Reason), connector).Inc()
	m.duration.WithLabelValues(decision).Observe(max(r.DurationMS, 0) / 1000)
	if r.UpstreamMS > 0 {
		m.upstream.WithLabelValues(connector).Observe(r.UpstreamMS / 1000)
	}
	if r.BytesIn > 0 {
		m.bytesIn.Add(float64(r.BytesIn))
	}
	if r.BytesOut > 0 {
		m.bytesOut.Add(float64(r.BytesOut))
	}
}

// observeTokens counts a model call's (or WebSocket turn's) reported
// tokens under its provider, model (cut to MaxModelLabel bytes, at most
// MaxModels distinct, then LabelOther) and direction.
func (m *Metrics) observeTokens(r *dataplane.Record) {
	if r.InputTokens <= 0 && r.OutputTokens <= 0 && r.CachedTokens <= 0 {
		return
	}
	provider := providerLabel(r.API)
	model := m.models.admit(clipLabel(r.Model, MaxModelLabel))
	for _, d := range []struct {
		dir string
		n   int64
	}{{"input", r.InputTokens}, {"output", r.OutputTokens}, {"cached", r.CachedTokens}} {
		if d.n > 0 {
			m.tokens.WithLabelValues(provider, model, d.dir).Add(float64(d.n))
		}
	}
}

// providerLabel maps a usage dialect to the closed set of provider labels.
func providerLabel(api string) string {
	switch api {
	case "anthropic", "openai", "gemini":
		return api
	}
	return LabelOther
}

// clipLabel cuts v to n bytes (a model label; wellFormed then refuses what
// is not ASCII).
func clipLabel(v string, n int) string {
	if len(v) > n {
		return v[:n]
	}
	return v
}

// ObserveAuditWrite records the duration of one audit line write in
// aileron_audit_write_duration_seconds, labelled result="failed" when err is
// non-nil and "ok" otherwise.
func (m *Metrics) ObserveAuditWrite(d time.Duration, err error) {
	if err != nil {
		m.auditFailed.Observe(seconds(d))
		return
	}
	m.auditOK.Observe(seconds(d))
}

// OAuthRefresh counts one OAuth2 token refresh in
// aileron_oauth_refreshes_total{result="ok"|"failed"}.
func (m *Metrics) OAuthRefresh(ok bool) {
	result := "failed"
	if ok {
		result = "ok"
	}
	m.oauth.WithLabelValues(result).Inc()
}

func seconds(d time.Duration) float64 {
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

// printer adapts Log to promhttp's Logger.
type printer struct{ m *Metrics }

func (p printer) Println(v ...any) {
	if p.m.Log != nil {
		p.m.Log.Warn().Str("event", "metrics.scrape_error").Msg(strings.TrimSuffix(fmt.Sprintln(v...), "\n"))
	}
}

// labelSet admits at most max distinct well-formed label values; the rest map
// to LabelOther and the empty value maps to LabelNone.
type labelSet struct {
	mu   sync.RWMutex
	seen map[string]struct{}
	max  int
}

func newLabelSet(max int) *labelSet {
	return &labelSet{seen: make(map[string]struct{}), max: max}
}

func (s *labelSet) admit(v string) string {
	if v == "" {
		return LabelNone
	}
	if !wellFormed(v) {
		return LabelOther
	}
	s.mu.RLock()
	_, ok := s.seen[v]
	s.mu.RUnlock()
	if ok {
		return v
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[v]; ok {
		return v
	}
	if len(s.seen) >= s.max {
		return LabelOther
	}
	s.seen[v] = struct{}{}
	return v
}

// wellFormed accepts the characters of reasons and connector FQNs
// (scheme://owner/repo/sub, with ., -, _ , @ and +), at most 200 bytes, so
// no control characters, spaces or invalid UTF-8 reach a label.
func wellFormed(v string) bool {
	if len(v) > 200 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_', c == '-', c == '.', c == '/', c == ':', c == '@', c == '+':
		default:
			return false
		}
	}
	return true
}
