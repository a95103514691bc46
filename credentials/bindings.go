package credentials

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aileronhq/aileron/policy"
	"github.com/aileronhq/aileron/state"
)

// Binding limits.
const (
	// maxEnvName bounds each name of a binding's Env, in bytes.
	maxEnvName = 128
	// maxEnvList bounds a binding's whole Env list, in bytes.
	maxEnvList = 1024
	// maxQueryName bounds a binding's Query, in bytes.
	maxQueryName = 128
)

// Binding ties a connector to a vault entry: every operation of the
// connector whose spec declares a credential gets this entry, at the spec's
// placement unless Header, Format or Query override it.
type Binding struct {
	// Connector is the connector FQN, e.g. github://acme/aileron-connector-linear.
	Connector string `json:"connector"`
	// Credential names the vault entry.
	Credential string `json:"credential"`
	// Header puts the credential in this header instead of the spec's
	// placement. Not a connection or framing header; not with Query.
	Header string `json:"header,omitempty"`
	// Format renders the header value, with {token} or {key} standing for
	// the secret, e.g. "Bearer {token}" or "{key}".
	Format string `json:"format,omitempty"`
	// Query puts the credential in this query parameter instead.
	Query string `json:"query,omitempty"`
	// Env names the sandbox environment variables (e.g. LINEAR_API_KEY, or
	// "GEMINI_API_KEY,GOOGLE_API_KEY": several are comma-separated) that
	// receive a placeholder value for SDKs that refuse to start without a
	// key; the proxy puts the real credential on the wire.
	Env string `json:"env,omitempty"`
}

// EnvNames returns the variables of Env, in order; nil when there are none.
func (bd Binding) EnvNames() []string {
	if bd.Env == "" {
		return nil
	}
	return strings.Split(bd.Env, ",")
}

// Bindings is the set of bindings, one per connector FQN, kept in the
// bindings table of the control-plane database (only which credential goes
// where: secrets stay in the vault) and in memory. Changes are committed to
// the database first and are visible to Get from the next call.
//
// Call Open before anything else. Methods are safe for concurrent use;
// readers never wait for disk or database I/O. A Bindings must not be copied
// after first use.
type Bindings struct {
	// DB is the control-plane database. Required.
	DB *state.DB

	writeMu sync.Mutex // serialises changes; guards db
	db      *state.DB  // nil until Open
	mu      sync.RWMutex
	byFQN   map[string]Binding // copy-on-write; nil until Open
}

// Open loads the bindings. Failures: no DB wraps state.ErrInvalidArgument; an
// invalid row wraps state.ErrCorruptState, naming the database, the table and the
// connector.
func (b *Bindings) Open(ctx context.Context) error {
	if b.DB == nil {
		return fmt.Errorf("%w: Bindings needs DB (the control-plane database)", state.ErrInvalidArgument)
	}
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	db := b.DB
	byFQN, err := loadBindings(ctx, db, db)
	if err != nil {
		return err
	}
	b.db = db
	b.mu.Lock()
	b.byFQN = byFQN
	b.mu.Unlock()
	db.Follow(state.ChannelCredentials, "bindings", b.Refresh)
	return nil
}

// Refresh reads the bindings again, taking the changes other nodes of a
// fleet made (they also arrive through notifications). Errors are the
// database's.
func (b *Bindings) Refresh(ctx context.Context) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if b.db == nil {
		return fmt.Errorf("%w: bindings", state.ErrNotOpen)
	}
	byFQN, err := loadBindings(ctx, b.db, b.db)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.byFQN = byFQN
	b.mu.Unlock()
	return nil
}

