package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrBadLimits is wrapped by every Limits.Check and ParseModels failure.
var ErrBadLimits = errors.New("invalid session limits")

// Limits bounds what one session may spend on model providers: which
// models its model calls may name, and budgets of tokens, requests and
// request bytes over a window (package budgets counts and enforces them).
// A zero budget is no budget; nil Models allows any model.
type Limits struct {
	// Models lists the model names or globs (* any run of characters, ?
	// one character) a model call (an operation with Usage) may ask for.
	Models []string
	// MaxTokens bounds input plus output tokens as the providers report
	// them; MaxRequests the requests forwarded; MaxBytes the request bytes
	// sent upstream (head and body).
	MaxTokens, MaxRequests, MaxBytes int64
	// Window is the length of the fixed windows the budgets count in,
	// aligned to the session's creation; zero means the session's life.
	Window time.Duration
}

// Limits' bounds.
const (
	// MaxBudget bounds each budget (2^53, so JSON carries it exactly).
	MaxBudget = int64(1) << 53
	// MaxModels bounds the entries of Limits.Models; maxModelLen each one.
	MaxModels   = 64
	maxModelLen = 128
)

// IsZero reports whether l limits nothing.
func (l Limits) IsZero() bool {
	return l.Models == nil && l.MaxTokens == 0 && l.MaxRequests == 0 && l.MaxBytes == 0 && l.Window == 0
}

// HasBudget reports whether l has a budget of tokens, requests or bytes.
func (l Limits) HasBudget() bool { return l.MaxTokens > 0 || l.MaxRequests > 0 || l.MaxBytes > 0 }

// Check validates l and returns it with its model list trimmed and
// without duplicates; ttl is the session's lifetime, which a window may
// not exceed. Failures wrap ErrBadLimits and say what to change.
func (l Limits) Check(ttl time.Duration) (Limits, error) {
	for _, b := range []struct {
		name string
		v    int64
	}{{"max_tokens", l.MaxTokens}, {"max_requests", l.MaxRequests}, {"max_bytes", l.MaxBytes}} {
		if b.v < 0 || b.v > MaxBudget {
			return l, fmt.Errorf("%w: %s %d is out of range; use 1 to %d, or leave it out for no limit", ErrBadLimits, b.name, b.v, MaxBudget)
		}
	}
	switch {
	case l.Window < 0 || l.Window%time.Second != 0:
		return l, fmt.Errorf("%w: budget window %v is not a whole number of seconds; write it like 30m, 1h or 24h", ErrBadLimits, l.Window)
	case l.Window > 0 && !l.HasBudget():
		return l, fmt.Errorf("%w: a budget window needs a budget: add --max-tokens, --max-requests or --max-bytes, or leave the window out", ErrBadLimits)
	case l.Window > 0 && ttl > 0 && l.Window > ttl:
		return l, fmt.Errorf("%w: budget window %v is longer than the session's ttl %v; leave the window out for a budget over the session's life", ErrBadLimits, l.Window, ttl)
	}
	if l.Models != nil {
		models, err := checkModels(l.Models)
		if err != nil {
			return l, err
		}
		l.Models = models
	}
	return l, nil
}

// ParseModels reads a --models list: names or globs separated by commas.
// Duplicates are dropped; an empty list or entry is an error.
func ParseModels(list string) ([]string, error) {
	return checkModels(strings.Split(list, ","))
}

// checkModels validates model patterns and returns them trimmed and
// without duplicates.
func checkModels(models []string) ([]string, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("%w: the model list is empty; name at least one model or glob (e.g. claude-sonnet-*), or leave it out to allow any model", ErrBadLimits)
	}
	var out []string
	for _, m := range models {
		m = strings.TrimSpace(m)
		if m == "" {
			return nil, fmt.Errorf("%w: the model list %q has an empty entry; separate names with single commas", ErrBadLimits, strings.Join(models, ","))
		}
		if len(m) > maxModelLen {
			return nil, fmt.Errorf("%w: model %.40q… is longer than %d bytes", ErrBadLimits, m, maxModelLen)
		}
		for _, c := range []byte(m) {
			if !modelByte(c) {
				return nil, fmt.Errorf("%w: model %q has the character %q; a model name or glob uses letters, digits, . _ - : / @ + and the wildcards * and ?", ErrBadLimits, m, c)
			}
		}
		if !containsString(out, m) {
			out = append(out, m)
		}
	}
	if len(out) > MaxModels {
		return nil, fmt.Errorf("%w: %d models listed; the limit is %d (use globs such as claude-*)", ErrBadLimits, len(out), MaxModels)
	}
	return out, nil
}

func modelByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-:/@+*?", c) >= 0
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// AllowsModel reports whether a model call for model may go: Models is
// nil, or model matches one of its entries (case-sensitively, the whole
// name). An empty model (one the proxy could not read) never matches a
// list, nor does one of maxModelLen bytes or more: the proxy cuts a longer
// name to that length, so it could be the start of another.
func (l Limits) AllowsModel(model string) bool {
	if l.Models == nil {
		return true
	}
	if model == "" || len(model) >= maxModelLen {
		return false
	}
	for i := 0; i < len(model); i++ { // a name a glob could match only by its wildcards
		if c := model[i]; !modelByte(c) || c == '*' || c == '?' {
			return false
		}
	}
	for _, pat := range l.Models {
		if globMatch(pat, model) {
			return true
		}
	}
	return false
}

// globMatch matches s against pat, where * matches any run of bytes
// (slashes included) and ? exactly one byte; everything else is literal.
func globMatch(pat, s string) bool {
	// Iterative matching with one backtrack point: linear for one *,
	// O(len(pat)·len(s)) at worst.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pat) && (pat[p] == '?' || pat[p] == s[i]):
			p++
			i++
		case p < len(pat) && pat[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == '*' {
		p++
	}
	return p == len(pat)
}

// limitsJSON is Limits' wire form: budgets as pointers, so that an
// explicit 0 is told from an absent one, and the window as a Go duration.
type limitsJSON struct {
	Models      []string `json:"models,omitempty"`
	MaxTokens   *int64   `json:"max_tokens,omitempty"`
	MaxRequests *int64   `json:"max_requests,omitempty"`
	MaxBytes    *int64   `json:"max_bytes,omitempty"`
	Window      string   `json:"window,omitempty"`
}

// MarshalJSON writes the limits set, the window as a duration string.
func (l Limits) MarshalJSON() ([]byte, error) {
	w := limitsJSON{Models: l.Models}
	for _, b := range []struct {
		v   int64
		dst **int64
	}{{l.MaxTokens, &w.MaxTokens}, {l.MaxRequests, &w.MaxRequests}, {l.MaxBytes, &w.MaxBytes}} {
		if b.v != 0 {
			v := b.v
			*b.dst = &v
		}
	}
	if l.Window != 0 {
		w.Window = l.Window.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the wire form, rejecting unknown fields and a
// budget given as 0 (leave it out for none). It does not Check the rest.
func (l *Limits) UnmarshalJSON(data []byte) error {
	var w limitsJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: limits: %v", ErrBadLimits, err)
	}
	out := Limits{Models: w.Models}
	for _, b := range []struct {
		name string
		v    *int64
		dst  *int64
	}{{"max_tokens", w.MaxTokens, &out.MaxTokens}, {"max_requests", w.MaxRequests, &out.MaxRequests}, {"max_bytes", w.MaxBytes, &out.MaxBytes}} {
		if b.v == nil {
			continue
		}
		if *b.v < 1 {
			return fmt.Errorf("%w: %s %d: a budget is at least 1; leave it out for no limit", ErrBadLimits, b.name, *b.v)
		}
		*b.dst = *b.v
	}
	if w.Models != nil && len(w.Models) == 0 {
		return fmt.Errorf("%w: models is an empty list; name at least one model or glob, or leave it out to allow any model", ErrBadLimits)
	}
	if w.Window != "" {
		d, err := time.ParseDuration(w.Window)
		if err != nil || d <= 0 {
			return fmt.Errorf("%w: window %q is not a positive duration; write it like 30m, 1h or 24h", ErrBadLimits, w.Window)
		}
		out.Window = d
	}
	*l = out
	return nil
}
