package actions

import (
	"fmt"
	"strings"

	"github.com/aileronhq/aileron/action"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
)

// subsetOf is the Subset step of inst runs within: the capabilities of
// the action's requirement on the step's connector (none if it lists
// none).
func subsetOf(inst action.Installed, step action.Step) *dataplane.Subset {
	r, _ := inst.Requirement(step.Connector)
	c := r.Caps()
	return &dataplane.Subset{Holder: fmt.Sprintf("action %s (step %s)", inst.Name, step.ID),
		Hosts: c.Hosts, CredentialKinds: c.CredentialKinds}
}

// pinProblem says why inst must not run against pol, "" when every pin
// holds: its own package (pinned by containment) must be active at the
// version and hash it was loaded from, and a connector it pins by hash
// must be active at the version and hash it names. A requirement with a
// placeholder hash is unpinned and not checked.
func pinProblem(pol *policy.Policy, inst action.Installed) string {
	type pkg struct{ version, hash string }
	active := map[string]pkg{}
	for _, o := range pol.Operations() {
		active[o.FQN] = pkg{o.Version, o.Hash}
	}
	bare := func(h string) string { return strings.TrimPrefix(h, "sha256:") }
	for _, r := range inst.Requires {
		want := pkg{r.Version, bare(r.Hash)}
		switch {
		case r.Name == inst.Connector:
			want = pkg{inst.ConnectorVersion, bare(inst.Hash)}
		case !r.Bound():
			continue
		}
		got, ok := active[r.Name]
		if !ok {
			return fmt.Sprintf("action %s pins %s@%s (sha256:%s), which is no longer active; nothing was sent: reinstall it, or an action written for what is installed",
				inst.Name, r.Name, want.version, want.hash)
		}
		if got.version != want.version || bare(got.hash) != want.hash {
			return fmt.Sprintf("action %s pins %s@%s (sha256:%s) but %s@%s (sha256:%s) is active; nothing was sent: reinstall the pinned package, or an action written for what is installed",
				inst.Name, r.Name, want.version, want.hash, r.Name, got.version, bare(got.hash))
		}
	}
	return ""
}
