package audit

import (
	"reflect"
	"testing"
)

// TestOCSFCarriesModelCalls: a model call's model, tokens and ttfb, and a
// WebSocket turn, are in the OCSF export (the turn as HTTP activity).
func TestOCSFCarriesModelCalls(t *testing.T) {
	for _, name := range []EventName{EventCompleted, EventTurn} {
		o := OCSF(&Event{Name: name, Method: "POST", Host: "api.anthropic.com", Port: 443, Path: "/v1/messages", Decision: "allow",
			Model: "claude-sonnet-4-5", Streamed: true, InputTokens: 7, OutputTokens: 3, CachedTokens: 2, TTFBMS: 1.5})
		if o["class_uid"] != ocsfHTTPActivity {
			t.Errorf("%s: class %v, want HTTP activity", name, o["class_uid"])
		}
		u, _ := o["unmapped"].(map[string]any)
		got := map[string]any{"model": u["model"], "streamed": u["streamed"], "input_tokens": u["input_tokens"],
			"output_tokens": u["output_tokens"], "cached_tokens": u["cached_tokens"], "ttfb_ms": u["ttfb_ms"]}
		want := map[string]any{"model": "claude-sonnet-4-5", "streamed": true, "input_tokens": int64(7), "output_tokens": int64(3),
			"cached_tokens": int64(2), "ttfb_ms": 1.5}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: unmapped %v, want %v", name, got, want)
		}
	}
}

// TestOCSFTurnsHaveTheirOwnUID: the turns of one connection share its
// audit id, and each still gets a uid of its own.
func TestOCSFTurnsHaveTheirOwnUID(t *testing.T) {
	uid := func(seq uint64) any {
		m, _ := OCSF(&Event{Name: EventTurn, AuditID: "a_1", Seq: seq})["metadata"].(map[string]any)
		return m["uid"]
	}
	if uid(7) == uid(8) || uid(7) != "a_1/connector.proxy.turn/7" {
		t.Fatalf("turn uids %v %v", uid(7), uid(8))
	}
}
