package action

import (
	"errors"
	"strings"
	"testing"
)

const (
	linearFQN = "github://acme/aileron-connector-linear"
	googleFQN = "github://acme/aileron-connector-google"
)

// doc assembles an action.md from front matter and body.
func doc(front, body string) []byte {
	return []byte("+++\n" + strings.TrimLeft(front, "\n") + "+++\n" + body)
}

// minimal is the smallest valid front matter; cases append to it.
const minimal = `
name = "get-issue"
version = "1.0.0"

[[requires.connectors]]
name = "github://acme/aileron-connector-linear"
version = "1.0.0"
hash = "sha256:bound-at-release"

[[execute]]
id = "issue"
connector = "github://acme/aileron-connector-linear"
op = "get-issue"
`

// pinned is minimal as a package holding it must write it: the requirement
// on that package pinned by containment, with the capabilities its step
// uses.
var pinned = strings.Replace(minimal, `hash = "sha256:bound-at-release"`,
	`hash = "self"`+"\n"+`capabilities = ["network:api.linear.test:443", "credential:api_key"]`, 1)

// flatten returns the leaves of an errors.Join tree.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if _, isVE := err.(*ValidationError); !isVE {
			var out []error
			for _, e := range j.Unwrap() {
				out = append(out, flatten(e)...)
			}
			return out
		}
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// validationErrors asserts that every leaf of err is a *ValidationError
// wrapping ErrInvalidAction and returns them.
func validationErrors(t testing.TB, err error) []*ValidationError {
	t.Helper()
	var out []*ValidationError
	for _, e := range flatten(err) {
		var ve *ValidationError
		if !errors.As(e, &ve) || !errors.Is(e, ErrInvalidAction) {
			t.Fatalf("error %v (%T) is not a *ValidationError wrapping ErrInvalidAction", e, e)
		}
		out = append(out, ve)
	}
	return out
}

func mustParse(t testing.TB, data []byte) *Manifest {
	t.Helper()
	m, err := Parse("test/action.md", data)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}
