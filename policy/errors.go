package policy

import (
	"errors"
	"strconv"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalidSpec is wrapped by every *ValidationError that reports a
	// problem inside one connector spec (ParseSpec, Spec.Validate).
	ErrInvalidSpec = errors.New("invalid connector spec")
	// ErrConflict is wrapped by every *ValidationError Compile reports when a
	// source is skipped because it clashes with one accepted before it.
	ErrConflict = errors.New("connector spec conflicts with an installed one")
	// ErrBadHost is wrapped by every CanonicalHost failure.
	ErrBadHost = errors.New("invalid host")
	// ErrBadAuthority is wrapped by every ParseAuthority failure.
	ErrBadAuthority = errors.New("invalid authority")
	// ErrNonCanonicalPath is wrapped by every CheckPath failure.
	ErrNonCanonicalPath = errors.New("non-canonical path")
	// ErrBadPassthroughRule is wrapped by every error Compile reports for a
	// PassthroughRule it cannot use.
	ErrBadPassthroughRule = errors.New("invalid passthrough rule")
	// ErrBadIdent is wrapped by every CheckFQN, CheckSemVer and ParseRef
	// failure: a connector FQN, version or reference that breaks its
	// grammar. Its text is not part of the error's message (see identError),
	// so callers quote the message inside their own without stripping it.
	ErrBadIdent = errors.New("invalid connector FQN, version or reference")
)

// identError is a CheckFQN, CheckSemVer or ParseRef failure: its message
// says what is wrong and how to write it; it wraps ErrBadIdent.
type identError struct{ msg string }

func (e *identError) Error() string { return e.msg }
func (e *identError) Unwrap() error { return ErrBadIdent }

// Rule identifiers carried in ValidationError.Rule. They are stable, machine
// readable names of the rule a spec broke.
const (
	ruleSize             = "size_limit"
	ruleJSON             = "json_syntax"
	ruleJSONType         = "json_type"
	ruleJSONDuplicate    = "json_duplicate_key"
	ruleJSONCase         = "json_key_case"
	ruleUnknownField     = "unknown_field"
	ruleRequired         = "required"
	ruleSchemaVersion    = "schema_version"
	ruleFQN              = "fqn"
	ruleSemVer           = "semver"
	ruleToolsEmpty       = "tools_empty"
	ruleOperationsEmpty  = "operations_empty"
	ruleNameEmpty        = "name_empty"
	ruleNameChars        = "name_chars"
	ruleNameReserved     = "name_reserved"
	ruleNameDuplicate    = "name_duplicate"
	ruleHostEmpty        = "host_empty"
	ruleHostScheme       = "host_scheme"
	ruleHostUserinfo     = "host_userinfo"
	ruleHostPath         = "host_path"
	ruleHostQuery        = "host_query"
	ruleHostFragment     = "host_fragment"
	ruleHostWildcard     = "host_wildcard"
	ruleHostPort         = "host_port"
	ruleHostIPv6         = "host_ipv6_brackets"
	ruleHostChars        = "host_chars"
	ruleHostDuplicate    = "host_duplicate"
	ruleMethodToken      = "method_token"
	ruleMethodCase       = "method_case"
	ruleMethodConnect    = "method_connect"
	rulePathAbsolute     = "path_absolute"
	rulePathQuery        = "path_query"
	rulePathDotSegment   = "path_dot_segment"
	rulePathEmptySegment = "path_empty_segment"
	rulePathChars        = "path_chars"
	rulePathTemplate     = "path_template"
	rulePathTemplateLast = "path_template_last"
	rulePathTemplateDup  = "path_template_duplicate"
	rulePathTemplateMix  = "path_template_mixed"
	rulePathLength       = "path_length"
	ruleApproval         = "approval"
	ruleUsage            = "usage"
	ruleIdempotency      = "idempotency"
	ruleWebSocket        = "websocket"
	ruleCredentialKind   = "credential_kind"
	ruleCredentialHeader = "credential_header"
	ruleCredentialQuery  = "credential_query"
	ruleCredentialFormat = "credential_format"
	ruleCredentialSvc    = "credential_service"
	ruleCredentialPlace  = "credential_placement"
	ruleCredentialAlt    = "credential_alternative"
	ruleInputType        = "input_type"
	ruleInputIn          = "input_in"
	ruleInputKeyword     = "input_keyword"
	ruleInputsAndSchema  = "inputs_and_input_schema"
	rulePathVarSchema    = "path_variable_schema"
	ruleSchemaKeyword    = "schema_keyword"
	ruleSchemaValue      = "schema_value"
	ruleSchemaPattern    = "schema_pattern"
	ruleSchemaRef        = "schema_ref"
	ruleSchemaLimit      = "schema_limit"
	ruleSchemaCompile    = "schema_compile"
	ruleVisibility       = "visibility"
	ruleAuditSource      = "audit_source"
	ruleAuditPathVar     = "audit_path_variable"
	ruleAuditRedact      = "audit_redact"
	ruleOperationClash   = "operation_conflict"
	ruleToolClash        = "tool_conflict"
	ruleConnectorDup     = "connector_duplicate"
)

// ValidationError is one problem found in one connector spec. File is the
// spec's origin (a file name), Path a JSON path into it such as
// "$.tools[0].operations[1].hosts[0]", Rule a stable identifier of the rule
// broken (for example "host_scheme", "semver", "operation_conflict") and
// Message a sentence saying what is wrong and how to fix it.
//
// A ValidationError from ParseSpec or Spec.Validate wraps ErrInvalidSpec; one
// from Compile about a clash with another source wraps ErrConflict.
type ValidationError struct {
	File    string
	Path    string
	Rule    string
	Message string

	kind error // sentinel returned by Unwrap; nil means ErrInvalidSpec
}

// Error renders "file: path: message".
func (e *ValidationError) Error() string {
	file := e.File
	if file == "" {
		file = "<spec>"
	}
	if e.Path == "" {
		return file + ": " + e.Message
	}
	return file + ": " + e.Path + ": " + e.Message
}

// Unwrap returns ErrConflict for Compile clashes and ErrInvalidSpec otherwise.
func (e *ValidationError) Unwrap() error {
	if e.kind != nil {
		return e.kind
	}
	return ErrInvalidSpec
}

// problems accumulates ValidationErrors for one file.
type problems struct {
	file string
	errs []error
}

func (p *problems) add(path, rule, msg string) {
	p.errs = append(p.errs, &ValidationError{File: p.file, Path: path, Rule: rule, Message: msg})
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// quote renders s for a message, Go-quoted and cut to a bounded length so a
// hostile input cannot blow up an error message.
func quote(s string) string {
	const max = 120
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}

// idx renders a JSON path element "[i]".
func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
