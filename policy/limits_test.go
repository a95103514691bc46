package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAllowsModel(t *testing.T) {
	l := Limits{Models: []string{"claude-sonnet-*", "gpt-4o", "models/gemini-?.5-pro", "*-mini"}}
	for _, c := range []struct {
		model string
		want  bool
	}{
		{"claude-sonnet-4-5", true},
		{"claude-sonnet-", true},
		{"claude-opus-4", false},
		{"Claude-sonnet-4", false}, // case-sensitive
		{"gpt-4o", true},
		{"gpt-4o-2024", false}, // the whole name
		{"xgpt-4o", false},
		{"models/gemini-2.5-pro", true},
		{"models/gemini-10.5-pro", false},
		{"o4-mini", true},
		{"", false},                                         // unread: never matches a list
		{"o4-" + strings.Repeat("x", 120) + "-mini", false}, // 128 bytes: maybe cut, so not known
		{"o4-" + strings.Repeat("x", 119) + "-mini", true},
	} {
		if got := l.AllowsModel(c.model); got != c.want {
			t.Errorf("AllowsModel(%q) = %v, want %v", c.model, got, c.want)
		}
	}
	if !(Limits{}).AllowsModel("") {
		t.Error("no model list refuses a model")
	}
}

func TestLimitsCheck(t *testing.T) {
	day := 24 * time.Hour
	for _, c := range []struct {
		name string
		l    Limits
		want string // "" valid
	}{
		{"empty", Limits{}, ""},
		{"all", Limits{Models: []string{" a ", "a", "b*"}, MaxTokens: 1, MaxRequests: 2, MaxBytes: 3, Window: time.Hour}, ""},
		{"negative", Limits{MaxTokens: -1}, "max_tokens -1 is out of range"},
		{"too large", Limits{MaxBytes: MaxBudget + 1}, "max_bytes"},
		{"fractional window", Limits{MaxTokens: 1, Window: 1500 * time.Millisecond}, "whole number of seconds"},
		{"window without budget", Limits{Window: time.Hour}, "needs a budget"},
		{"window beyond ttl", Limits{MaxTokens: 1, Window: 2 * day}, "longer than the session's ttl"},
		{"empty model", Limits{Models: []string{"a", ""}}, "empty entry"},
		{"space in a model", Limits{Models: []string{"a b"}}, "character ' '"},
		{"bracket", Limits{Models: []string{"gpt-[45]"}}, "character '['"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.l.Check(day)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.l.Models != nil && strings.Join(got.Models, ",") != "a,b*" {
					t.Errorf("models = %q; want trimmed and without duplicates", got.Models)
				}
				return
			}
			if !errors.Is(err, ErrBadLimits) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Check = %v; want ErrBadLimits saying %q", err, c.want)
			}
		})
	}
}

func TestLimitsJSON(t *testing.T) {
	l := Limits{Models: []string{"a*"}, MaxTokens: 5, Window: 90 * time.Minute}
	b, err := json.Marshal(l)
	if err != nil || string(b) != `{"models":["a*"],"max_tokens":5,"window":"1h30m0s"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back Limits
	if err := json.Unmarshal(b, &back); err != nil || back.MaxTokens != 5 || back.Window != l.Window || back.Models[0] != "a*" {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	for _, bad := range []string{`{"max_tokens":0}`, `{"max_token":5}`, `{"window":"soon"}`, `{"models":[]}`, `{"max_requests":-2}`} {
		if err := json.Unmarshal([]byte(bad), &back); !errors.Is(err, ErrBadLimits) {
			t.Errorf("Unmarshal(%s) = %v; want ErrBadLimits", bad, err)
		}
	}
}
