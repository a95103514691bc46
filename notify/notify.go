// Package notify tells people that a request waits for them: it POSTs
// each approval event to the configured webhooks as JSON, signed with
// HMAC-SHA256 so that a receiver can tell Aileron sent it, and retries a
// failed delivery with backoff. Delivery runs in the background: a
// webhook that is slow or down never holds a request or a decision up.
//
// It imports only the standard library and zerolog.
package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Headers of every delivery. The signature is
// "sha256=" + hex(HMAC-SHA256(secret, timestamp + "." + body)): a receiver
// recomputes it, compares in constant time, and refuses a timestamp too
// far from its clock (a replay).
const (
	HeaderEvent     = "X-Aileron-Event"
	HeaderDelivery  = "X-Aileron-Delivery"
	HeaderTimestamp = "X-Aileron-Timestamp"
	HeaderSignature = "X-Aileron-Signature"
)

// EventTest is the event of a test delivery (Notifier.Test).
const EventTest = "notify.test"

// Hook is one webhook: where to POST and the shared secret that signs.
type Hook struct {
	URL    string
	Secret []byte
}

// Event is what a delivery's body carries: the event name
// (approval.requested, approval.approved, approval.denied,
// approval.expired, notify.test) and what a person needs to act on it.
type Event struct {
	Event      string `json:"event"`
	ApprovalID string `json:"approval_id,omitempty"`
	Session    string `json:"session,omitempty"`
	Connector  string `json:"connector,omitempty"`
	Operation  string `json:"operation,omitempty"`
	// ProposalID names the proposal of a request no operation matches
	// (a session in ask mode); Connector and Operation are then empty.
	ProposalID string    `json:"proposal_id,omitempty"`
	Method     string    `json:"method,omitempty"`
	Host       string    `json:"host,omitempty"`
	Path       string    `json:"path,omitempty"`
	DecidedBy  string    `json:"decided_by,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	ReviewURL  string    `json:"review_url,omitempty"`
	Time       time.Time `json:"time"`
}

// Notifier delivers events to Hooks. Set the fields, then Start; Notify
// and Test may be called from any goroutine; Close stops it.
type Notifier struct {
	Hooks []Hook
	// Client sends the deliveries; nil means one with a 10 s timeout that
	// uses no proxy.
	Client *http.Client
	// Attempts is how often a delivery is tried (5 when 0); the waits in
	// between double from Backoff (1 s when 0). A 2xx answer ends it; a
	// 4xx other than 408 and 429 ends it too (the receiver refused it).
	Attempts int
	Backoff  time.Duration
	// Log receives a line per failed delivery; nil means none.
	Log *zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	queues   []chan delivery // one per hook: a slow receiver delays only itself
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	fallback *http.Client // the nil Client's stand-in, made once
}

// delivery is one event on its way to one hook; its id is the same on
// every attempt, so that a receiver can drop a repeat.
type delivery struct {
	ev Event
	id string
}

// queueLen bounds the events waiting for one hook; beyond it new ones are
// dropped (and logged) rather than held in memory.
const queueLen = 256

// Start begins delivering in the background: one worker per hook.
func (n *Notifier) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.queues = make([]chan delivery, len(n.Hooks))
	for i, h := range n.Hooks {
		q := make(chan delivery, queueLen)
		n.queues[i] = q
		n.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case d := <-q:
					n.deliver(ctx, h, d)
				}
			}
		})
	}
}

// Close stops delivering; events still queued are dropped.
func (n *Notifier) Close() {
	if n.cancel != nil {
		n.cancel()
		n.wg.Wait()
	}
}

// Notify queues ev for every hook; it never blocks.
func (n *Notifier) Notify(ev Event) {
	if n == nil || n.queues == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = n.now()
	}
	for i, q := range n.queues {
		select {
		case q <- delivery{ev: ev, id: deliveryID()}:
		default:
			n.logf("notify.dropped", n.Hooks[i].URL, "the queue of this webhook is full (%d events): %s for %s not sent", queueLen, ev.Event, ev.ApprovalID)
		}
	}
}

// Result is one hook's answer to a test delivery: the HTTP status, or
// why there was none.
type Result struct {
	URL    string `json:"url"`
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Test sends a notify.test event to every hook at once, one attempt each,
// and reports how each answered.
func (n *Notifier) Test(ctx context.Context) []Result {
	ev := Event{Event: EventTest, Time: n.now()}
	out := make([]Result, 0, len(n.Hooks))
	for _, h := range n.Hooks {
		status, err := n.send(ctx, h, delivery{ev: ev, id: deliveryID()})
		r := Result{URL: h.URL, Status: status}
		if err != nil {
			r.Error = err.Error()
		} else if status/100 != 2 {
			r.Error = fmt.Sprintf("answered HTTP %d; a receiver answers 2xx (redirects are not followed)", status)
		}
		out = append(out, r)
	}
	return out
}

// deliver sends d to h until it is taken, refused, or out of attempts.
// A redirect is a refusal: the signed event goes only where configured.
func (n *Notifier) deliver(ctx context.Context, h Hook, d delivery) {
	ev := d.ev
	attempts, wait := n.Attempts, n.Backoff
	if attempts <= 0 {
		attempts = 5
	}
	if wait <= 0 {
		wait = time.Second
	}
	for i := 1; ; i++ {
		status, err := n.send(ctx, h, d)
		switch {
		case err == nil && status/100 == 2:
			return
		case err == nil && (status/100 == 3 || status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests):
			n.logf("notify.refused", h.URL, "the webhook refused %s for %s with HTTP %d; not retried", ev.Event, ev.ApprovalID, status)
			return
		case i >= attempts:
			n.logf("notify.failed", h.URL, "%s for %s not delivered after %d attempts (last: %s)", ev.Event, ev.ApprovalID, i, failure(status, err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func failure(status int, err error) string {
	if err != nil {
		return err.Error()
	}
	return "HTTP " + strconv.Itoa(status)
}

// send makes one signed POST of d to h and returns the answer's status.
// Redirects are not followed; the error never quotes the URL (its path may
// be the receiver's secret).
func (n *Notifier) send(ctx context.Context, h Hook, d delivery) (int, error) {
	ev := d.ev
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(n.now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "aileron-notify")
	req.Header.Set(HeaderEvent, ev.Event)
	req.Header.Set(HeaderDelivery, d.id)
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(h.Secret, ts, body))
	c := *n.client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Sign is the X-Aileron-Signature of body sent at timestamp ts (Unix
// seconds, as sent in X-Aileron-Timestamp) under secret.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (n *Notifier) client() *http.Client {
	if n.Client != nil {
		return n.Client
	}
	n.once.Do(func() {
		n.fallback = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}
	})
	return n.fallback
}

func (n *Notifier) now() time.Time {
	if n.Now != nil {
		return n.Now()
	}
	return time.Now()
}

// logf logs a delivery problem, naming the webhook by scheme and host
// only: a chat service's webhook URL carries its secret in the path.
func (n *Notifier) logf(event, hook, format string, args ...any) {
	if n.Log == nil {
		return
	}
	n.Log.Warn().Str("event", event).Str("webhook", HookName(hook)).Msgf(format, args...)
}

// HookName names a webhook for logs and people: its scheme and host only,
// because a chat service's webhook URL carries its secret in the path.
func HookName(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host + "/…"
	}
	return "(a webhook)"
}

// deliveryID names one delivery: the same on each attempt, another for
// each hook.
func deliveryID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "d_" + hex.EncodeToString(b[:])
}
