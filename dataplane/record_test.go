package dataplane

import (
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"
)

// listRecorder keeps what the proxy hands it; failing makes Decided refuse.
type listRecorder struct {
	mu        sync.Mutex
	decided   []Record
	completed []Record
	failing   bool
}

func (l *listRecorder) Decided(r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return errors.New("disk full")
	}
	l.decided = append(l.decided, *r)
	return nil
}

func (l *listRecorder) Completed(r *Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.completed = append(l.completed, *r)
}

func TestEveryDecisionIsRecordedBeforeForwarding(t *testing.T) {
	rec := &listRecorder{}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	c := e.client(t, url.UserPassword("s1", e.token))
	for _, u := range []string{"https://api.example.com/v1/items/1", "https://api.example.com/v1/nope"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The outcome is recorded once the handler returns, which may be just
	// after the client has read the response.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.completed)
		rec.mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decided) != 1 || rec.decided[0].Decision != "allow" || rec.decided[0].Operation != "items.get" {
		t.Fatalf("decided before forwarding: %+v", rec.decided)
	}
	if len(rec.completed) != 2 {
		t.Fatalf("completed: %+v", rec.completed)
	}
	allowed, denied := rec.completed[0], rec.completed[1]
	if allowed.AuditID != rec.decided[0].AuditID {
		allowed, denied = denied, allowed
	}
	if allowed.AuditID != rec.decided[0].AuditID {
		t.Error("the decision and its completion carry different audit ids")
	}
	if allowed.UpstreamStatus != 200 || denied.Reason != "no_matching_operation" {
		t.Fatalf("completed: %+v", rec.completed)
	}
}

func TestUnrecordableRequestIsNotForwarded(t *testing.T) {
	rec := &listRecorder{failing: true}
	e := newEnv(t, func(p *Proxy) { p.Recorder = rec })
	resp, err := e.client(t, url.UserPassword("s1", e.token)).Get("https://api.example.com/v1/items/1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := readEnvelope(t, resp.Body); resp.StatusCode != 503 || got.Reason != "audit_unavailable" {
		t.Fatalf("status %d envelope %+v", resp.StatusCode, got)
	}
	if e.hits.Load() != 0 {
		t.Fatal("a request that could not be recorded reached the upstream")
	}
}
