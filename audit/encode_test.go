package audit

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/aileronhq/aileron/printable"
)

// jsonLine is the line encoding/json writes for ev, with the runes
// printable.Hidden names escaped (printable.JSON): the reference the
// fixed-schema encoder must equal byte for byte.
func jsonLine(t testing.TB, ev *Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		t.Fatal(err)
	}
	return printable.JSON(buf.Bytes())
}

func encodeLine(t testing.TB, ev *Event) []byte {
	t.Helper()
	tail, err := appendTail(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	head, err := appendHead(nil, ev.Time, ev.Seq, ev.PrevHash)
	if err != nil {
		t.Fatal(err)
	}
	return append(head, tail...)
}

func TestEncoderMatchesEncodingJSON(t *testing.T) {
	ts := time.Date(2026, 11, 24, 3, 4, 5, 120000000, time.UTC)
	for _, tc := range []struct {
		name string
		ev   Event
	}{
		{"minimal", Event{Time: ts, Seq: 1, Name: EventProxied}},
		{"whole", Event{Time: ts, Seq: 99, PrevHash: "ab", Name: EventProxied, AuditID: "a_1", RunID: "ar_1", ParentAuditID: "a_run", Session: "s1",
			Client: "127.0.0.1:5", Method: "POST", Host: "api.example.com", Port: 443, Path: "/v1/x", Decision: "allow",
			Reason: "operation_allowed", Connector: "c", ConnectorVersion: "1.0.0", ConnectorHash: "sha256:00",
			Tool: "t", Operation: "op", Status: 200, UpstreamStatus: 201, BytesIn: 5, BytesOut: 1 << 40,
			DurationMS: 1.25, UpstreamMS: 0.0000005, Model: "claude-x\u202e", Streamed: true, InputTokens: 7, OutputTokens: 1 << 33,
			CachedTokens: 3, TTFBMS: 12.5,
			Fields: map[string]any{"b": 1, "a": "<&>", "c": []any{true, nil}}, Details: map[string]string{"z": "1", "y": "\u2028"}}},
		{"escapes", Event{Time: ts, Name: "x\"\\\n\r\t\b\f\x00\x1f\x7f", Path: "/\xff\xfe\u2029é<>&"}},
		{"hidden runes", Event{Time: ts, Name: "n", Host: "a\u202eb\u009b2J", Path: "/\u3164\ufe0f\U000e0041日本🙂",
			Details: map[string]string{"k\u2066": "\u009d\u200b"}, Fields: map[string]any{"f": "\u115f"}}},
		{"big floats", Event{Time: ts, Name: "n", DurationMS: 1e21, UpstreamMS: -123456789.125}},
		{"negative numbers", Event{Time: ts, Name: "n", Port: -1, Status: -5, BytesIn: math.MinInt64}},
		{"zone and nanos", Event{Time: time.Date(2026, 1, 2, 3, 4, 5, 1, time.FixedZone("x", 3600)), Name: "n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := encodeLine(t, &tc.ev), jsonLine(t, &tc.ev); !bytes.Equal(got, want) {
				t.Fatalf("fixed-schema encoder differs from encoding/json:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestEncoderRefusesWhatJSONRefuses(t *testing.T) {
	for _, ev := range []Event{
		{Name: "n", DurationMS: math.NaN()},
		{Name: "n", UpstreamMS: math.Inf(1)},
		{Name: "n", Fields: map[string]any{"f": func() {}}},
	} {
		if _, err := appendTail(nil, &ev); err == nil {
			t.Errorf("appendTail(%+v) = nil error, want one", ev)
		}
	}
	if _, err := appendHead(nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), 1, ""); err == nil {
		t.Error("a year past 9999 was encoded")
	}
}

func FuzzEncoderMatchesEncodingJSON(f *testing.F) {
	f.Add("proxy.decided", "/v1/items?x=1", "a\x00\"b", int64(3), 2.5)
	f.Add("\xff", "\u2028\u2029", "<>&", int64(-1), 1e-7)
	f.Fuzz(func(t *testing.T, name, path, host string, n int64, d float64) {
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return
		}
		ev := Event{Time: time.Unix(n%1e10, n%1e9).UTC(), Seq: uint64(n), PrevHash: host, Name: EventName(name),
			Path: path, Host: host, BytesIn: n, DurationMS: d, Fields: map[string]any{path: host}}
		if got, want := encodeLine(t, &ev), jsonLine(t, &ev); !bytes.Equal(got, want) {
			t.Fatalf("differs:\n got %q\nwant %q", got, want)
		}
	})
}

// TestPlainWordEveryByteEveryPlace puts each byte value at each place of
// an otherwise plain word: the word is plain exactly when that byte is.
func TestPlainWordEveryByteEveryPlace(t *testing.T) {
	for v := 0; v < 256; v++ {
		want := v >= 0x20 && v < 0x7f && v != '"' && v != '\\'
		for p := 0; p < 8; p++ {
			w := []byte("abcdefgh")
			w[p] = byte(v)
			if got := plainPrefix(string(w), 0) == 8; got != want {
				t.Errorf("plainWord(%q) = %v, want %v", w, got, want)
			}
		}
	}
	for _, w := range []string{"\x00\x00\x00\x00\x00\x00\x00\x00", "\xff\xff\xff\xff\xff\xff\xff\xff", `""""""""`, `\\\\\\\\`, "~~~~~~~~", "        "} {
		want := w == "~~~~~~~~" || w == "        "
		if got := plainPrefix(w, 0) == 8; got != want {
			t.Errorf("plainWord(%q) = %v, want %v", w, got, want)
		}
	}
}
