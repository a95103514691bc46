package audit

import (
	"errors"
	"time"
)

// Errors returned by this package. Callers test them with errors.Is.
var (
	// ErrUnavailable: the sink cannot record events right now (open, write
	// or rotate failed, or the log is closed). The proxy must refuse the
	// request (audit_unavailable). The chain did not advance; the next
	// Write retries.
	ErrUnavailable = errors.New("audit log unavailable")
	// ErrClosed: the Log was never opened or has been closed. Always
	// returned together with ErrUnavailable.
	ErrClosed = errors.New("audit log closed")
	// ErrInvalidEvent: the event cannot be recorded because of its content
	// (it does not marshal, or its line exceeds MaxLineBytes). The chain
	// did not advance.
	ErrInvalidEvent = errors.New("invalid audit event")
	// ErrCorrupt: an existing log file does not parse as a chain (a torn
	// or unparsable tail found by Open, a bad line met by Tail).
	ErrCorrupt = errors.New("audit log corrupt")
	// ErrTrailChanged: the file the chain continues in was deleted,
	// moved or replaced under the running Log. Always returned together
	// with ErrUnavailable: nothing is recorded (and the proxy forwards
	// nothing) until the file is back at its path.
	ErrTrailChanged = errors.New("audit trail changed under the daemon")
)

// MaxLineBytes bounds one audit line (without its newline). Write refuses
// larger events with ErrInvalidEvent; Verify and Tail report larger lines
// as corrupt instead of buffering them.
const MaxLineBytes = 1 << 20

// Event is one audit line. Its JSON field names are constant (see the
// tags); fields other than time, seq, prev_hash and event are omitted when
// empty, but a name never changes meaning or spelling.
//
// An Event must NEVER hold: credential bytes (tokens, keys, passwords,
// signatures), query strings, request or response body values (except the
// spec's audit[] values after redaction, in Fields), or raw header names
// and values. Put control-plane facts in Details, never secrets.
type Event struct {
	// Time is when the event happened; Write fills it (Log.Now) when zero
	// and always stores it in UTC, rendered as RFC 3339 with nanoseconds.
	Time time.Time `json:"time"`
	// Seq is the line's position in the chain; set by Write.
	Seq uint64 `json:"seq"`
	// PrevHash is the hex SHA-256 of the previous line; set by Write.
	PrevHash string `json:"prev_hash"`
	// Name is the kind of event, one of the EventName constants
	// (connector.proxy.proxied, approval.requested, store.installed, …).
	Name EventName `json:"event"`
	// Node is the fleet node that wrote the line (Log.Node): every line
	// of a fleet node's trail carries it; empty on a single node.
	Node    string `json:"node,omitempty"`
	AuditID string `json:"audit_id,omitempty"`
	// RunID is the action run the line belongs to: its steps' request
	// lines and its own action.* lines carry it.
	RunID string `json:"run_id,omitempty"`
	// ParentAuditID is the audit_id of the line this one hangs under in a
	// run's call tree: a step's request lines and the run's later action.*
	// lines name the run's action.started line.
	ParentAuditID string `json:"parent_audit_id,omitempty"`
	Session       string `json:"session,omitempty"`
	// Client is the sandbox peer address.
	Client string `json:"client,omitempty"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"`
	Port   int    `json:"port,omitempty"`
	// Path is the request path only: never the query string.
	Path string `json:"path,omitempty"`
	// Decision is allow, allow_after_approval, passthrough or deny.
	Decision string `json:"decision,omitempty"`
	// Reason is the machine reason of the decision.
	Reason           string `json:"reason,omitempty"`
	Connector        string `json:"connector,omitempty"`
	ConnectorVersion string `json:"connector_version,omitempty"`
	ConnectorHash    string `json:"connector_hash,omitempty"`
	Tool             string `json:"tool,omitempty"`
	Operation        string `json:"operation,omitempty"`
	// Status is the status the client received.
	Status         int   `json:"status,omitempty"`
	UpstreamStatus int   `json:"upstream_status,omitempty"`
	BytesIn        int64 `json:"bytes_in,omitempty"`
	BytesOut       int64 `json:"bytes_out,omitempty"`
	// DurationMS is the whole exchange, UpstreamMS the upstream part, in
	// milliseconds.
	DurationMS float64 `json:"duration_ms,omitempty"`
	UpstreamMS float64 `json:"upstream_ms,omitempty"`
	// Model is the model a call of a model provider's operation asked for
	// (its operation names a usage dialect); Streamed says the answer was an
	// event stream (or a WebSocket turn). The token counts are those the
	// provider reported: input, output, and the part of the input read from
	// its cache. TTFBMS is the time from sending the request to the first
	// byte of the answer's body, in milliseconds. Never prompt or
	// completion text.
	Model        string  `json:"model,omitempty"`
	Streamed     bool    `json:"streamed,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CachedTokens int64   `json:"cached_tokens,omitempty"`
	TTFBMS       float64 `json:"ttfb_ms,omitempty"`
	// Fields holds the operation's audit[] values after redaction, as
	// returned by Extract.
	Fields map[string]any `json:"fields,omitempty"`
	// Details holds control-plane facts: store.installed
	// connector/version/hash, session.created session/name/expires_at/
	// connectors, credential.refreshed credential (the name, never the
	// secret); docs/audit.md lists each event's keys.
	Details map[string]string `json:"details,omitempty"`
}

// Stats are counters for metrics. They are cumulative since Open.
type Stats struct {
	// Lines is how many lines were appended.
	Lines uint64
	// Errors counts failed writes, opens, rotations and fsyncs.
	Errors uint64
	// Rotations counts files started after the first.
	Rotations uint64
	// Syncs counts successful background and final fsyncs.
	Syncs uint64
	// Seq is the seq of the last recorded line (0 for an empty log).
	Seq uint64
	// LastWriteLatency is the duration of the last successful Write.
	LastWriteLatency time.Duration
	// File is the path of the file being appended to ("" if none is open).
	File string
	// LastError describes the last failure ("" if none).
	LastError string
	// Checkpoints counts the checkpoint lines written; Signed is the
	// number of lines the last checkpoint signs (with a Key).
	Checkpoints, Signed uint64
}
