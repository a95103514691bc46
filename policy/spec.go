package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SchemaVersion is the only schema_version this package accepts.
const SchemaVersion = "aileron.connector.v1"

// Approval values of OperationSpec.Approval. The empty string means
// ApprovalNone.
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
)

// Idempotency values of OperationSpec.Idempotency. The empty string means
// the spec does not say.
const (
	Idempotent    = "idempotent"
	NotIdempotent = "not_idempotent"
)

// Credential kinds (Credential.Kind).
const (
	CredentialOAuth2    = "oauth2"
	CredentialAPIKey    = "api_key"
	CredentialBearer    = "bearer"
	CredentialBasic     = "basic"
	CredentialAWSSigV4  = "aws_sigv4"
	credentialKindsList = "oauth2, api_key, bearer, basic or aws_sigv4"
)

// Redaction modes of AuditField.Redact.
const (
	RedactKeep = "keep"
	RedactHash = "hash"
	RedactDrop = "drop"
)

// Spec is one aileron.connector.v1 document. Values returned by ParseSpec
// have passed every validation rule; treat them as read-only.
type Spec struct {
	SchemaVersion string    `json:"schema_version"`
	Connector     Connector `json:"connector"`
	Tools         []Tool    `json:"tools"`
}

// Connector identifies the package a spec belongs to.
type Connector struct {
	// FQN is scheme://owner/repo[/subpath], scheme github, gitlab, hub or local.
	FQN string `json:"fqn"`
	// Version is a strict SemVer MAJOR.MINOR.PATCH[-pre][+build].
	Version string `json:"version"`
}

// Tool groups operations under one command name.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Operations  []OperationSpec `json:"operations"`
}

// OperationSpec is one operation as written in a spec. An operation without
// Method, Path or Hosts is valid but never matches a proxied request.
type OperationSpec struct {
	Name        string `json:"name"`
	Summary     string `json:"summary,omitempty"`
	Description string `json:"description,omitempty"`
	// Method is an upper-case HTTP method token such as "GET".
	Method string `json:"method,omitempty"`
	// Path is a pattern such as "/gmail/v1/users/me/messages/{id}".
	Path string `json:"path,omitempty"`
	// Hosts are host or host:port entries (port 443 when absent).
	Hosts []string `json:"hosts,omitempty"`
	// Idempotency is Idempotent, NotIdempotent or empty.
	Idempotency string `json:"idempotency,omitempty"`
	// Approval is ApprovalRequired, ApprovalNone or empty (= none).
	Approval string `json:"approval,omitempty"`
	// Credential is the zero value when the operation needs none.
	Credential Credential   `json:"credential,omitzero"`
	Inputs     []Input      `json:"inputs,omitempty"`
	Audit      []AuditField `json:"audit,omitempty"`
	// WebSocket lets a GET request of this operation upgrade its
	// connection to a WebSocket (Upgrade: websocket); without it, any
	// upgrade is refused. Frames after the switch are not inspected.
	WebSocket bool `json:"websocket,omitempty"`
	// Usage names the model API dialect of the operation's requests and
	// answers (UsageAnthropic, UsageOpenAI or UsageGemini): the proxy reads
	// the model asked for and the tokens the provider reports from them, for
	// the audit line, metrics and budgets. Empty: not a model call.
	Usage string `json:"usage,omitempty"`
	// Visibility is VisibilityExternal, VisibilityInternal or empty (=
	// external). An internal operation is reachable only as a step of an
	// installed action.
	Visibility string `json:"visibility,omitempty"`
	// InputSchema, when set, is a whole JSON Schema (2020-12) for the
	// operation's arguments, used instead of the per-input constraints.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// OutputSchema, when set, is a JSON Schema of the operation's answer.
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Visibility values of OperationSpec.Visibility. The empty string means
// VisibilityExternal.
const (
	VisibilityExternal = "external"
	VisibilityInternal = "internal"
)

// IsInternal reports whether the operation's visibility is "internal".
func (o *OperationSpec) IsInternal() bool { return o.Visibility == VisibilityInternal }

// The model API dialects an operation's Usage may name.
const (
	UsageAnthropic = "anthropic"
	UsageOpenAI    = "openai"
	UsageGemini    = "gemini"
)

// RequiresApproval reports whether the operation's approval is "required".
func (o *OperationSpec) RequiresApproval() bool { return o.Approval == ApprovalRequired }

// Credential says which credential kind an operation needs and, optionally,
// where it goes. In JSON it is either the kind alone ("oauth2") or an object
// {"kind":…, "header":…, "format":…, "query":…, "service":…,
// "alternatives":[…]}.
type Credential struct {
	// Kind is one of the Credential* constants; empty means no credential.
	Kind string `json:"kind"`
	// Header names the request header that carries the credential.
	Header string `json:"header,omitempty"`
	// Format renders the header value, e.g. "Bearer {token}" or "{key}".
	Format string `json:"format,omitempty"`
	// Query names a query parameter that carries the credential instead.
	Query string `json:"query,omitempty"`
	// Service is the AWS service name signed for (aws_sigv4 only).
	Service string `json:"service,omitempty"`
	// Alternatives are other places a client may put the credential
	// (api_key, bearer and oauth2 only). Header, Format and Query above are
	// the primary place. When a client's request carries its session's
	// placeholder in one of these places, the real credential goes there
	// instead, and the client's values in the other places are removed.
	Alternatives []CredentialPlace `json:"alternatives,omitempty"`
}

// CredentialPlace is one place a credential may go: a header whose value
// is rendered from Format, or the query parameter Query.
type CredentialPlace struct {
	Header string `json:"header,omitempty"`
	Format string `json:"format,omitempty"`
	Query  string `json:"query,omitempty"`
}

// IsZero reports whether no credential is declared.
func (c Credential) IsZero() bool {
	return c.Kind == "" && c.Header == "" && c.Format == "" && c.Query == "" && c.Service == "" && len(c.Alternatives) == 0
}

// credentialObject has Credential's fields without its methods.
type credentialObject struct {
	Kind         string            `json:"kind"`
	Header       string            `json:"header,omitempty"`
	Format       string            `json:"format,omitempty"`
	Query        string            `json:"query,omitempty"`
	Service      string            `json:"service,omitempty"`
	Alternatives []CredentialPlace `json:"alternatives,omitempty"`
}

// UnmarshalJSON accepts a kind string or an object. JSON null leaves c
// unchanged. Any other JSON type is an error.
func (c *Credential) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '"':
		var kind string
		if err := json.Unmarshal(data, &kind); err != nil {
			return err
		}
		*c = Credential{Kind: kind}
		return nil
	case len(data) > 0 && data[0] == '{':
		var o credentialObject
		if err := json.Unmarshal(data, &o); err != nil {
			return err
		}
		*c = Credential(o)
		return nil
	}
	return fmt.Errorf("credential must be a kind string or an object, got %s", quote(string(data)))
}

