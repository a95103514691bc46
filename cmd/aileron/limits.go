package main

import (
	"context"
	"strings"
	"time"

	"github.com/aileronhq/aileron/admin"
	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/policy"
	"github.com/spf13/pflag"
)

// limitsSynopsis is the synopsis of the flags limitFlags adds.
const limitsSynopsis = "[--models LIST] [--max-tokens N] [--max-requests N] [--max-bytes N] [--budget-window D]"

// limitFlags adds the session limits flags to fs; the function it returns
// reads them after Parse (nil: none given). Bad values are usage errors
// that say what to write.
func limitFlags(fs *pflag.FlagSet) func() (*policy.Limits, error) {
	models := fs.String("models", "", "the models the session's model calls may ask for: names or globs, comma-separated (e.g. claude-sonnet-*,gpt-4o); others are refused 403 model_not_allowed")
	tokens := fs.Int64("max-tokens", 0, "budget of input + output tokens, as the providers report them (then 429 budget_exhausted)")
	requests := fs.Int64("max-requests", 0, "budget of requests forwarded")
	bytes := fs.Int64("max-bytes", 0, "budget of request bytes sent upstream (head and body)")
	window := fs.Duration("budget-window", 0, "count the budgets in fixed windows of this length from the session's creation, e.g. 1h (default: the session's life)")
	return func() (*policy.Limits, error) {
		var l policy.Limits
		if fs.Changed("models") {
			m, err := policy.ParseModels(*models)
			if err != nil {
				return nil, usagef("--models: %v", err)
			}
			l.Models = m
		}
		for _, b := range []struct {
			name string
			v    int64
			dst  *int64
		}{{"max-tokens", *tokens, &l.MaxTokens}, {"max-requests", *requests, &l.MaxRequests}, {"max-bytes", *bytes, &l.MaxBytes}} {
			if !fs.Changed(b.name) {
				continue
			}
			if b.v < 1 || b.v > policy.MaxBudget {
				return nil, usagef("--%s %d: a budget is 1 to %d; leave the flag out for no limit", b.name, b.v, policy.MaxBudget)
			}
			*b.dst = b.v
		}
		if fs.Changed("budget-window") {
			if *window <= 0 {
				return nil, usagef("--budget-window %v: want a positive duration such as 1h, or leave it out for the session's life", *window)
			}
			l.Window = *window
		}
		if l.IsZero() {
			return nil, nil
		}
		if _, err := l.Check(0); err != nil { // the daemon checks the window against the ttl
			return nil, usagef("%v", strings.TrimPrefix(err.Error(), policy.ErrBadLimits.Error()+": "))
		}
		return &l, nil
	}
}

// sessionLimits reads the limits flags of a command that creates a
// session unless --session names one (limits then are that session's).
func sessionLimits(read func() (*policy.Limits, error), sessID string) (*policy.Limits, error) {
	l, err := read()
	if err != nil {
		return nil, err
	}
	if l != nil && sessID != "" {
		return nil, usagef("limits are set when a session is created: use them with --new, not --session (session %s keeps its own)", sessID)
	}
	return l, nil
}

// sessionLimits is the approvals page's line of session id's limits and
// what it used of them ("" for a session without limits, or gone).
func (d *daemon) sessionLimits(id string) string {
	info, err := d.sessions.Get(id)
	if err != nil || info.Limits == nil {
		return ""
	}
	info.ProxyURL = ""
	v := admin.SessionView{Info: info}
	if info.Limits.HasBudget() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		r, err := d.budgets.Reports(ctx, []dataplane.Session{{ID: info.ID, Created: info.CreatedAt, Limits: info.Limits}})
		if err != nil {
			return admin.LimitsLine(v) + " (what it used cannot be read now)"
		}
		if u, ok := r[id]; ok {
			v.Usage = &u
		}
	}
	return admin.LimitsLine(v)
}
