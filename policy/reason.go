package policy

// Reason is the machine-readable reason of a decision or refusal, the
// "reason" of the error envelope and of audit lines. The set is closed:
// every reason the daemon can emit is one of the constants below (Reasons
// lists them), and archtest fails on a reason built anywhere else.
type Reason string

// Decisions: what Decide and DecideConnect answer.
const (
	ReasonMatched               Reason = "operation_matched"
	ReasonHostMatched           Reason = "host_matched"
	ReasonPassthroughRule       Reason = "passthrough_rule"
	ReasonNoMatchingOperation   Reason = "no_matching_operation"
	ReasonHostNotAllowed        Reason = "host_not_allowed"
	ReasonNonCanonicalPath      Reason = "non_canonical_path"
	ReasonConnectorNotInSession Reason = "connector_not_in_session"
	ReasonBadRequest            Reason = "bad_request"
	ReasonAuthorityMismatch     Reason = "authority_mismatch"
	// ReasonMethodOverride: the request carries X-HTTP-Method-Override or
	// a kin header, which would make the upstream act on another method.
	ReasonMethodOverride Reason = "method_override"
	// ReasonUpgradeRefused: the request asks to switch protocols (h2c
	// always; WebSocket on an operation that did not opt in; any other
	// protocol), after which its bytes would pass undecided.
	ReasonUpgradeRefused Reason = "upgrade_refused"
	// ReasonUnknownApproved: a request no operation matches, of a session
	// in ask mode, that a human approved and that still matches none once
	// approved: it is sent once, exactly as previewed, with no credential.
	ReasonUnknownApproved Reason = "unknown_approved"
)

// The request pipeline: the stages that refuse after (or around) policy.
const (
	ReasonProxyAuth Reason = "proxy_auth_required"
	// ReasonSessionRevoked: the session was deleted or expired while its
	// tunnel was open; the request is refused and the tunnel closed.
	ReasonSessionRevoked   Reason = "session_revoked"
	ReasonMalformedRequest Reason = "malformed_request"
	// ReasonBodyStalled: the client stopped sending its request body (or
	// sent it slower than the configured minimum rate).
	ReasonBodyStalled          Reason = "body_stalled"
	ReasonHeaderTooLarge       Reason = "request_header_too_large"
	ReasonInsecureScheme       Reason = "insecure_scheme"
	ReasonPrivateAddress       Reason = "private_address"
	ReasonApprovalPending      Reason = "approval_pending"
	ReasonApprovalDenied       Reason = "approval_denied"
	ReasonApprovalConsumed     Reason = "approval_consumed"
	ReasonApprovalExpired      Reason = "approval_expired"
	ReasonApprovalUnavailable  Reason = "approval_unavailable"
	ReasonApprovalBodyTooLarge Reason = "body_too_large_for_approval"
	// ReasonEncodedBody: a request that needs approval carries a
	// Content-Encoding; the approver could not read what is sent.
	ReasonEncodedBody Reason = "encoded_body"
	// ReasonAmbiguousBody: a request that needs approval has a JSON body
	// with keys that collide case-insensitively (or repeat).
	ReasonAmbiguousBody Reason = "ambiguous_body"
	// ReasonApprovalLimit: the session has too many pending approvals, or
	// held bodies fill the proxy's memory budget for them.
	ReasonApprovalLimit         Reason = "approval_limit"
	ReasonCredentialUnavailable Reason = "credential_unavailable"
	ReasonPlaceholder           Reason = "placeholder_misuse"
	ReasonAuditUnavailable      Reason = "audit_unavailable"
	ReasonEncodedResponse       Reason = "encoded_response"
	ReasonUpstreamUnavailable   Reason = "upstream_unavailable"
	ReasonUpstreamTimeout       Reason = "upstream_timeout"
	ReasonUpstreamTLS           Reason = "upstream_tls_failed"
	ReasonUpstreamCut           Reason = "upstream_cut"
	ReasonClientGone            Reason = "client_gone"
	// ReasonInternal: the proxy or an action step could not run (a bug).
	ReasonInternal Reason = "internal"
	// ReasonModelNotAllowed: a model call asks for a model outside the
	// session's model list (or one the proxy could not read).
	ReasonModelNotAllowed Reason = "model_not_allowed"
	// ReasonBudgetExhausted: the session has used up a budget of tokens,
	// requests or bytes for its current window (or its life).
	ReasonBudgetExhausted Reason = "budget_exhausted"
	// ReasonCapabilityNotGranted: an action step's request leaves the
	// capabilities its action lists (a host:port or credential kind).
	ReasonCapabilityNotGranted Reason = "capability_not_granted"
)

// The APIs (admin, sandbox, approvals page) and the clients that read them.
const (
	// ReasonInvalidArgument: an API request's own arguments are malformed
	// (compare invalid_arguments, an action step's).
	ReasonInvalidArgument    Reason = "invalid_argument"
	ReasonInvalidSpec        Reason = "invalid_spec"
	ReasonInvalidPackage     Reason = "invalid_package"
	ReasonConflict           Reason = "conflict"
	ReasonNotFound           Reason = "not_found"
	ReasonNoRoute            Reason = "no_route"
	ReasonMethodNotAllowed   Reason = "method_not_allowed"
	ReasonBodyTooLarge       Reason = "body_too_large"
	ReasonNotEnabled         Reason = "not_enabled"
	ReasonNotReady           Reason = "not_ready"
	ReasonShuttingDown       Reason = "shutting_down"
	ReasonIntegrityFailure   Reason = "integrity_failure"
	ReasonPolicyReloadFailed Reason = "policy_reload_failed"
	ReasonMCPUnavailable     Reason = "mcp_unavailable"
	ReasonLoginRequired      Reason = "login_required"
	// ReasonInternalError: an API request failed unexpectedly (the log has
	// the details).
	ReasonInternalError Reason = "internal_error"
	// ReasonUnexpectedAnswer: a client of the admin or sandbox API got an
	// error answer that is not the envelope (dataplane.ParseRefusal).
	ReasonUnexpectedAnswer Reason = "unexpected_answer"
)