// MarshalJSON writes the short string form when only Kind is set.
func (c Credential) MarshalJSON() ([]byte, error) {
	if c.Header == "" && c.Format == "" && c.Query == "" && c.Service == "" && len(c.Alternatives) == 0 {
		return json.Marshal(c.Kind)
	}
	return json.Marshal(credentialObject(c))
}

// Input documents one argument of an operation and, through its JSON
// Schema keywords, constrains it: CheckArguments refuses a request whose
// argument breaks them. Nested schemas (Items, Properties,
// AdditionalProperties) are JSON Schema 2020-12 documents.
type Input struct {
	Name string `json:"name"`
	// Type is a JSON Schema primitive: string, integer, number, boolean,
	// array or object. Empty means string.
	Type string `json:"type,omitempty"`
	// Required says the argument must be present. In JSON it is "required":
	// true|false; a list of names there is RequiredProperties instead.
	Required bool `json:"-"`
	// RequiredProperties lists the properties an object input must have
	// (JSON "required": [...]).
	RequiredProperties []string `json:"-"`
	Description        string   `json:"description,omitempty"`
	// In is where the argument travels: InPath, InQuery or InBody. Empty:
	// path for a template variable, else body for POST, PUT and PATCH and
	// query for other methods.
	In               string                     `json:"in,omitempty"`
	Enum             []json.RawMessage          `json:"enum,omitempty"`
	Const            json.RawMessage            `json:"const,omitempty"`
	Pattern          string                     `json:"pattern,omitempty"`
	Format           string                     `json:"format,omitempty"`
	Minimum          *json.Number               `json:"minimum,omitempty"`
	Maximum          *json.Number               `json:"maximum,omitempty"`
	ExclusiveMinimum *json.Number               `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum *json.Number               `json:"exclusiveMaximum,omitempty"`
	MinLength        *int64                     `json:"minLength,omitempty"`
	MaxLength        *int64                     `json:"maxLength,omitempty"`
	Items            json.RawMessage            `json:"items,omitempty"`
	MinItems         *int64                     `json:"minItems,omitempty"`
	MaxItems         *int64                     `json:"maxItems,omitempty"`
	Properties       map[string]json.RawMessage `json:"properties,omitempty"`
	// AdditionalProperties is a JSON Schema (or true/false) for an object
	// input's properties not in Properties.
	AdditionalProperties json.RawMessage `json:"additionalProperties,omitempty"`
}

// Where an Input travels (Input.In).
const (
	InPath  = "path"
	InQuery = "query"
	InBody  = "body"
)

// inputFields is Input without its JSON methods, for them to reuse.
type inputFields Input

// UnmarshalJSON reads "required" as true|false (the input is required) or
// a list of names (an object input's required properties).
func (in *Input) UnmarshalJSON(data []byte) error {
	*in = Input{}
	j := struct {
		*inputFields
		Required json.RawMessage `json:"required,omitempty"`
	}{inputFields: (*inputFields)(in)}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	req := bytes.TrimSpace(j.Required)
	switch {
	case len(req) == 0 || bytes.Equal(req, []byte("null")):
	case req[0] == '[':
		return json.Unmarshal(req, &in.RequiredProperties)
	default:
		return json.Unmarshal(req, &in.Required)
	}
	return nil
}

// MarshalJSON writes "required" as a list when RequiredProperties is set,
// else as true when Required is.
func (in Input) MarshalJSON() ([]byte, error) {
	j := struct {
		inputFields
		Required json.RawMessage `json:"required,omitempty"`
	}{inputFields: inputFields(in)}
	switch {
	case in.RequiredProperties != nil:
		j.Required, _ = json.Marshal(in.RequiredProperties)
	case in.Required:
		j.Required = json.RawMessage("true")
	}
	return json.Marshal(j)
}

// AuditField names a request value copied into the audit event after
// redaction.
type AuditField struct {
	Name string `json:"name"`
	// Source is "query.NAME", "body.NAME[.NAME…]" or "path.VAR" where VAR is
	// a template variable of the operation's path.
	Source string `json:"source"`
	// Redact is RedactKeep, RedactHash or RedactDrop.
	Redact string `json:"redact"`
}
