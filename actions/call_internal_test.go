package actions

import (
	"errors"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// internalSpec has an internal operation beside an external one, and a
// tool and a connector whose operations are all internal.
const internalSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/mail", "version": "1.0.0"},
  "tools": [
    {"name": "mail", "operations": [
      {"name": "list", "method": "GET", "path": "/v1/messages", "hosts": ["mail.example.com"]},
      {"name": "send", "method": "POST", "path": "/v1/messages", "hosts": ["mail.example.com"]}
    ]},
    {"name": "vault", "operations": [
      {"name": "raw", "method": "GET", "path": "/v1/raw/{id}", "hosts": ["mail.example.com"]}
    ]}
  ]
}`

const hiddenSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/hidden", "version": "1.0.0"},
  "tools": [{"name": "hidden", "operations": [
    {"name": "poke", "method": "GET", "path": "/v1/poke", "hosts": ["hidden.example.com"]}
  ]}]
}`

// internalPolicy compiles internalSpec and hiddenSpec with mail/send,
// vault/raw and hidden/poke internal.
func internalPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	var srcs []policy.Source
	for _, text := range []string{internalSpec, hiddenSpec} {
		spec, err := policy.ParseSpec("spec.json", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		for i := range spec.Tools {
			for j := range spec.Tools[i].Operations {
				if o := &spec.Tools[i].Operations[j]; o.Name != "list" {
					o.Visibility = policy.VisibilityInternal
				}
			}
		}
		srcs = append(srcs, policy.Source{Spec: spec, Hash: "h", Origin: "spec.json"})
	}
	pol, errs := policy.Compile(srcs, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return pol
}

// TestOperationCallInternalIsUnknown: the sandbox's OperationCall answers
// an internal operation exactly as one that is not installed, and lists
// none; OperationStepCall reaches it and marks the call a step's.
func TestOperationCallInternalIsUnknown(t *testing.T) {
	pol := internalPolicy(t)
	cases := []struct {
		fqn, tool, op string
		want          string // the error of the sandbox's call
	}{
		{"local://test/mail", "mail", "send", `tool mail of connector local://test/mail has no operation "send"; its operations: list`},
		{"local://test/mail", "mail", "nope", `tool mail of connector local://test/mail has no operation "nope"; its operations: list`},
		{"local://test/mail", "vault", "raw", `connector local://test/mail has no tool "vault"; its tools: mail`},
		{"local://test/hidden", "hidden", "poke", `connector "local://test/hidden" is not installed; installed connectors: local://test/mail`},
	}
	for _, tc := range cases {
		_, _, err := OperationCall(pol, tc.fqn, tc.tool, tc.op, nil)
		if !errors.Is(err, state.ErrNotFound) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("OperationCall(%s %s/%s) = %v, want not found: %s", tc.fqn, tc.tool, tc.op, err, tc.want)
		}
		if tc.op == "nope" {
			continue
		}
		c, o, err := OperationStepCall(pol, tc.fqn, tc.tool, tc.op, map[string]any{"id": "1"})
		if err != nil || o == nil || !o.Spec.IsInternal() || !c.Step || c.Operation != o {
			t.Errorf("OperationStepCall(%s %s/%s) = step %v, op %v, err %v; want the internal operation, marked Step", tc.fqn, tc.tool, tc.op, c.Step, o, err)
			continue
		}
		d := pol.Decide(policy.Args{Method: c.Method, Host: o.Hosts[0].Host, Port: o.Hosts[0].Port, Path: c.URL.EscapedPath(), Step: c.Step})
		if d.Op != o {
			t.Errorf("the step's call for %s/%s decides %s %s, not its operation", tc.tool, tc.op, d.Verdict, d.Reason)
		}
	}
	c, _, err := OperationCall(pol, "local://test/mail", "mail", "list", nil)
	if err != nil || c.Step {
		t.Errorf("OperationCall(mail/list) = step %v, err %v; want an external call not marked Step", c.Step, err)
	}
}
