package audit

import "github.com/rs/zerolog"

// EventName names what an audit line records. The set is closed: every
// name the daemon writes is one of the constants below (EventNames lists
// them), and archtest fails on a name built anywhere else.
type EventName string

// Events of the request path: one decision line before anything is
// forwarded, and one outcome line with the same audit_id when it ends.
const (
	// EventProxied: an inner request was allowed and is about to be sent.
	EventProxied EventName = "connector.proxy.proxied"
	// EventCompleted: the exchange of an EventProxied request ended.
	EventCompleted EventName = "connector.proxy.completed"
	// EventTurn: a turn on a model API's WebSocket ended (an OpenAI
	// Responses response.create and its final event); one line per turn,
	// with the audit_id of the connection's own lines, the model and the
	// tokens.
	EventTurn EventName = "connector.proxy.turn"
	// EventRejected: a request was refused, or its upstream leg failed.
	EventRejected EventName = "connector.proxy.rejected"
	// EventPassthrough: a passthrough tunnel was allowed and opened.
	EventPassthrough EventName = "sandbox.proxy.passthrough"
	// EventPassthroughClosed: a passthrough tunnel ended.
	EventPassthroughClosed EventName = "sandbox.proxy.closed"
	// EventTunnelCut: the proxy closed a tunnel (intercepted, sandbox API
	// or passthrough) whose session was deleted or expired.
	EventTunnelCut EventName = "sandbox.proxy.tunnel_cut"
	// EventSessionRevoked: the proxy found a session with open tunnels
	// deleted or expired, and cut them (one EventTunnelCut each).
	EventSessionRevoked EventName = "session.revoked"
)

// Events of the control plane; their facts are in Event.Details.
const (
	EventApprovalRequested EventName = "approval.requested"
	EventApprovalApproved  EventName = "approval.approved"
	EventApprovalDenied    EventName = "approval.denied"
	EventApprovalExpired   EventName = "approval.expired"

	// An action run: pending (waits for an approval), started (its steps
	// begin executing: the root of the run's call tree, with its own
	// audit_id), then completed, failed, denied or cancelled.
	EventActionPending   EventName = "action.pending"
	EventActionStarted   EventName = "action.started"
	EventActionCompleted EventName = "action.completed"
	EventActionFailed    EventName = "action.failed"
	EventActionDenied    EventName = "action.denied"
	EventActionCancelled EventName = "action.cancelled"

	EventCredentialSet           EventName = "credential.set"
	EventCredentialDeleted       EventName = "credential.deleted"
	EventCredentialRefreshed     EventName = "credential.refreshed"
	EventCredentialRefreshFailed EventName = "credential.refresh_failed"
	EventBindingSet              EventName = "binding.set"
	EventBindingRemoved          EventName = "binding.removed"

	// EventProposalCreated: a session in learn mode made its first unknown
	// request of a method, host and path template (details: proposal_id,
	// template, credential); EventProposalRejected: a human rejected the
	// proposal (details: proposal_id, template, by, reason);
	// EventProposalAccepted: a human accepted it as a rule of a learned
	// connector (details: proposal_id, session, connector, method,
	// template, approval, by).
	EventProposalCreated  EventName = "proposal.created"
	EventProposalRejected EventName = "proposal.rejected"
	EventProposalAccepted EventName = "proposal.accepted"
	// EventProposalRequested: an agent asked for access through the
	// sandbox API or request_access (details: proposal_id, template, state,
	// justification).
	EventProposalRequested EventName = "proposal.requested"

	EventSessionCreated EventName = "session.created"
	EventSessionDeleted EventName = "session.deleted"
	// EventSessionUpdated: a live session's unknown-request mode changed.
	EventSessionUpdated EventName = "session.updated"

	EventStoreInstalled EventName = "store.installed"
	// EventStoreConsented: a connector version was installed or approved
	// under a consent (who, how, the grants, hash and signer).
	EventStoreConsented      EventName = "store.consented"
	EventStoreRemoved        EventName = "store.removed"
	EventStoreTamperDetected EventName = "store.tamper_detected"

	// EventTrustSet and EventTrustRemoved: a publisher authority's allowed
	// signers were set (aileron trust add) or removed.
	EventTrustSet     EventName = "trust.set"
	EventTrustRemoved EventName = "trust.removed"

	// EventConfigReloaded: SIGHUP changed what the daemon enforces
	// (passthrough rules, approval limits).
	EventConfigReloaded EventName = "config.reloaded"
	// EventDaemonStarted and EventDaemonStopped bracket a run: a started
	// line with no stopped line before the next one is a crash.
	EventDaemonStarted EventName = "daemon.started"
	EventDaemonStopped EventName = "daemon.stopped"

	// A fenced sandbox (aileron sandbox run) was wired up or torn down.
	EventSandboxStarted EventName = "sandbox.started"
	EventSandboxStopped EventName = "sandbox.stopped"
	// EventEgressBlocked: the fence rejected a packet that was not for
	// Aileron (rate-limited per sandbox).
	EventEgressBlocked EventName = "sandbox.egress_blocked"
	// EventDNSDenied: the policy DNS server refused a query; the name is
	// cut and hashed, since names can carry data out.
	EventDNSDenied EventName = "dns.denied"
)