// Action runs: why a run failed or was denied (the error.reason of an action run's result).
const (
	ReasonApprovalMissing  Reason = "approval_missing"
	ReasonDaemonStopped    Reason = "daemon_stopped"
	ReasonActionChanged    Reason = "action_changed"
	ReasonConnectorChanged Reason = "connector_changed"
	ReasonStepUnresolved   Reason = "step_unresolved"
	ReasonStepInputs       Reason = "step_inputs"
	// ReasonInvalidArguments: the arguments an action step built for its
	// operation do not make a request (compare invalid_argument); on the
	// wire, a matched request whose path variables, query or body do not
	// fit its operation's input schema (400, naming the field and rule).
	ReasonInvalidArguments Reason = "invalid_arguments"
	ReasonUpstreamStatus   Reason = "upstream_status"
	// ReasonDeadlineExceeded: the run's deadline (the action's timeout,
	// counted from when its steps started) passed; the step then in flight
	// was cancelled upstream and no later step started.
	ReasonDeadlineExceeded Reason = "deadline_exceeded"
	// ReasonCancelled: the run was cancelled (aileron actions cancel, the
	// sandbox API or MCP notifications/cancelled) before it ended.
	ReasonCancelled Reason = "cancelled"
)

// Containment: a fenced sandbox's DNS queries and the packets its fence
// stops (docs/containment.md).
const (
	// ReasonDNSNameNotAllowed: the name is not one the session may reach.
	ReasonDNSNameNotAllowed Reason = "dns_name_not_allowed"
	// ReasonDNSTypeNotAllowed: only IN A and AAAA queries get data.
	ReasonDNSTypeNotAllowed Reason = "dns_type_not_allowed"
	// ReasonDNSMalformed: not one question, not a query, or a name or
	// label longer than DNS allows.
	ReasonDNSMalformed Reason = "dns_malformed"
	// ReasonDNSRateLimited: the sandbox asked faster than its DNS rate.
	ReasonDNSRateLimited Reason = "dns_rate_limited"
	// ReasonNotResolved: a transparent connection went to an address the
	// sandbox's DNS did not hand out, or its TLS server name is not the
	// name that address was handed out for.
	ReasonNotResolved Reason = "not_resolved_by_aileron"
	// ReasonEgressBlocked: the fence rejected a packet that was not for
	// Aileron's DNS or transparent listeners.
	ReasonEgressBlocked Reason = "egress_blocked"
)

// Reasons returns every reason the daemon can emit.
func Reasons() []Reason {
	return []Reason{
		ReasonMatched, ReasonHostMatched, ReasonPassthroughRule, ReasonNoMatchingOperation, ReasonHostNotAllowed,
		ReasonNonCanonicalPath, ReasonConnectorNotInSession, ReasonBadRequest, ReasonAuthorityMismatch, ReasonMethodOverride, ReasonUpgradeRefused,
		ReasonUnknownApproved,

		ReasonProxyAuth, ReasonSessionRevoked, ReasonMalformedRequest, ReasonBodyStalled, ReasonHeaderTooLarge, ReasonInsecureScheme, ReasonPrivateAddress,
		ReasonApprovalPending, ReasonApprovalDenied, ReasonApprovalConsumed, ReasonApprovalExpired,
		ReasonApprovalUnavailable, ReasonApprovalBodyTooLarge, ReasonEncodedBody, ReasonAmbiguousBody, ReasonApprovalLimit, ReasonCredentialUnavailable, ReasonPlaceholder, ReasonAuditUnavailable,
		ReasonEncodedResponse, ReasonUpstreamUnavailable, ReasonUpstreamTimeout, ReasonUpstreamTLS,
		ReasonUpstreamCut, ReasonClientGone, ReasonInternal, ReasonModelNotAllowed, ReasonBudgetExhausted, ReasonCapabilityNotGranted,

		ReasonInvalidArgument, ReasonInvalidSpec, ReasonInvalidPackage, ReasonConflict, ReasonNotFound,
		ReasonNoRoute, ReasonMethodNotAllowed, ReasonBodyTooLarge, ReasonNotEnabled, ReasonNotReady,
		ReasonShuttingDown, ReasonIntegrityFailure, ReasonPolicyReloadFailed, ReasonMCPUnavailable,
		ReasonLoginRequired, ReasonInternalError, ReasonUnexpectedAnswer,

		ReasonApprovalMissing, ReasonDaemonStopped, ReasonActionChanged, ReasonConnectorChanged,
		ReasonStepUnresolved, ReasonStepInputs, ReasonInvalidArguments, ReasonUpstreamStatus,
		ReasonDeadlineExceeded, ReasonCancelled,

		ReasonDNSNameNotAllowed, ReasonDNSTypeNotAllowed, ReasonDNSMalformed, ReasonDNSRateLimited,
		ReasonNotResolved, ReasonEgressBlocked,
	}
}
