package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestH2RefusalToAClientAwaitingContinueEnds: a client that asks for
// 100-continue and is refused on the request's head sends no body, as
// it waits for a 100 Continue that never comes: its stream ends with the
// refusal (and no 100 follows it) once the client has sent nothing for
// finishGap, not when the body idle time would end the wait (finishBody).
func TestH2RefusalToAClientAwaitingContinueEnds(t *testing.T) {
	e := newEnv(t, func(p *Proxy) { p.Timeouts.BodyIdle = 10 * time.Minute }) // far beyond the test's bound

	tc := e.h2Tunnel(t)
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(tc, tc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	var blk bytes.Buffer
	enc := hpack.NewEncoder(&blk)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "api.example.com"},
		{":path", "/v1/not-an-operation"}, {"content-length", "100000"}, {"expect", "100-continue"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	_ = tc.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound on a hung test, not a timing check
	var statuses []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading frames: %v (statuses so far %q)", err, statuses)
		}
		if f.Header().StreamID != 1 {
			continue
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			statuses = append(statuses, f.PseudoValue("status"))
			if len(statuses) > 1 || statuses[0] != "403" {
				t.Fatalf("the stream's answers are %q; want the refusal (403) alone", statuses)
			}
			if f.StreamEnded() {
				return
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				return
			}
		case *http2.RSTStreamFrame:
			if len(statuses) != 1 {
				t.Fatalf("stream reset (%v) after answers %q", f.ErrCode, statuses)
			}
			return
		}
	}
}

// panickingApprovals is an approval store with a bug: Await panics.
type panickingApprovals struct{}

func (panickingApprovals) Await(context.Context, *ApprovalRequest, time.Duration) (ApprovalResult, error) {
	panic("approval store bug")
}

func (panickingApprovals) Covers(context.Context, string, string, string) error {
	return fmt.Errorf("no actions here")
}

// TestRequestPanicIsLogged: a bug that panics in the request path ends
// that request alone and is logged as an error line (proxy.panic), on
// HTTP/2 as on HTTP/1.1: x/net's server recovers a handler's panic too,
// but reports it to the server's error log, which the proxy discards.
func TestRequestPanicIsLogged(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			var logs syncBuffer
			lg := zerolog.New(&logs)
			e := newEnv(t, func(p *Proxy) { p.Approvals = panickingApprovals{}; p.Log = &lg })
			req, _ := http.NewRequest("DELETE", "https://api.example.com/v1/items/42", nil)
			var err error
			var resp *http.Response
			if h2 {
				resp, err = e.h2Client(t).RoundTrip(req)
			} else {
				resp, err = e.client(t, url.UserPassword("s1", e.token)).Do(req)
			}
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			if err == nil {
				t.Fatalf("the request whose path panicked was answered: %d", resp.StatusCode)
			}
			if got := logs.String(); !strings.Contains(got, `"event":"proxy.panic"`) || !strings.Contains(got, "approval store bug") {
				t.Fatalf("no proxy.panic line for the panic; the log:\n%s", got)
			}
		})
	}
}
