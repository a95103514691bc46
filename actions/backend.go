package actions

import (
	"context"

	"github.com/aileronhq/aileron/dataplane"
)

// Backend is the runner as one session sees it: the MCP server on the
// sandbox API (Streamable HTTP) lists, runs and polls that session's
// actions through it (it is a sandboxapi.ToolBackend), the same single path
// as POST /v1/actions/{name}/run.
func (r *Runner) Backend(sess *dataplane.Session) SessionBackend {
	return SessionBackend{r: r, sess: sess}
}

// SessionBackend is Runner.Backend's answer.
type SessionBackend struct {
	r    *Runner
	sess *dataplane.Session
}

// Actions lists the actions the session may run.
func (b SessionBackend) Actions(context.Context) (List, error) { return b.r.Actions(b.sess), nil }

// RunAction is Runner.RunAttached for the session: the MCP server's tool
// handler passes its context, which the SDK cancels on
// notifications/cancelled.
func (b SessionBackend) RunAction(ctx context.Context, name string, args map[string]any) (Result, error) {
	return b.r.RunAttached(ctx, b.sess, name, args)
}

// ActionStatus is Runner.Result for the session.
func (b SessionBackend) ActionStatus(ctx context.Context, id string) (Result, error) {
	return b.r.Result(ctx, b.sess, id)
}
