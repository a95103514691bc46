package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// eventKeys is the audit line schema. Changing it breaks every consumer of
// the log: do it on purpose or not at all.
var eventKeys = []string{
	"time", "seq", "prev_hash", "event", "audit_id", "run_id", "parent_audit_id", "session", "client",
	"method", "host", "port", "path", "decision", "reason", "connector",
	"connector_version", "connector_hash", "tool", "operation", "status",
	"upstream_status", "bytes_in", "bytes_out", "duration_ms", "upstream_ms",
	"fields", "details",
}

func keysOf(t *testing.T, ev *Event) []string {
	t.Helper()
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestEventJSONKeys(t *testing.T) {
	full := &Event{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Seq: 7, PrevHash: "ab", Name: "e",
		AuditID: "a", RunID: "ar_x", ParentAuditID: "a_p", Session: "s", Client: "c", Method: "GET", Host: "h", Port: 1, Path: "/p",
		Decision: "allow", Reason: "r", Connector: "github://o/r", ConnectorVersion: "1.0.0",
		ConnectorHash: "sha256:x", Tool: "t", Operation: "o", Status: 200, UpstreamStatus: 201,
		BytesIn: 1, BytesOut: 2, DurationMS: 1.5, UpstreamMS: 0.5,
		Fields: map[string]any{"q": "x"}, Details: map[string]string{"fqn": "f"},
	}
	for _, c := range []struct {
		name string
		ev   *Event
		want []string
	}{
		{"every field", full, eventKeys},
		{"empty event", &Event{}, []string{"time", "seq", "prev_hash", "event"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := slices.Sorted(slices.Values(c.want))
			if got := keysOf(t, c.ev); !slices.Equal(got, want) {
				t.Errorf("keys = %v\nwant   %v", got, want)
			}
		})
	}
}

func TestEventTimeIsRFC3339NanoUTC(t *testing.T) {
	l := openLog(t, t.TempDir(), 0)
	defer l.Close()
	ev := testEvent(1)
	ev.Time = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	if err := l.Write(ev); err != nil {
		t.Fatal(err)
	}
	lines := fileLines(t, mustFiles(t, l.Dir)[0])
	var m map[string]any
	if err := json.Unmarshal(lines[0], &m); err != nil {
		t.Fatal(err)
	}
	if got, want := m["time"], "2026-01-02T02:04:05.123456789Z"; got != want {
		t.Errorf("time = %v, want %v", got, want)
	}
}

// TestLogFieldsFollowTheSchema: the canonical log line carries every key of
// the audit line but the chain's own and the trail-only values.
func TestLogFieldsFollowTheSchema(t *testing.T) {
	var buf bytes.Buffer
	zl := zerolog.New(&buf)
	zl.Log().EmbedObject(&Event{}).Send()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	var want []string
	for _, k := range eventKeys {
		switch k {
		case "time", "seq", "prev_hash", "fields", "details":
		default:
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("log fields = %v\nwant         %v", got, want)
	}
}

func TestEventNamesAreClosed(t *testing.T) {
	seen := map[EventName]bool{}
	for _, n := range EventNames() {
		if seen[n] || n == "" || strings.ContainsAny(string(n), " *") {
			t.Errorf("event name %q is empty, repeated or not a plain name", n)
		}
		seen[n] = true
	}
	for n, want := range map[EventName]EventName{EventProxied: EventCompleted, EventPassthrough: EventPassthroughClosed,
		EventRejected: EventRejected, EventApprovalDenied: EventApprovalDenied} {
		if got := n.Outcome(); got != want {
			t.Errorf("%s.Outcome() = %s, want %s", n, got, want)
		}
	}
}
