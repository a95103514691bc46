package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrRegister is wrapped by every failure to register a metric: a name
// already registered on this Metrics, an invalid metric name, an unknown
// Kind or a nil callback.
var ErrRegister = errors.New("metrics: cannot register metric")

// Kind is the Prometheus type of a callback metric.
type Kind uint8

// Kinds.
const (
	// Gauge is a value that goes up and down (open connections).
	Gauge Kind = iota
	// Counter is a cumulative value that only goes up; its name should end
	// in _total.
	Counter
)

// Register adds a metric whose value is fn() at each scrape. fn runs on the
// scraping goroutine, concurrently with everything else, and must be cheap
// and safe for concurrent use. Every failure wraps ErrRegister and names the
// metric.
func (m *Metrics) Register(name, help string, kind Kind, fn func() float64) error {
	if fn == nil {
		return fmt.Errorf("%w %q: the callback is nil; pass a func() float64", ErrRegister, name)
	}
	if !validName(name) {
		return fmt.Errorf("%w %q: a metric name is [a-zA-Z_:][a-zA-Z0-9_:]*, like aileron_thing_total",
			ErrRegister, name)
	}
	var c prometheus.Collector
	switch kind {
	case Gauge:
		c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	case Counter:
		c = prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn)
	default:
		return fmt.Errorf("%w %q: unknown kind %d; use metrics.Gauge or metrics.Counter",
			ErrRegister, name, kind)
	}
	return m.register(name, c)
}

// ConnectionsOpen registers aileron_proxy_connections_open, the number of
// client connections to the proxy port (dataplane.Proxy.Stats). Failures
// wrap ErrRegister.
func (m *Metrics) ConnectionsOpen(fn func() float64) error {
	return m.Register("aileron_proxy_connections_open",
		"Client connections open to the proxy port.", Gauge, fn)
}

// TunnelsOpen registers aileron_proxy_tunnels_open, the number of CONNECT
// tunnels (intercepted and passthrough) being served. Failures wrap
// ErrRegister.
func (m *Metrics) TunnelsOpen(fn func() float64) error {
	return m.Register("aileron_proxy_tunnels_open",
		"CONNECT tunnels being served, intercepted and passthrough.", Gauge, fn)
}

// ApprovalsPending registers aileron_approvals_pending, the number of
// approvals waiting for an admin decision. Failures wrap ErrRegister.
func (m *Metrics) ApprovalsPending(fn func() float64) error {
	return m.Register("aileron_approvals_pending",
		"Approvals waiting for an admin decision.", Gauge, fn)
}

// CertCache registers the leaf certificate cache counters
// aileron_ca_leaf_cache_hits_total, aileron_ca_leaf_cache_misses_total and
// aileron_ca_leaf_mints_total, all read from one fn call per scrape (for
// example ca.Authority.Stats). Failures wrap ErrRegister.
func (m *Metrics) CertCache(fn func() (hits, misses, mints uint64)) error {
	if fn == nil {
		return fmt.Errorf("%w aileron_ca_leaf_*: the callback is nil", ErrRegister)
	}
	hits := desc("aileron_ca_leaf_cache_hits_total", "Leaf certificate requests answered from the cache.")
	misses := desc("aileron_ca_leaf_cache_misses_total", "Leaf certificate requests that found no usable cached leaf.")
	mints := desc("aileron_ca_leaf_mints_total", "Leaf certificates minted.")
	return m.register("aileron_ca_leaf_*", &funcCollector{
		descs: []*prometheus.Desc{hits, misses, mints},
		collect: func(ch chan<- prometheus.Metric) {
			h, mi, mn := fn()
			ch <- constMetric(hits, prometheus.CounterValue, float64(h))
			ch <- constMetric(misses, prometheus.CounterValue, float64(mi))
			ch <- constMetric(mints, prometheus.CounterValue, float64(mn))
		},
	})
}

