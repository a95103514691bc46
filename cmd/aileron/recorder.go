package main

import (
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/metrics"
)

// recorder is the daemon's dataplane.Recorder: it feeds every finished
// decision to the metrics.
type recorder struct {
	metrics *metrics.Metrics
}

// Decided is called before an allowed request is forwarded.
func (r *recorder) Decided(*dataplane.Record) error { return nil }

// Completed is called once per decision when the exchange ends.
func (r *recorder) Completed(rec *dataplane.Record) {
	if r.metrics != nil {
		r.metrics.Observe(rec)
	}
}
