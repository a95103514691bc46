package notify

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/aileronhq/aileron/internal/testkit"
)

// receiver is a webhook endpoint that answers with the statuses given, in
// turn (the last one again once they run out), and keeps what it got.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []received
	srv      *httptest.Server
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), b})
		st := r.statuses[min(len(r.got), len(r.statuses))-1]
		r.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func waitDeliveries(t *testing.T, r *receiver, n int) []received {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got := r.deliveries(); len(got) >= n {
			return got
		}
	}
	t.Fatalf("%d deliveries, want %d", len(r.deliveries()), n)
	return nil
}

// TestDeliverySigned: a delivery carries the event as JSON and a signature
// a receiver holding the secret can check, over the timestamp and body.
func TestDeliverySigned(t *testing.T) {
	r := newReceiver(t, 204)
	secret := []byte("s3cret")
	n := &Notifier{Hooks: []Hook{{URL: r.srv.URL, Secret: secret}}}
	n.Start()
	defer n.Close()
	n.Notify(Event{Event: "approval.requested", ApprovalID: "ap_1", Method: "POST", Host: "api.example.com", Path: "/v1/send"})
	d := waitDeliveries(t, r, 1)[0]
	var ev Event
	if err := json.Unmarshal(d.body, &ev); err != nil || ev.Event != "approval.requested" || ev.ApprovalID != "ap_1" || ev.Time.IsZero() {
		t.Fatalf("body %s (%v)", d.body, err)
	}
	ts := d.header.Get(HeaderTimestamp)
	if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || time.Since(time.Unix(sec, 0)) > time.Minute {
		t.Fatalf("timestamp %q", ts)
	}
	if want := Sign(secret, ts, d.body); !hmac.Equal([]byte(d.header.Get(HeaderSignature)), []byte(want)) {
		t.Fatalf("signature %q, want %q", d.header.Get(HeaderSignature), want)
	}
	if Sign([]byte("other"), ts, d.body) == d.header.Get(HeaderSignature) || Sign(secret, ts, append(d.body, ' ')) == d.header.Get(HeaderSignature) {
		t.Fatal("the signature does not depend on the secret and the body")
	}
	if d.header.Get(HeaderEvent) != "approval.requested" || d.header.Get(HeaderDelivery) == "" || d.header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", d.header)
	}
}

// TestDeliveryRetries: a receiver that fails (5xx, 429) is tried again,
// with backoff, until it takes the event or the attempts run out; one that
// refuses it (4xx) is not.
func TestDeliveryRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		want     int
	}{
		{"taken on the third try", []int{500, 429, 200}, 3},
		{"never taken", []int{503}, 4},
		{"refused", []int{400}, 1},
		{"gone", []int{410}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReceiver(t, tc.statuses...)
			n := &Notifier{Hooks: []Hook{{URL: r.srv.URL, Secret: []byte("k")}}, Attempts: 4, Backoff: time.Millisecond}
			n.Start()
			n.Notify(Event{Event: "approval.requested", ApprovalID: "ap_2"})
			waitDeliveries(t, r, tc.want)
			time.Sleep(50 * time.Millisecond) // no more come
			n.Close()
			if got := len(r.deliveries()); got != tc.want {
				t.Fatalf("%d attempts, want %d", got, tc.want)
			}
		})
	}
}

// TestNotifyTest: a test delivery reaches every hook at once and says how
// each answered, an unreachable one included.
func TestNotifyTest(t *testing.T) {
	ok, bad := newReceiver(t, 200), newReceiver(t, 500)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	n := &Notifier{Hooks: []Hook{{URL: ok.srv.URL, Secret: []byte("a")}, {URL: bad.srv.URL, Secret: []byte("b")}, {URL: down.URL, Secret: []byte("c")}}}
	res := n.Test(context.Background())
	if len(res) != 3 || res[0].Status != 200 || res[0].Error != "" || res[1].Status != 500 || res[1].Error == "" || res[2].Error == "" {
		t.Fatalf("results %+v", res)
	}
	if d := ok.deliveries(); len(d) != 1 || d[0].header.Get(HeaderEvent) != EventTest {
		t.Fatalf("test delivery %v", d)
	}
}