// Bind adds bd, replacing the connector's previous binding. It does not
// check that the credential exists (it may be stored later; until then the
// connector's requests fail closed). Failures: an invalid binding wraps
// state.ErrInvalidArgument and says which field is wrong and how; an Env variable
// already given to another credential wraps state.ErrConflict; before Open,
// state.ErrNotOpen.
func (b *Bindings) Bind(ctx context.Context, bd Binding) error {
	if err := validateBinding(bd); err != nil {
		return err
	}
	return b.change(ctx, func(ctx context.Context, tx *state.Tx, cur map[string]Binding) error {
		for _, env := range bd.EnvNames() {
			for _, o := range cur {
				if slices.Contains(o.EnvNames(), env) && o.Connector != bd.Connector && o.Credential != bd.Credential {
					return fmt.Errorf("%w: env %s already carries the placeholder of credential %s (bound to %s); "+
						"choose another variable name", state.ErrConflict, env, o.Credential, o.Connector)
				}
			}
		}
		cur[bd.Connector] = bd
		return putBinding(ctx, tx, bd, time.Now())
	})
}

// Unbind removes the binding of connector fqn. No binding wraps
// state.ErrNotFound; before Open, state.ErrNotOpen.
func (b *Bindings) Unbind(ctx context.Context, fqn string) error {
	return b.change(ctx, func(ctx context.Context, tx *state.Tx, cur map[string]Binding) error {
		if _, ok := cur[fqn]; !ok {
			return fmt.Errorf("%w: connector %q has no credential binding (see `aileron credential list`)", state.ErrNotFound, fqn)
		}
		delete(cur, fqn)
		if _, err := tx.ExecContext(ctx, `DELETE FROM bindings WHERE connector = ?`, fqn); err != nil {
			return fmt.Errorf("removing the binding of %s: %w", fqn, err)
		}
		return nil
	})
}

// Get returns the binding of connector fqn. Before Open it reports none.
func (b *Bindings) Get(fqn string) (Binding, bool) {
	b.mu.RLock()
	bd, ok := b.byFQN[fqn]
	b.mu.RUnlock()
	return bd, ok
}

// List returns every binding sorted by connector. Before Open it returns
// nil.
func (b *Bindings) List() []Binding {
	b.mu.RLock()
	byFQN := b.byFQN
	b.mu.RUnlock()
	if byFQN == nil {
		return nil
	}
	out := make([]Binding, 0, len(byFQN))
	for _, bd := range byFQN {
		out = append(out, bd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Connector < out[j].Connector })
	return out
}

// change runs fn in a write transaction with the bindings as they stand in
// the database (a fresh map fn may modify to match what it writes), and
// after the commit makes that map current. Before Open it wraps state.ErrNotOpen.
func (b *Bindings) change(ctx context.Context, fn func(ctx context.Context, tx *state.Tx, cur map[string]Binding) error) error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	if b.db == nil {
		return fmt.Errorf("%w: bindings", state.ErrNotOpen)
	}
	var next map[string]Binding
	err := b.db.Write(ctx, func(tx *state.Tx) error {
		cur, err := loadBindings(ctx, tx, b.db)
		if err != nil {
			return err
		}
		next = cur
		if err := fn(ctx, tx, cur); err != nil {
			return err
		}
		return tx.Notify(ctx, state.ChannelCredentials, "bindings")
	})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.byFQN = next
	b.mu.Unlock()
	return nil
}

// validateBinding checks every field of bd. Failures wrap
// state.ErrInvalidArgument.
func validateBinding(bd Binding) error {
	if err := policy.CheckFQN(bd.Connector); err != nil {
		return fmt.Errorf("%w: binding: %v", state.ErrInvalidArgument, err)
	}
	if err := checkCredentialName(bd.Credential); err != nil {
		return fmt.Errorf("binding for %s: %w", bd.Connector, err)
	}
	if msg := placementProblem(bd); msg != "" {
		return fmt.Errorf("%w: binding for %s: %s", state.ErrInvalidArgument, bd.Connector, msg)
	}
	if msg := envsProblem(bd.Env); msg != "" {
		return fmt.Errorf("%w: binding for %s: %s", state.ErrInvalidArgument, bd.Connector, msg)
	}
	return nil
}

// EnvsProblem describes what is wrong with a comma-separated list of
// placeholder variables, as a binding's Env, or returns "": for a client
// to check them before it changes anything.
func EnvsProblem(envs string) string { return envsProblem(envs) }

