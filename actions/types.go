package actions

import "github.com/aileronhq/aileron/policy"

// Wire types shared by the action runner, the sandbox API and the MCP server.
// Their JSON is the sandbox API's: GET /v1/actions answers a List,
// POST /v1/actions/{name}/run and GET /v1/action-approvals/{id}/result answer
// a Result.

// Action run statuses, the values of Result.Status.
const (
	// StatusPendingApproval: the run waits for a human decision on
	// Result.ApprovalID (review it at ReviewURL).
	StatusPendingApproval = "pending_approval"
	// StatusRunning: the run was approved and its steps are executing.
	StatusRunning = "running"
	// StatusCompleted: every step succeeded; Output holds the result.
	StatusCompleted = "completed"
	// StatusDenied: a human denied the approval; nothing was executed
	// past the gate.
	StatusDenied = "denied"
	// StatusFailed: a step failed (Error says which and why) and the
	// chain stopped there; reason deadline_exceeded when the run's
	// deadline cut it.
	StatusFailed = "failed"
	// StatusCancelled: the run was cancelled (aileron actions cancel, the
	// sandbox API's cancel call, MCP notifications/cancelled): the step in
	// flight, if any, was cancelled upstream and no later step started;
	// Error has reason cancelled and, once the run stopped, the step. A
	// run cancelled while it waited for approval never runs.
	StatusCancelled = "cancelled"
)

// List is the set of actions a session may call, with a version that
// changes whenever the set (or any action in it) changes.
type List struct {
	// Version is an opaque digest of Actions; equal versions mean equal lists.
	Version string `json:"version"`
	// Actions are sorted by Name.
	Actions []Info `json:"actions"`
}

// Info describes one installed action as agents see it.
type Info struct {
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
	// Unpinned lists, as FQN@VERSION, the connectors the action requires
	// by a placeholder hash rather than a pin (installed with
	// --allow-unpinned, for development).
	Unpinned []string `json:"unpinned,omitempty"`
}

// Result is the state (final or not) of one action run.
type Result struct {
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// RunID names the run: cancel it with POST
	// /v1/action-runs/{run_id}/cancel (or aileron actions cancel on the
	// host); audit lines of its steps carry it as run_id.
	RunID string `json:"run_id,omitempty"`
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
	Error *RunError `json:"error,omitempty"`
}

// RunError explains a failed or denied run.
type RunError struct {
	// Reason is machine-readable (e.g. "approval_denied", "upstream_status"),
	// from the closed set of policy.Reason.
	Reason policy.Reason `json:"reason"`
	// Message is human-readable and actionable.
	Message string `json:"message"`
	// Step is the id of the [[execute]] step that failed, if one did.
	Step string `json:"step,omitempty"`
}
