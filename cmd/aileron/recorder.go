package main

import (
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/metrics"
)

// recorder is the daemon's dataplane.Recorder and control-plane event sink:
// it writes the audit trail and feeds the metrics.
//
// Audit lines per request: an allowed request gets its decision line
// (connector.proxy.proxied, sandbox.proxy.passthrough) before anything is
// forwarded, and an outcome line with the same audit_id when it ends
// (connector.proxy.completed, sandbox.proxy.closed, or
// connector.proxy.rejected when the upstream leg failed). A refused request
// gets one line, connector.proxy.rejected.
type recorder struct {
	audit   *audit.Log // nil when audit.enabled is false
	metrics *metrics.Metrics
	log     *zerolog.Logger
}

// Decided writes the decision line; an error refuses the request.
func (r *recorder) Decided(rec *dataplane.Record) error {
	return r.write(eventOf(rec, rec.Event))
}

// Completed writes the outcome line and updates the metrics.
func (r *recorder) Completed(rec *dataplane.Record) {
	r.metrics.Observe(rec)
	name := rec.Event
	if rec.Decided {
		switch rec.Event {
		case "connector.proxy.proxied":
			name = "connector.proxy.completed"
		case "sandbox.proxy.passthrough":
			name = "sandbox.proxy.closed"
		}
	}
	if err := r.write(eventOf(rec, name)); err != nil {
		r.log.Error().Str("event", "audit.write_failed").Str("audit_id", rec.AuditID).Msg(err.Error())
	}
}

// Event records a control-plane change (session.created, store.installed,
// credential.refreshed, …).
func (r *recorder) Event(name string, details map[string]string) {
	if strings.HasPrefix(name, "credential.refresh") {
		r.metrics.OAuthRefresh(name == "credential.refreshed")
	}
	if err := r.write(&audit.Event{Event: name, Details: details}); err != nil {
		r.log.Error().Str("event", "audit.write_failed").Str("audit_event", name).Msg(err.Error())
	}
}

func (r *recorder) write(ev *audit.Event) error {
	if r.audit == nil {
		return nil // audit.enabled: false
	}
	start := time.Now()
	err := r.audit.Write(ev)
	r.metrics.ObserveAuditWrite(time.Since(start), err)
	if err != nil {
		r.log.Error().Str("event", "audit.unavailable").Msg(err.Error())
	}
	return err
}

// eventOf renders a proxy record as an audit event: decision facts only,
// never headers, query strings, bodies or credentials.
func eventOf(rec *dataplane.Record, name string) *audit.Event {
	return &audit.Event{
		Event: name, AuditID: rec.AuditID, Session: rec.Session, Client: rec.Client,
		Method: rec.Method, Host: rec.Host, Port: rec.Port, Path: rec.Path,
		Decision: rec.Verdict, Reason: rec.Reason,
		Connector: rec.FQN, ConnectorVersion: rec.Version, ConnectorHash: rec.Hash,
		Tool: rec.Tool, Operation: rec.Operation,
		Status: rec.Status, UpstreamStatus: rec.Upstream, BytesIn: rec.BytesIn, BytesOut: rec.BytesOut,
		DurationMS: ms(rec.Duration), UpstreamMS: ms(rec.UpstreamD), Fields: rec.Fields,
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
