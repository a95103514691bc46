package action

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Callers test for them with errors.Is.
var (
	// ErrInvalidAction is wrapped by every *ValidationError: a manifest that
	// cannot be parsed, breaks a rule, or does not resolve against its
	// connector spec.
	ErrInvalidAction = errors.New("invalid action manifest")
	// ErrInvalidArgs is wrapped by every Manifest.CheckArgs failure.
	ErrInvalidArgs = errors.New("invalid action arguments")
	// ErrTemplate is wrapped by every Expand failure: a malformed template
	// or a reference to an argument, step or field that is not there.
	ErrTemplate = errors.New("cannot expand template")
	// ErrUnresolved is wrapped by every ResolveStep failure: the step's
	// connector, tool or operation is not in the connector spec.
	ErrUnresolved = errors.New("action step does not resolve")
	// ErrConflict is wrapped by every NewCatalog failure.
	ErrConflict = errors.New("action conflicts with another installed action")
	// ErrExceedsCapabilities is wrapped by a LoadPackage failure for a step
	// whose operation needs a host or credential kind its requirement's
	// capabilities do not list.
	ErrExceedsCapabilities = errors.New("action step exceeds its capabilities")
)

// Rule identifiers carried in ValidationError.Rule: stable, machine-readable
// names of the rule a manifest broke.
const (
	ruleSize          = "size_limit"
	ruleEncoding      = "encoding"
	ruleFrontMatter   = "front_matter"
	ruleTOML          = "toml_syntax"
	ruleUnknownKey    = "unknown_key"
	ruleRequired      = "required"
	ruleName          = "name"
	ruleSemVer        = "semver"
	ruleFQN           = "fqn"
	ruleHash          = "hash"
	ruleStepsEmpty    = "execute_empty"
	ruleStepID        = "step_id"
	ruleDuplicate     = "duplicate"
	ruleValue         = "value"
	ruleTemplate      = "template"
	ruleRequirement   = "requirement_missing"
	ruleInputType     = "input_type"
	ruleDirectory     = "directory"
	ruleResolve       = "resolve"
	ruleCapability    = "capability"
	ruleOutputField   = "output_field"
	rulePin           = "pin"
	maxQuotedMsgBytes = 120
)

// ValidationError is one problem found in one manifest. File is the
// manifest's origin, Key a path into its front matter such as
// "execute[1].inputs.title" or "inputs[0].name" (empty for the file as a
// whole), Rule a stable identifier of the rule broken (for example
// "unknown_key", "semver", "template") and Message a sentence saying what
// is wrong and how to fix it.
//
// Every ValidationError wraps ErrInvalidAction, and also Err when set (for
// example ErrUnresolved for a step LoadPackage could not resolve).
type ValidationError struct {
	File    string
	Key     string
	Rule    string
	Message string
	Err     error
}

// Error renders "file: key: message".
func (e *ValidationError) Error() string {
	file := e.File
	if file == "" {
		file = "<action>"
	}
	if e.Key == "" {
		return file + ": " + e.Message
	}
	return file + ": " + e.Key + ": " + e.Message
}

// Unwrap returns ErrInvalidAction and, when set, Err.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidAction, e.Err}
	}
	return []error{ErrInvalidAction}
}

// problems accumulates ValidationErrors for one file.
type problems struct {
	file string
	errs []error
}

// maxProblems bounds the problems reported for one file, so a hostile
// manifest cannot produce an unbounded error.
const maxProblems = 100

func (p *problems) add(key, rule, msg string) {
	switch {
	case len(p.errs) > maxProblems:
		return
	case len(p.errs) == maxProblems:
		key, rule, msg = "", ruleSize, fmt.Sprintf("more than %d problems; fix these first", maxProblems)
	}
	p.errs = append(p.errs, &ValidationError{File: p.file, Key: key, Rule: rule, Message: msg})
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// quote renders s for a message, Go-quoted and cut to a bounded length so a
// hostile manifest cannot blow up an error message.
func quote(s string) string {
	if len(s) > maxQuotedMsgBytes {
		return strconv.Quote(s[:maxQuotedMsgBytes]) + "…"
	}
	return strconv.Quote(s)
}

// clip bounds a message fragment taken from a hostile document.
func clip(s string) string {
	const max = 300
	if len(s) > max {
		return s[:max] + "…"
	}
	return s
}

// idx renders a key path element "[i]".
func idx(key string, i int) string { return key + "[" + strconv.Itoa(i) + "]" }

// keyPath appends a table key: ".key" for bare keys, `."key"` (quoted,
// bounded) for anything else, so hostile keys cannot smuggle control
// characters into messages.
func keyPath(key, k string) string {
	sep := "."
	if key == "" {
		sep = ""
	}
	if k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return key + sep + k
	}
	return key + sep + quote(k)
}

// list renders names for a message: "a", "b", "c", or "(none)".
func list(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}
