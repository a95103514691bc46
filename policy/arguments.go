package policy

import (
	"encoding/json"
	"net/url"
)

// ArgumentValues are a matched request's arguments as they arrived on the
// wire, for Operation.CheckArguments.
type ArgumentValues struct {
	// Path holds the path template values (Decision.Params).
	Path map[string]string
	// Query is the request's query, parsed.
	Query url.Values
	// ContentType is the request's Content-Type header.
	ContentType string
	// Body is the whole request body; set only when ChecksBody is true.
	Body []byte
}

// ArgumentError says why a request's arguments do not fit its operation's
// schema. It names the field and the rule, never a value.
type ArgumentError struct {
	// Field is where the misfit is, e.g. "body.to" or "query.limit".
	Field string
	// Rule is the JSON Schema keyword broken, e.g. "pattern".
	Rule string
	// Message is a bounded sentence for the client.
	Message string
}

func (e *ArgumentError) Error() string { return e.Message }

// OutputSchema returns the operation's output_schema; nil when it declares
// none. Never modify it.
func (o *Operation) OutputSchema() json.RawMessage { return o.Spec.OutputSchema }
