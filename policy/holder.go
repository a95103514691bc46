package policy

import "sync/atomic"

// Holder publishes the current *Policy to concurrent readers. Load is
// lock-free; Store replaces the policy atomically, so a request decided
// with one policy is never decided with a mix of two. The zero value holds
// an empty policy that denies everything.
type Holder struct {
	p atomic.Pointer[Policy]
}

// Load returns the current policy, never nil.
func (h *Holder) Load() *Policy {
	if p := h.p.Load(); p != nil {
		return p
	}
	h.p.CompareAndSwap(nil, &Policy{})
	return h.p.Load()
}

// Store publishes p; a nil p publishes an empty policy that denies
// everything.
func (h *Holder) Store(p *Policy) {
	if p == nil {
		p = &Policy{}
	}
	h.p.Store(p)
}