// Events of the trail itself; their facts are in Event.Details.
const (
	// EventCheckpoint: a signed checkpoint of the lines before it
	// (details: origin, size, root, range, note).
	EventCheckpoint EventName = "audit.checkpoint"
	// EventTrailStarted: an operator started a new trail on purpose
	// (`aileron audit new-trail`); the first line of that trail records
	// why, and what the previous trail was and where it went.
	EventTrailStarted EventName = "audit.trail_started"
	// EventTrailResumed: the live file came back after the daemon found
	// it deleted, moved or replaced, and recording resumed.
	EventTrailResumed EventName = "audit.trail_resumed"
)

// EventNames returns every event name the daemon writes.
func EventNames() []EventName {
	return []EventName{
		EventProxied, EventCompleted, EventTurn, EventRejected, EventPassthrough, EventPassthroughClosed,
		EventTunnelCut, EventSessionRevoked,
		EventApprovalRequested, EventApprovalApproved, EventApprovalDenied, EventApprovalExpired,
		EventActionPending, EventActionStarted, EventActionCompleted, EventActionFailed, EventActionDenied, EventActionCancelled,
		EventCredentialSet, EventCredentialDeleted, EventCredentialRefreshed, EventCredentialRefreshFailed,
		EventBindingSet, EventBindingRemoved,
		EventSessionCreated, EventSessionDeleted, EventSessionUpdated, EventProposalCreated, EventProposalRejected, EventProposalAccepted, EventProposalRequested,
		EventStoreInstalled, EventStoreConsented, EventStoreRemoved, EventStoreTamperDetected, EventTrustSet, EventTrustRemoved, EventConfigReloaded,
		EventDaemonStarted, EventDaemonStopped,
		EventSandboxStarted, EventSandboxStopped, EventEgressBlocked, EventDNSDenied,
		EventCheckpoint, EventTrailStarted, EventTrailResumed,
	}
}

// Outcome is the name of the outcome line that follows a decision line
// named n once the exchange ends: connector.proxy.completed after
// connector.proxy.proxied, sandbox.proxy.closed after
// sandbox.proxy.passthrough, n itself otherwise.
func (n EventName) Outcome() EventName {
	switch n {
	case EventProxied:
		return EventCompleted
	case EventPassthrough:
		return EventPassthroughClosed
	}
	return n
}

// MarshalZerologObject writes the event as the fields of the daemon's
// canonical log line: the same keys as the audit line, except the chain's
// (time, seq, prev_hash, which the log has its own of) and the audit[]
// values and details (which stay in the trail). TestLogFieldsFollowTheSchema
// keeps it in step with the JSON schema.
func (e *Event) MarshalZerologObject(z *zerolog.Event) {
	z.Str("event", string(e.Name)).Str("audit_id", e.AuditID).Str("run_id", e.RunID).Str("parent_audit_id", e.ParentAuditID).
		Str("session", e.Session).Str("client", e.Client).
		Str("method", e.Method).Str("host", e.Host).Int("port", e.Port).Str("path", e.Path).
		Str("decision", e.Decision).Str("reason", e.Reason).
		Str("connector", e.Connector).Str("connector_version", e.ConnectorVersion).Str("connector_hash", e.ConnectorHash).
		Str("tool", e.Tool).Str("operation", e.Operation).
		Int("status", e.Status).Int("upstream_status", e.UpstreamStatus).
		Int64("bytes_in", e.BytesIn).Int64("bytes_out", e.BytesOut).
		Float64("duration_ms", e.DurationMS).Float64("upstream_ms", e.UpstreamMS)
	if e.Model != "" || e.InputTokens != 0 || e.OutputTokens != 0 { // a model call
		z.Str("model", e.Model).Bool("streamed", e.Streamed).Int64("input_tokens", e.InputTokens).
			Int64("output_tokens", e.OutputTokens).Int64("cached_tokens", e.CachedTokens).Float64("ttfb_ms", e.TTFBMS)
	}
}
