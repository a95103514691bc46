package admin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/dataplane"
	"github.com/aileronhq/aileron/printable"
)

// invisible are characters that draw nothing or change what is around
// them: the Hangul fillers, a combining grapheme joiner, a variation
// selector, a Khmer inherent vowel, a zero-width space, a direction
// override and a C1 control introducer.
const invisible = "\u3164\u115f\u1160\uffa0\u034f\ufe0f\u17b4\u200b\u202e\u009b"

// shownRaw names the first character of s that should have reached the
// page escaped ("" when none did).
func shownRaw(s string) string {
	for _, r := range s {
		if r != '\n' && r != '\t' && printable.Hidden(r) {
			return fmt.Sprintf("%U", r)
		}
	}
	return ""
}

// TestWebPagesEscapeInvisibleCharacters: in the path, query, a header,
// form fields, tool and operation, the body, who decided and why, every
// invisible character reaches the pending list, the detail page, the raw
// view and the history as an escape.
func TestWebPagesEscapeInvisibleCharacters(t *testing.T) {
	f := newWebFixture(t)
	cookie, _ := f.login(t)
	form := "to=bob" + invisible + "&note=hi" + invisible
	p := dataplane.Preview{Connector: "local://t/mail", Version: "1.0.0", Tool: "mail" + invisible, Operation: "send" + invisible,
		Method: "POST", Host: "mail.example:443", Path: "/v1/send" + invisible, Query: "cc=eve" + invisible, Summary: "Send" + invisible,
		Headers: []dataplane.PreviewHeader{{Name: "X-Note" + invisible, Value: "a" + invisible + "b"}},
		Fields: []dataplane.PreviewField{{Source: "query", Name: "cc", Value: "eve" + invisible},
			{Source: "body", Name: "to", Value: "bob" + invisible, Declared: true}, {Source: "body", Name: "note" + invisible, Value: "hi" + invisible}},
		Body:      &dataplane.PreviewBody{Kind: dataplane.BodyForm, ContentType: "application/x-www-form-urlencoded", Raw: []byte(form)},
		BodyBytes: len(form)}
	pending := seedApproval(t, f.store, "s_7", "pending", p)
	decided := seedApproval(t, f.store, "s_7", "decided", p)
	if err := f.store.Deny(t.Context(), decided, "cli:eve"+invisible, "no"+invisible); err != nil { // the store takes what the admin API would refuse
		t.Fatal(err)
	}
	const escaped = `\u3164\u115f\u1160\uffa0\u034f\ufe0f\u17b4\u200b\u202e\u009b`
	for _, path := range []string{"/", "/approvals/" + pending, "/approvals/" + pending + "/raw", "/approvals/" + decided, "/history"} {
		resp, page := f.do(t, "GET", path, nil, cookie, nil)
		page = strings.ReplaceAll(page, "<wbr>", "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		if r := shownRaw(page); r != "" {
			t.Errorf("GET %s shows %s as itself", path, r)
		}
		if n := strings.Count(page, escaped); n < 2 {
			t.Errorf("GET %s shows the escapes %d times, want at least 2 (target and more):\n%s", path, n, page)
		}
	}
	_, page := f.do(t, "GET", "/approvals/"+pending, nil, cookie, nil)
	for _, want := range []string{"<dd>mail" + escaped + "</dd>", "<dd>send" + escaped + "</dd>", "X-Note" + escaped + "</th><td>a" + escaped + "b</td>",
		"note" + escaped} {
		if !strings.Contains(page, want) {
			t.Errorf("detail page lacks %q", want)
		}
	}
	_, page = f.do(t, "GET", "/approvals/"+decided, nil, cookie, nil)
	for _, want := range []string{"<dd>cli:eve" + escaped + "</dd>", "<dd>no" + escaped + "</dd>"} {
		if !strings.Contains(page, want) {
			t.Errorf("decided page lacks %q", want)
		}
	}
}

// TestLoginNameDropsInvisibleCharacters: the name given at login (recorded
// with every decision) keeps no control, invisible or direction-changing
// character.
func TestLoginNameDropsInvisibleCharacters(t *testing.T) {
	for in, want := range map[string]string{
		"Ada":                          "Ada",
		"  Ada\tLovelace\n":            "Ada Lovelace",
		"Ada" + invisible + "Lovelace": "Ada Lovelace",
		"\u3164":                       "",
		"Grace\u202eecarG \xff Hopper": "Grace ecarG Hopper",
		"李 小龍":                         "李 小龍",
	} {
		if got := loginName(in); got != want {
			t.Errorf("loginName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDecisionSaysWhichCharacter: a decider or denial reason holding a
// character a human would not see as itself is refused, saying which one
// and where, so it can be typed again.
func TestDecisionSaysWhichCharacter(t *testing.T) {
	for _, c := range []struct {
		req  DecideRequest
		deny bool
		want string
	}{
		{DecideRequest{By: "cli:al\u202eice"}, false, `"by" holds U+202E at byte 6`},
		{DecideRequest{By: "cli:alice", Reason: "not \u3164this"}, true, `"reason" holds U+3164 at byte 4`},
		{DecideRequest{By: "cli:alice", Reason: "bad\x1b[2J"}, true, `"reason" holds U+001B at byte 3`},
		// U+FFFD typed as itself is a visible symbol: the override after it is named
		{DecideRequest{By: "cli:alice", Reason: "odd \ufffd then \u202eevil"}, true, `"reason" holds U+202E at byte 13`},
	} {
		_, _, err := checkDecision(c.req, c.deny)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkDecision(%+q) = %v; want it to say %s", c.req, err, c.want)
		}
	}
	if _, _, err := checkDecision(DecideRequest{By: "cli:alice", Reason: "no ❤ here, 日本語 is fine"}, true); err != nil {
		t.Errorf("a plain reason in any script was refused: %v", err)
	}
}
