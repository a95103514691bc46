package main

import (
	"context"
	"strconv"
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
	models := fs.StringArray("models", nil, "the models the session's model calls may ask for: a `LIST` of names or globs, comma-separated or repeated (e.g. claude-sonnet-*,gpt-4o); others are refused 403 model_not_allowed")
	var tokens, requests, bytes budgetFlag
	fs.Var(&tokens, "max-tokens", "budget of input + output tokens, as the providers report them (then 429 budget_exhausted)")
	fs.Var(&requests, "max-requests", "budget of requests forwarded")
	fs.Var(&bytes, "max-bytes", "budget of request bytes sent upstream (head and body)")
	window := fs.Duration("budget-window", 0, "count the budgets in fixed windows of this length from the session's creation, e.g. 1h (default: the session's life)")
	return func() (*policy.Limits, error) {
		var l policy.Limits
		if fs.Changed("models") {
			m, err := policy.ParseModels(strings.Join(*models, ","))
			if err != nil {
				return nil, usagef("--models: %v", err)
			}
			l.Models = m
		}
		for _, b := range []struct {
			name string
			v    budgetFlag
			dst  *int64
		}{{"max-tokens", tokens, &l.MaxTokens}, {"max-requests", requests, &l.MaxRequests}, {"max-bytes", bytes, &l.MaxBytes}} {
			if !fs.Changed(b.name) {
				continue
			}
			n, err := strconv.ParseInt(b.v.text, 10, 64)
			if err != nil || n < 1 || n > policy.MaxBudget {
				return nil, usagef("--%s %s: a budget is a whole number from 1 to %d; leave the flag out for no limit", b.name, b.v.text, policy.MaxBudget)
			}
			*b.dst = n
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

// budgetFlag holds a budget flag's text, which the reader limitFlags
// returns checks: a bad number is then a usage error naming the flag,
// not a parse error of the flag set.
type budgetFlag struct{ text string }

func (b *budgetFlag) String() string     { return b.text }
func (b *budgetFlag) Set(s string) error { b.text = s; return nil }
func (b *budgetFlag) Type() string       { return "N" }

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