// TestNotifyNeverBlocks: a receiver that hangs holds no caller up; events
// beyond the queue are dropped, and Close returns.
func TestNotifyNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer srv.Close()
	defer close(hang)
	n := &Notifier{Hooks: []Hook{{URL: srv.URL, Secret: []byte("k")}}, Client: &http.Client{Timeout: 200 * time.Millisecond}, Attempts: 1}
	n.Start()
	start := time.Now()
	for range 3 * queueLen {
		n.Notify(Event{Event: "approval.requested"})
	}
	if time.Since(start) > time.Second {
		t.Fatal("Notify blocked")
	}
	n.Close()
}

// TestRedirectIsNotFollowed: a webhook that answers 307 does not get the
// signed event re-sent wherever it points (another host, plain http); the
// redirect counts as a refusal, and the test says so.
func TestRedirectIsNotFollowed(t *testing.T) {
	elsewhere := newReceiver(t, 200)
	target := strings.Replace(elsewhere.srv.URL, "127.0.0.1", "localhost", 1) + "/stolen"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(hook.Close)
	n := &Notifier{Hooks: []Hook{{URL: hook.URL + "/hook", Secret: []byte("s3cret")}}, Client: &http.Client{}}
	res := n.Test(context.Background())
	if got := elsewhere.deliveries(); len(got) != 0 {
		t.Fatalf("the signed event was re-sent to %s; result %+v", target, res)
	}
	if len(res) != 1 || res[0].Status != http.StatusTemporaryRedirect || !strings.Contains(res[0].Error, "redirects are not followed") {
		t.Fatalf("result %+v", res)
	}
}

// TestSlowHookDoesNotDelayOthers: each webhook has its own worker, so one
// that hangs does not hold another's deliveries up; a delivery keeps its
// id across attempts.
func TestSlowHookDoesNotDelayOthers(t *testing.T) {
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); slow.Close() })
	fast := newReceiver(t, 500, 200)
	n := &Notifier{Hooks: []Hook{{URL: slow.URL, Secret: []byte("a")}, {URL: fast.srv.URL, Secret: []byte("b")}},
		Client: &http.Client{Timeout: time.Second}, Attempts: 3, Backoff: 10 * time.Millisecond}
	n.Start()
	defer n.Close()
	n.Notify(Event{Event: "approval.requested", ApprovalID: "ap_1"})
	start := time.Now()
	got := waitDeliveries(t, fast, 2)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("the healthy webhook got approval.requested after %v, held up by the hanging one", d.Round(10*time.Millisecond))
	}
	if id := got[0].header.Get(HeaderDelivery); id == "" || got[1].header.Get(HeaderDelivery) != id {
		t.Fatalf("a retry carries another delivery id: %q, %q", id, got[1].header.Get(HeaderDelivery))
	}
}

// TestLogsNameHostOnly: a failed delivery is logged naming the webhook by
// scheme and host; its path (a chat service's secret) never reaches the log.
func TestLogsNameHostOnly(t *testing.T) {
	r := newReceiver(t, 400)
	logs := &testkit.Log{}
	log := zerolog.New(logs)
	n := &Notifier{Hooks: []Hook{{URL: r.srv.URL + "/hooks/T0K3N-SECRET", Secret: []byte("k")}}, Log: &log}
	n.Start()
	defer n.Close()
	n.Notify(Event{Event: "approval.requested"})
	waitDeliveries(t, r, 1)
	// The receiver saw the delivery before the notifier read its answer:
	// wait for the line while the notifier still runs (Close would cut the
	// read short, and nothing would be logged).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "notify.refused"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no notify.refused line: %s", logs.String())
		}
	}
	if strings.Contains(logs.String(), "T0K3N-SECRET") || !strings.Contains(logs.String(), r.srv.URL) {
		t.Fatalf("log: %s", logs.String())
	}
}
