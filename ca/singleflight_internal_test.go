package ca

import (
	"crypto/tls"
	"net/netip"
	"runtime"
	"sync"
	"testing"
)

// TestLeafWaitersJoinInflightMint makes the overlap deterministic: a mint is
// already in flight for the host before any caller arrives, so every caller
// must wait for it and none may mint on its own.
func TestLeafWaitersJoinInflightMint(t *testing.T) {
	a, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const host, n = "same.example.com", 100
	leader := &flight{done: make(chan struct{})}
	a.mu.Lock()
	a.inflight[host] = leader
	a.mu.Unlock()

	got := make([]*tls.Certificate, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = a.Leaf(host) })
	}
	// Every caller counts a hit or a miss before it joins the flight (or, were
	// single-flight broken, mints or reads the cache); no channel can signal it.
	for s := a.Stats(); s.Hits+s.Misses < n; s = a.Stats() {
		runtime.Gosched()
	}
	a.runFlight(leader, host, netip.Addr{}, a.now())
	wg.Wait()

	for i := range n {
		if errs[i] != nil || got[i] != leader.cert {
			t.Fatalf("caller %d got (%p, %v), want the in-flight leaf %p", i, got[i], errs[i], leader.cert)
		}
	}
	if s := a.Stats(); s.Mints != 1 || s.Misses != n || s.Hits != 0 {
		t.Errorf("Stats = %+v, want 1 mint and %d misses", s, n)
	}
	if c, err := a.Leaf(host); err != nil || c != leader.cert {
		t.Errorf("after the flight, Leaf = (%p, %v), want the cached leaf %p", c, err, leader.cert)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.inflight) != 0 || a.cache.len() != 1 {
		t.Errorf("inflight=%d cached=%d after the flight, want 0 and 1", len(a.inflight), a.cache.len())
	}
}
