package controlplane

import (
	"context"

	"github.com/aileronhq/aileron/dataplane"
)

// Backend is the in-process ToolBackend of one session: the MCP server on
// the sandbox API (Streamable HTTP) lists, runs and polls that session's
// actions through the runner, the same single path as POST
// /v1/actions/{name}/run.
func (r *ActionRunner) Backend(sess *dataplane.Session) ToolBackend {
	return sessionBackend{r: r, sess: sess}
}

type sessionBackend struct {
	r    *ActionRunner
	sess *dataplane.Session
}

func (b sessionBackend) Actions(context.Context) (ActionList, error) { return b.r.Actions(b.sess), nil }

func (b sessionBackend) RunAction(ctx context.Context, name string, args map[string]any) (ActionResult, error) {
	return b.r.Run(ctx, b.sess, name, args)
}

func (b sessionBackend) ActionStatus(ctx context.Context, id string) (ActionResult, error) {
	return b.r.Result(ctx, b.sess, id)
}
