package approvals

import (
	"slices"
	"time"
)

// held records that a client waits on approval id until the given time;
// the returned func records that it no longer does.
func (s *Store) held(id string, until time.Time) func() {
	s.mu.Lock()
	if s.holding == nil {
		s.holding = map[string][]time.Time{}
	}
	s.holding[id] = append(s.holding[id], until)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		list := s.holding[id]
		if i := slices.Index(list, until); i >= 0 {
			list = slices.Delete(list, i, i+1)
		}
		if len(list) == 0 {
			delete(s.holding, id)
		} else {
			s.holding[id] = list
		}
	}
}

// Waiting reports how many clients this store holds on approval id right
// now (identical requests share one approval) and when the last of them
// gives up; 0 when none waits (a decision then releases the identical
// request sent again).
func (s *Store) Waiting(id string) (clients int, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.holding[id] {
		clients++
		if t.After(until) {
			until = t
		}
	}
	return clients, until
}
