package dataplane

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aileronhq/aileron/policy"
)

// onlyModel reads a model only from a body every upstream parser reads
// the same way: one JSON object with exactly one top-level key that reads
// as "model" in any case.
func TestOnlyModel(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"claude-ok","max_tokens":5}`, "claude-ok"},
		{` {"messages":[{"model":"inner"}],"model":"claude-ok"} `, "claude-ok"},
		{`{"model":"claude-ok","model":"gpt-other"}`, ""},      // the last key wins in most parsers
		{`{"model":"claude-ok","Model":"gpt-other"}`, ""},      // Go's encoding/json matches keys in any case
		{`{"MODEL":"claude-ok"}`, ""},                          // only the exact key is read
		{`{"mod\u0065l":"claude-ok","model":"gpt-other"}`, ""}, // an escaped key is the same key
		{`{"model":"claude-ok"}{"model":"gpt-other"}`, ""},     // a second value after the object
		{`{"model":"claude-ok"} x`, ""},                        // trailing garbage
		{`{"model":"claude-ok",`, ""},                          // cut short
		{`{"model":7}`, ""},                                    // not a string
		{`["model","claude-ok"]`, ""},                          // not an object
		{`{"max_tokens":5}`, ""},                               // none
		{``, ""},
	} {
		if got := onlyModel([]byte(tc.body)); got != tc.want {
			t.Errorf("onlyModel(%s) = %q; want %q", tc.body, got, tc.want)
		}
	}
}

// readWhole reads the whole body, however long, puts it back whole, and
// counts a model key past any prefix; a body over the bound is unread; the
// memory it books is given back.
func TestReadWholeBody(t *testing.T) {
	p := &Proxy{buffers: &copyBuffers{}}
	pad := strings.Repeat("x", 3<<20)
	for _, tc := range []struct{ body, want string }{
		{`{"model":"claude-ok","pad":"` + pad + `"}`, "claude-ok"},
		{`{"model":"claude-ok","pad":"` + pad + `","model":"gpt-other"}`, ""}, // a second key after 3 MiB
		{`{"model":"claude-ok","pad":"` + strings.Repeat("x", maxCheckedBody) + `"}`, ""},
	} {
		r, _ := http.NewRequest("POST", "https://api.example.com/v1/messages", strings.NewReader(tc.body))
		whole, release, err := p.readWhole(r, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if got := onlyModel(whole); got != tc.want {
			t.Errorf("the model of %d bytes = %q; want %q", len(tc.body), got, tc.want)
		}
		if b, err := io.ReadAll(r.Body); err != nil || !bytes.Equal(b, []byte(tc.body)) {
			t.Errorf("the body put back is %d bytes (%v); want the %d sent", len(b), err, len(tc.body))
		}
		release()
	}
	if p.checking.total != 0 || len(p.checking.bySession) != 0 {
		t.Errorf("%d bytes still booked after release", p.checking.total)
	}
}

// One session's model calls cannot book more than their share of the
// memory for bodies read whole: the one past it is refused 503, and the
// share frees when the others end.
func TestReadWholeMemoryBound(t *testing.T) {
	p := &Proxy{buffers: &copyBuffers{}}
	body := `{"model":"m","pad":"` + strings.Repeat("x", 7<<20) + `"}`
	var releases []func()
	for i := 0; ; i++ {
		r, _ := http.NewRequest("POST", "https://api.example.com/v1/messages", strings.NewReader(body))
		_, release, err := p.readWhole(r, "s1")
		if err != nil {
			if ref := classify(err); ref.Status != http.StatusServiceUnavailable || i != maxCheckedPerSession/(7<<20) {
				t.Fatalf("call %d refused %d %s; want 503 after %d", i, ref.Status, ref.Reason, maxCheckedPerSession/(7<<20))
			}
			break
		}
		releases = append(releases, release)
	}
	r, _ := http.NewRequest("POST", "https://api.example.com/v1/messages", strings.NewReader(body))
	if _, _, err := p.readWhole(r, "s2"); err != nil {
		t.Errorf("another session is refused too: %v", err)
	}
	for _, f := range releases {
		f()
	}
	r, _ = http.NewRequest("POST", "https://api.example.com/v1/messages", strings.NewReader(body))
	if _, _, err := p.readWhole(r, "s1"); err != nil {
		t.Errorf("after the others ended: %v", err)
	}
}

// A session that limits its models is not fooled by a body that names an
// allowed model first and another after it (or in another case, or past
// the first MiB): the call is refused model_not_allowed and nothing is
// sent.
func TestModelListNotFooledByASecondKey(t *testing.T) {
	e, c := budgetEnv(t, policy.Limits{Models: []string{"claude-ok"}}, &ledger{}, nil)
	pad := strings.Repeat("x", 2<<20)
	for _, body := range []string{
		`{"model":"claude-ok","model":"gpt-other","max_tokens":5}`,
		`{"model":"claude-ok","Model":"gpt-other","max_tokens":5}`,
		`{"model":"claude-ok","pad":"` + pad + `","model":"gpt-other"}`,
	} {
		resp := post(t, c, "POST", "https://api.example.com/v1/messages", body)
		expectRefusal(t, resp, http.StatusForbidden, policy.ReasonModelNotAllowed)
	}
	if n := e.hits.Load(); n != 0 {
		t.Errorf("%d refused model calls reached the upstream", n)
	}
}

// A body's announced length is booked before its buffer is allocated, so
// bodies that announce much and send little cannot take memory unbooked.
func TestReadWholeBooksTheAnnouncedLength(t *testing.T) {
	p := &Proxy{buffers: &copyBuffers{}}
	for i := 0; ; i++ {
		r, _ := http.NewRequest("POST", "https://api.example.com/v1/messages", strings.NewReader(`{"model":"m"}`))
		r.ContentLength = maxCheckedBody
		if _, _, err := p.readWhole(r, "s1"); err != nil {
			if i != maxCheckedPerSession/maxCheckedBody {
				t.Errorf("refused after %d; want after %d", i, maxCheckedPerSession/maxCheckedBody)
			}
			return
		}
		if i > 10 {
			t.Fatal("bodies announcing 8 MiB each were never refused")
		}
	}
}

// An answer that broke off counts as unreported even when it reported
// usage before it broke (an Anthropic stream reports its output last).
func TestBrokenAnswerIsUnreported(t *testing.T) {
	x := &exchange{op: &policy.Operation{Spec: &policy.OperationSpec{Usage: policy.UsageAnthropic}}}
	rec := &Record{}
	rec.UpstreamStatus = 200
	tap := &answerTap{x: x, rec: rec, read: usageReader{}.Answer(policy.UsageAnthropic, "text/event-stream")}
	tap.saw([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"))
	tap.brokeOff()
	tap.done()
	if !x.unreported {
		t.Error("an answer that broke off after message_start counts as reported")
	}
}
