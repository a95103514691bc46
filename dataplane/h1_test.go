package dataplane

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aileronhq/aileron/audit"
	"github.com/aileronhq/aileron/policy"
)

// TestClientGoneCancelsUpstream: a client that leaves while its request
// waits on a slow upstream cancels the upstream exchange, and the outcome
// says client_gone, not a 200 nobody received.
func TestClientGoneCancelsUpstream(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	tc := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
	if _, err := io.WriteString(tc, "GET /v1/items/wait HTTP/1.1\r\nHost: api.example.com\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * clientWatchAfter)
	start := time.Now()
	_ = tc.Close()
	waitRecords(t, rec, audit.EventProxied, 1)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	got := rec.completed[0]
	if got.Reason != string(policy.ReasonClientGone) || got.Status != 0 {
		t.Errorf("outcome %s status %d, want client_gone and no status", got.Reason, got.Status)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the upstream exchange ran %v after the client left", d)
	}
}

// TestExpectContinue: a refused request whose client waits for 100
// Continue is answered at once and its connection closed (the body it did
// not send is not waited for); an allowed one gets its 100 Continue, then
// its answer, and the connection stays open.
func TestExpectContinue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		path   string
		status int
		keep   bool
	}{
		{"refused", "/v1/other", http.StatusForbidden, false},
		{"allowed", "/v1/items", http.StatusOK, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			conn := tunnelTLSTo(t, e, "api.example.com", "api.example.com")
			br := bufio.NewReader(conn)
			head := "POST " + tc.path + " HTTP/1.1\r\nHost: api.example.com\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second)) // far below the 30 s body idle timeout
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the head: %v", err)
			}
			if tc.keep {
				if resp.StatusCode != http.StatusContinue {
					t.Fatalf("status %d, want 100 first", resp.StatusCode)
				}
				if _, err := io.WriteString(conn, "{}\r\n"); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != tc.status || resp.Close == tc.keep {
				t.Fatalf("status %d close %v, want %d close %v", resp.StatusCode, resp.Close, tc.status, !tc.keep)
			}
			if !tc.keep {
				if _, err := br.ReadByte(); err != io.EOF && !strings.Contains(err.Error(), "closed") {
					t.Errorf("after the refusal the connection gave %v, want it closed", err)
				}
			}
		})
	}
}
