package main

import (
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/metrics"
	"github.com/aileronhq/aileron/notify"
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
	// notify hands approval events to the webhooks (never blocking);
	// nil when there are none. reviewURL is an approval's page.
	notify    func(notify.Event)
	reviewURL func(id string) string
}

// Decided writes the decision line; an error refuses the request.
func (r *recorder) Decided(rec *dataplane.Record) error {
	ev := rec.Event
	ev.Details = proxyDetails(rec.Details)
	return r.write(&ev)
}

// proxyDetails keeps, of a proxy record's details, only the one the data
// plane documents: "sni", the server a refused ClientHello asked for,
// "end", how a WebSocket turn ended, and "field" and "rule", the argument
// of an invalid_arguments refusal and the schema rule it broke (its name,
// never its value), and "approval_id" and "proposal_id", the approval that
// released an unknown request (ask mode) and the proposal it was learned
// into (docs/audit.md). Anything else is dropped: details are identifying
// names, never request data.
func proxyDetails(d map[string]string) map[string]string {
	if sni, ok := d["sni"]; ok {
		return map[string]string{"sni": sni}
	}
	if field, ok := d["field"]; ok {
		return map[string]string{"field": field, "rule": d["rule"]}
	}
	if end, ok := d["end"]; ok {
		return map[string]string{"end": end} // how a WebSocket turn ended (connector.proxy.turn)
	}
	if ap, ok := d["approval_id"]; ok {
		return map[string]string{"approval_id": ap, "proposal_id": d["proposal_id"]}
	}
	return nil
}

// Completed writes the outcome line and updates the metrics.
func (r *recorder) Completed(rec *dataplane.Record) {
	r.metrics.Observe(rec)
	ev := rec.Event
	ev.Details = proxyDetails(rec.Details)
	if rec.Decided {
		ev.Name = ev.Name.Outcome()
	}
	if err := r.writeOutcome(&ev); err != nil {
		r.log.Error().Str("event", "audit.write_failed").Str("audit_id", rec.AuditID).Err(err).Msg("the outcome line was not written")
	}
}

// Event records a control-plane change (session.created, store.installed,
// credential.refreshed, …).
func (r *recorder) Event(name audit.EventName, details map[string]string) {
	switch name {
	case audit.EventCredentialRefreshed, audit.EventCredentialRefreshFailed:
		r.metrics.OAuthRefresh(name == audit.EventCredentialRefreshed)
	}
	if err := r.write(&audit.Event{Name: name, Details: details}); err != nil {
		r.log.Error().Str("event", "audit.write_failed").Str("audit_event", string(name)).Err(err).Msg("a control-plane event was not written")
	}
	r.logApproval(name, details)
	if r.notify != nil && strings.HasPrefix(string(name), "approval.") {
		r.notify(approvalNote(name, details, r.reviewURL))
	}
}

// logApproval tells the operator at once, in the log, that a request waits
// for a human (and how to decide it), and how each approval ended; the
// held request's own lines come only when its hold ends.
func (r *recorder) logApproval(name audit.EventName, d map[string]string) {
	var msg string
	switch name {
	case audit.EventApprovalRequested:
		msg = "a request waits for a human's approval: `aileron approvals show " + d["approval_id"] + "`, then approve or deny it there or on the approvals page"
	case audit.EventApprovalApproved:
		msg = "approved by " + d["decided_by"]
	case audit.EventApprovalDenied:
		msg = "denied by " + d["decided_by"] + ": " + d["reason"]
	case audit.EventApprovalExpired:
		msg = "expired before anyone decided"
	default:
		return
	}
	r.log.Info().Str("event", string(name)).Str("approval_id", d["approval_id"]).Str("session", d["session"]).
		Str("operation", d["operation"]).Str("method", d["method"]).Str("host", d["host"]).Str("path", d["path"]).Msg(msg)
}

// Record writes an event its source built whole: the fence's
// (sandbox.egress_blocked, dns.denied, sandbox.started, sandbox.stopped)
// and the action runner's (action.*, with run_id and the run's audit ids).
func (r *recorder) Record(ev audit.Event) {
	if err := r.write(&ev); err != nil {
		r.log.Error().Str("event", "audit.write_failed").Str("audit_event", string(ev.Name)).Err(err).Msg("an event was not written")
	}
}

func (r *recorder) write(ev *audit.Event) error { return r.put(ev, false) }

// writeOutcome records a line nothing waits on: it reaches the OS with the
// next decision line or within audit.sync_interval (audit.Log.WriteDeferred).
func (r *recorder) writeOutcome(ev *audit.Event) error { return r.put(ev, true) }

// put writes ev, deferred or not. It calls the Log's methods directly
// rather than through a func value, so that ev (a copy of the request's
// record) stays on the caller's stack: two fewer heap objects a request.
func (r *recorder) put(ev *audit.Event, deferred bool) error {
	if r.audit == nil {
		return nil // audit.enabled: false
	}
	start := time.Now()
	var err error
	if deferred {
		err = r.audit.WriteDeferred(ev)
	} else {
		err = r.audit.Write(ev)
	}
	r.metrics.ObserveAuditWrite(time.Since(start), err)
	if err != nil {
		r.log.Error().Str("event", "audit.unavailable").Err(err).Msg("the audit trail cannot be written; requests are refused")
	}
	return err
}
