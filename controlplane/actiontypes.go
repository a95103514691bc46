package controlplane

import "github.com/aileronhq/aileron/policy"

// Wire types shared by the action runner, the sandbox API and the MCP server.
// Their JSON is the sandbox API's: GET /v1/actions answers an ActionList,
// POST /v1/actions/{name}/run and GET /v1/action-approvals/{id}/result answer
// an ActionResult.

// Action run statuses, the values of ActionResult.Status.
const (
	// ActionStatusPendingApproval: the run waits for a human decision on
	// ActionResult.ApprovalID (review it at ReviewURL).
	ActionStatusPendingApproval = "pending_approval"
	// ActionStatusRunning: the run was approved and its steps are executing.
	ActionStatusRunning = "running"
	// ActionStatusCompleted: every step succeeded; Output holds the result.
	ActionStatusCompleted = "completed"
	// ActionStatusDenied: a human denied the approval; nothing was executed
	// past the gate.
	ActionStatusDenied = "denied"
	// ActionStatusFailed: a step failed (Error says which and why) and the
	// chain stopped there.
	ActionStatusFailed = "failed"
)

// ActionList is the set of actions a session may call, with a version that
// changes whenever the set (or any action in it) changes.
type ActionList struct {
	// Version is an opaque digest of Actions; equal versions mean equal lists.
	Version string `json:"version"`
	// Actions are sorted by Name.
	Actions []ActionInfo `json:"actions"`
}

// ActionInfo describes one installed action as agents see it.
type ActionInfo struct {
	// Name is the manifest's name (kebab-case), the {name} of the run URL.
	Name string `json:"name"`
	// ToolName is Name in snake_case, the MCP tool name.
	ToolName string `json:"tool_name"`
	// Description is the manifest's Markdown body.
	Description string `json:"description"`
	// Version is the action's version.
	Version string `json:"version"`
	// Connector is the FQN of the connector package the action came from.
	Connector string `json:"connector"`
	// ApprovalRequired is true when a run waits for a human decision.
	ApprovalRequired bool `json:"approval_required"`
	// InputSchema is a JSON Schema of type "object" for the run's arguments.
	InputSchema map[string]any `json:"input_schema"`
}

// ActionResult is the state (final or not) of one action run.
type ActionResult struct {
	// Status is one of the ActionStatus* constants.
	Status string `json:"status"`
	// ApprovalID names the approval the run waits on (or waited on); pass it
	// to GET /v1/action-approvals/{id}/result (MCP: check_action_status).
	ApprovalID string `json:"approval_id,omitempty"`
	// ReviewURL is where a human reviews and decides the approval.
	ReviewURL string `json:"review_url,omitempty"`
	// Message is a human-readable summary of the state.
	Message string `json:"message,omitempty"`
	// AuditIDs are the audit records of the steps executed so far.
	AuditIDs []string `json:"audit_ids,omitempty"`
	// Output is the run's result once completed.
	Output any `json:"output,omitempty"`
	// Error says why a run failed or was denied.
	Error *ActionError `json:"error,omitempty"`
}

// ActionError explains a failed or denied run.
type ActionError struct {
	// Reason is machine-readable (e.g. "approval_denied", "upstream_status"),
	// from the closed set of policy.Reason.
	Reason policy.Reason `json:"reason"`
	// Message is human-readable and actionable.
	Message string `json:"message"`
	// Step is the id of the [[execute]] step that failed, if one did.
	Step string `json:"step,omitempty"`
}
