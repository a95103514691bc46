package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/state"
)

// Connector FQNs of the realistic specs (Spec "gmail", "linear", …).
const (
	GoogleFQN = "github://acme/aileron-connector-google"
	LinearFQN = "github://acme/aileron-connector-linear"
)

// Clock is a settable clock safe for concurrent use, starting at
// 2026-03-01 12:00 UTC.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at its start time.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Log collects the JSON lines of a zerolog logger for a test to read.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer for the logger.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns every line written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger returns a logger writing to l at every level.
func (l *Log) Logger() *zerolog.Logger {
	z := zerolog.New(l).Level(zerolog.DebugLevel)
	return &z
}

// Root is the repository's root directory.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testkit: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Spec reads one of policy/testdata/specs/NAME.json.
func Spec(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Root(t), "policy", "testdata", "specs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// EditJSON decodes a JSON object, applies fn to its generic form and
// re-encodes it (indented).
func EditJSON(t testing.TB, data []byte, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WithVersion returns the spec with connector.version set to v.
func WithVersion(t testing.TB, data []byte, v string) []byte {
	return EditJSON(t, data, func(m map[string]any) { m["connector"].(map[string]any)["version"] = v })
}

// WriteFile writes data to dir/name (creating parents) and returns the path.
func WriteFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// OpenDB opens the database at path, closed when the test ends.
func OpenDB(t testing.TB, path string) *state.DB {
	t.Helper()
	d, err := state.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("state.Open(context.Background(), %s): %v", path, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// HomeDB opens $HOME/aileron.db of a fresh temporary home and returns both.
func HomeDB(t testing.TB) (home string, db *state.DB) {
	t.Helper()
	home = t.TempDir()
	return home, OpenDB(t, filepath.Join(home, state.FileName))
}

// CountRows returns the number of rows in table.
func CountRows(t testing.TB, db *state.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Mode returns p's permission bits.
func Mode(t testing.TB, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// ItemsFQN is the connector of ItemsSpec.
const ItemsFQN = "local://test/items"

// ItemsSpec is a connector (ItemsFQN) exercising every way
// actions.OperationCall builds a request.
const ItemsSpec = `{
  "schema_version": "aileron.connector.v1",
  "connector": {"fqn": "local://test/items", "version": "1.0.0"},
  "tools": [{"name": "items", "operations": [
    {"name": "get", "method": "GET", "path": "/v1/items/{id}", "hosts": ["api.example.com"]},
    {"name": "list", "method": "GET", "path": "/v1/items", "hosts": ["api.example.com:8443", "alt.example.com"]},
    {"name": "create", "method": "POST", "path": "/v1/projects/{project}/items", "hosts": ["api.example.com"]},
    {"name": "update", "method": "PATCH", "path": "/v1/items/{id}", "hosts": ["api.example.com"]},
    {"name": "replace", "method": "PUT", "path": "/v1/items/{id}/body", "hosts": ["api.example.com"]},
    {"name": "delete", "method": "DELETE", "path": "/v1/items/{id}", "hosts": ["api.example.com"], "approval": "required"},
    {"name": "head", "method": "HEAD", "path": "/v1/items/{id}/meta", "hosts": ["api.example.com"]},
    {"name": "file", "method": "GET", "path": "/v1/files/{path...}", "hosts": ["api.example.com"]},
    {"name": "doc", "summary": "documentation only"}
  ]}]
}`

// Exec runs one statement against db in a write transaction of its own (a
// test repairing or corrupting rows); the stores use state.DB.Write.
func Exec(t testing.TB, db *state.DB, query string, args ...any) error {
	t.Helper()
	return db.Write(t.Context(), func(tx *state.Tx) error {
		_, err := tx.ExecContext(t.Context(), query, args...)
		return err
	})
}

// Events records a store's OnEvent calls (func(audit.EventName,
// map[string]string)), safe for concurrent use.
type Events struct {
	mu      sync.Mutex
	names   []string
	details []map[string]string
}

// Record is the OnEvent hook.
func (e *Events) Record(event audit.EventName, d map[string]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names = append(e.names, string(event))
	e.details = append(e.details, d)
}

// Names returns the event names recorded so far, in order.
func (e *Events) Names() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.names...)
}

// Detail returns the details of the i-th event (negative: from the end).
func (e *Events) Detail(i int) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if i < 0 {
		i += len(e.details)
	}
	return e.details[i]
}

// ProxyCreds splits a session's ProxyURL into its id and token, checking
// it is http://ID:TOKEN@127.0.0.1:9080 (the default proxy address).
func ProxyCreds(t testing.TB, proxyURL string) (id, token string) {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	token, _ = u.User.Password()
	if u.Scheme != "http" || u.Host != "127.0.0.1:9080" || u.Path != "" {
		t.Errorf("ProxyURL %q is not http://ID:TOKEN@127.0.0.1:9080", proxyURL)
	}
	return u.User.Username(), token
}
