package proposals

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// The approval values of Edits.Approval.
const (
	ApprovalRequired = policy.ApprovalRequired
	ApprovalNone     = policy.ApprovalNone
)

// Edits are a human's changes to a proposal before accepting it. An empty
// field keeps the proposal's method or template; an empty Approval means
// required for every method but GET and HEAD.
type Edits struct {
	Method   string `json:"method,omitempty"`
	Template string `json:"template,omitempty"`
	Approval string `json:"approval,omitempty"`
}

// RuleFor returns the rule p is accepted as under e. Every bad edit wraps
// state.ErrInvalidArgument and says what to write instead: a method is an
// upper-case HTTP method token other than CONNECT, a template a policy path
// template ("/repos/{id}/issues"), approval "required" or "none".
func RuleFor(p Proposal, e Edits) (Rule, error) {
	r := Rule{Method: p.Method, Template: p.Template}
	if e.Method != "" {
		r.Method = e.Method
	}
	if e.Template != "" {
		r.Template = e.Template
	}
	if msg := methodProblem(r.Method); msg != "" {
		return Rule{}, fmt.Errorf("%w: method %q: %s", state.ErrInvalidArgument, r.Method, msg)
	}
	switch e.Approval {
	case "":
		r.Approval = r.Method != "GET" && r.Method != "HEAD"
	case ApprovalRequired:
		r.Approval = true
	case ApprovalNone:
	default:
		return Rule{}, fmt.Errorf("%w: approval %q is not required or none (required holds each request for a human; "+
			"leave it out for required on every method but GET and HEAD)", state.ErrInvalidArgument, e.Approval)
	}
	if err := checkTemplate(r); err != nil {
		return Rule{}, err
	}
	return r, nil
}

// methodProblem describes what is wrong with an operation method, or
// returns "".
func methodProblem(m string) string {
	switch {
	case !policy.IsToken(m) || len(m) > 32:
		return "not an HTTP method token; write e.g. GET or POST"
	case strings.ToUpper(m) != m:
		return "HTTP methods are case-sensitive; write " + strings.ToUpper(m)
	case m == "CONNECT":
		return "CONNECT cannot be an operation; the proxy handles tunnels itself"
	}
	return ""
}

// checkTemplate validates r's template by the policy's own rules: a spec
// holding r alone must parse.
func checkTemplate(r Rule) error {
	if !strings.HasPrefix(r.Template, "/") {
		return fmt.Errorf("%w: template %q must start with '/', e.g. /repos/{id}/issues", state.ErrInvalidArgument, r.Template)
	}
	op := policy.OperationSpec{Name: "rule", Method: r.Method, Path: r.Template, Hosts: []string{"example.com"}}
	data, err := json.Marshal(policy.Spec{SchemaVersion: policy.SchemaVersion,
		Connector: policy.Connector{FQN: LearnedScheme + "check", Version: "1.0.0"},
		Tools:     []policy.Tool{{Name: "check", Operations: []policy.OperationSpec{op}}}})
	if err != nil {
		return err
	}
	if _, err := policy.ParseSpec("template", data); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "path "); i >= 0 {
			msg = msg[i:]
		}
		return fmt.Errorf("%w: template %q is not a valid path template: %s "+
			"(segments are literal, {name} for one segment, or {name...} for the rest as the last)",
			state.ErrInvalidArgument, r.Template, strings.TrimSpace(msg))
	}
	return nil
}

// MarkAccepted records open proposal id as accepted by who as rule r,
// which went into connector (FQN@VERSION), and writes proposal.accepted. A
// proposal already accepted or rejected wraps ErrDecided (state.ErrConflict).
func (s *Store) MarkAccepted(ctx context.Context, id string, r Rule, connector, who string) (Proposal, error) {
	p, err := s.Get(ctx, id)
	if err != nil {
		return p, err
	}
	rule, err := json.Marshal(r)
	if err != nil {
		return p, err
	}
	at := state.FormatTime(s.now())
	var got string
	found, err := s.DB.WriteRow(ctx, `UPDATE proposals SET state = 'accepted', rule = ?, connector = ?, decided_by = ?, decided_at = ?
		WHERE id = ? AND state = 'open' RETURNING id`, []any{string(rule), connector, who, at, id}, &got)
	if err != nil {
		return p, fmt.Errorf("accepting proposal %s: %w", id, err)
	}
	if !found {
		return p, fmt.Errorf("%w: %s is %s", ErrDecided, id, p.State)
	}
	approval := ApprovalNone
	if r.Approval {
		approval = ApprovalRequired
	}
	s.emit(audit.Event{Name: audit.EventProposalAccepted, Session: p.Session, Method: r.Method, Host: p.Host,
		Port: p.Port, Path: r.Template,
		Details: map[string]string{"proposal_id": id, "session": p.Session, "connector": connector, "method": r.Method,
			"template": r.Template, "approval": approval, "by": who}})
	return s.Get(ctx, id)
}