// AuditStats registers the audit log counters aileron_audit_lines_total and
// aileron_audit_write_errors_total and the gauge
// aileron_audit_last_write_duration_seconds, all read from one fn call per
// scrape (for example from audit.Stats). The write-latency histogram is fed
// separately by ObserveAuditWrite. Failures wrap ErrRegister.
func (m *Metrics) AuditStats(fn func() (lines, writeErrors uint64, lastLatency time.Duration)) error {
	if fn == nil {
		return fmt.Errorf("%w aileron_audit_*: the callback is nil", ErrRegister)
	}
	lines := desc("aileron_audit_lines_total", "Audit lines appended.")
	errs := desc("aileron_audit_write_errors_total", "Failed audit writes, opens, rotations and fsyncs.")
	last := desc("aileron_audit_last_write_duration_seconds", "Duration of the last successful audit write.")
	return m.register("aileron_audit_*", &funcCollector{
		descs: []*prometheus.Desc{lines, errs, last},
		collect: func(ch chan<- prometheus.Metric) {
			l, e, d := fn()
			ch <- constMetric(lines, prometheus.CounterValue, float64(l))
			ch <- constMetric(errs, prometheus.CounterValue, float64(e))
			ch <- constMetric(last, prometheus.GaugeValue, seconds(d))
		},
	})
}

// WitnessFigures are one witness's figures for AuditTrail.
type WitnessFigures struct {
	URL string
	// Cosigned is the tree size it last cosigned (0: none yet).
	Cosigned uint64
	// Failures counts pushes it did not cosign.
	Failures uint64
}

// AuditTrail exposes the provable trail: checkpoints written, the lines
// the last one signs, and per witness what it cosigned and how often it
// did not (aileron_audit_checkpoints_total, aileron_audit_signed_lines,
// aileron_audit_witness_cosigned_lines{witness},
// aileron_audit_witness_failures_total{witness}).
func (m *Metrics) AuditTrail(fn func() (checkpoints, signed uint64, witnesses []WitnessFigures)) error {
	if fn == nil {
		return fmt.Errorf("%w aileron_audit_checkpoints_*: the callback is nil", ErrRegister)
	}
	cks := desc("aileron_audit_checkpoints_total", "Signed checkpoint lines written to the audit trail.")
	signed := desc("aileron_audit_signed_lines", "Lines of the audit trail the last checkpoint signs.")
	cosigned := prometheus.NewDesc("aileron_audit_witness_cosigned_lines", "Lines of the audit trail the witness last cosigned (0: none yet).", []string{"witness"}, nil)
	fails := prometheus.NewDesc("aileron_audit_witness_failures_total", "Checkpoint pushes the witness did not cosign.", []string{"witness"}, nil)
	return m.register("aileron_audit_checkpoints_*", &funcCollector{
		descs: []*prometheus.Desc{cks, signed, cosigned, fails},
		collect: func(ch chan<- prometheus.Metric) {
			c, s, ws := fn()
			ch <- constMetric(cks, prometheus.CounterValue, float64(c))
			ch <- constMetric(signed, prometheus.GaugeValue, float64(s))
			for _, w := range ws {
				ch <- labelled(cosigned, prometheus.GaugeValue, float64(w.Cosigned), w.URL)
				ch <- labelled(fails, prometheus.CounterValue, float64(w.Failures), w.URL)
			}
		},
	})
}

// labelled is constMetric with label values.
func labelled(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) prometheus.Metric {
	metric, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return metric
}

func (m *Metrics) register(name string, c prometheus.Collector) error {
	if err := m.reg.Register(c); err != nil {
		return fmt.Errorf("%w %q: %w", ErrRegister, name, err)
	}
	return nil
}

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, nil, nil)
}

// constMetric builds an unlabelled metric; an error (impossible for the
// unlabelled descriptors used here) is reported at scrape time, not panicked.
func constMetric(d *prometheus.Desc, t prometheus.ValueType, v float64) prometheus.Metric {
	metric, err := prometheus.NewConstMetric(d, t, v)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return metric
}

// funcCollector exposes several metrics computed by one callback per scrape.
type funcCollector struct {
	descs   []*prometheus.Desc
	collect func(ch chan<- prometheus.Metric)
}

func (c *funcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// validName accepts classic Prometheus metric names, which every scraper and
// query language understands without quoting.
func validName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