// envsProblem describes what is wrong with a comma-separated list of Env
// names, or returns "": each must be valid, and none may repeat.
func envsProblem(envs string) string {
	if envs == "" {
		return ""
	}
	if len(envs) > maxEnvList {
		return fmt.Sprintf("env list is %d bytes; the limit is %d", len(envs), maxEnvList)
	}
	seen := map[string]bool{}
	for env := range strings.SplitSeq(envs, ",") {
		if env == "" {
			return fmt.Sprintf("env list %q has an empty name; write names separated by single commas, e.g. GEMINI_API_KEY,GOOGLE_API_KEY", envs)
		}
		if msg := envProblem(env); msg != "" {
			return msg
		}
		if seen[env] {
			return fmt.Sprintf("env %s is named twice", env)
		}
		seen[env] = true
	}
	return ""
}

// placementProblem describes what is wrong with bd's Header, Format and
// Query, or returns "".
func placementProblem(bd Binding) string {
	switch {
	case bd.Header != "" && bd.Query != "":
		return "--header and --query both set; choose one placement"
	case bd.Header != "" && !policy.IsToken(bd.Header):
		return fmt.Sprintf("header %q is not a valid HTTP header name", bd.Header)
	case bd.Header != "" && policy.ReservedHeader(bd.Header):
		return fmt.Sprintf("header %q is a connection or framing header and cannot carry a credential", bd.Header)
	case bd.Query != "" && !isQueryName(bd.Query):
		return fmt.Sprintf("query parameter %q must be 1 to %d letters, digits, '-', '.', '_' or '~'", bd.Query, maxQueryName)
	case bd.Format != "":
		return formatProblem(bd.Format)
	}
	return ""
}

// formatProblem describes what is wrong with a placement format, or
// returns "": it must be printable, hold {token} or {key}, and no other
// placeholder or stray brace.
func formatProblem(f string) string {
	const fix = `; write e.g. "Bearer {token}" or "{key}"`
	n := 0
	for i := 0; i < len(f); i++ {
		switch c := f[i]; {
		case c < 0x20 && c != '\t' || c == 0x7f:
			return fmt.Sprintf("format %q contains a control character", f)
		case c == '}':
			return fmt.Sprintf("format %q has a '}' without '{'", f) + fix
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 {
				return fmt.Sprintf("format %q has a '{' without '}'", f) + fix
			}
			if name := f[i+1 : i+end]; name != "token" && name != "key" {
				return fmt.Sprintf("format %q uses {%s}; only {token} and {key} stand for the secret", f, name)
			}
			n++
			i += end
		}
	}
	if n == 0 {
		return fmt.Sprintf("format %q has no {token} or {key}, so the secret would not be sent", f) + fix
	}
	return ""
}

// envProblem describes what is wrong with an Env name, or returns "".
func envProblem(env string) string {
	if env == "" {
		return ""
	}
	if len(env) > maxEnvName {
		return fmt.Sprintf("env name is %d bytes; the limit is %d", len(env), maxEnvName)
	}
	for i := 0; i < len(env); i++ {
		c := env[i]
		if !(c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Sprintf("env %q must match [A-Z_][A-Z0-9_]*, e.g. LINEAR_API_KEY", env)
		}
	}
	if reservedEnv(env) {
		return fmt.Sprintf("env %s is set by aileron for every sandbox (proxy, CA or API settings); choose another name", env)
	}
	return ""
}

// reservedEnv reports the variables a sandbox's proxy and trust settings
// use, which a placeholder must not replace.
func reservedEnv(env string) bool {
	switch env {
	case "HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE",
		"CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY", "GIT_SSL_CAINFO", "PATH", "HOME":
		return true
	}
	return strings.HasPrefix(env, "AILERON_")
}

// isQueryName reports whether s is 1 to maxQueryName URL-unreserved
// characters.
func isQueryName(s string) bool {
	if s == "" || len(s) > maxQueryName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0) {
			return false
		}
	}
	return true
}
