package policy

import "strings"

// node is one position in a per-method segment trie. The root stands
// before the first path segment; a child stands after the segment that led
// to it.
type node struct {
	lits   map[string]*node // literal segment (unescaped) → next position
	single *node            // {name}: any one non-empty segment
	multi  *route           // {name...}: the rest of the path
	end    *route           // a pattern that ends at this position
}

// insert adds r under the pattern segs. The caller has ruled out clashes,
// so a slot is never overwritten.
func (n *node) insert(segs []patSeg, r *route) {
	for i, s := range segs {
		switch s.kind {
		case segMulti:
			n.multi = r
			return
		case segSingle:
			if n.single == nil {
				n.single = &node{}
			}
			n = n.single
		default:
			if n.lits == nil {
				n.lits = map[string]*node{}
			}
			child := n.lits[s.lit]
			if child == nil {
				child = &node{}
				n.lits[s.lit] = child
			}
			n = child
		}
		if i == len(segs)-1 {
			n.end = r
		}
	}
}

// view is who looks at the routes: the session's scope (nil = all) and
// whether an action step sends the request. A route outside the view is
// as if it were not installed.
type view struct {
	scope []string
	step  bool
}

// sees reports whether r is in scope and visible: an internal operation
// only to an action step.
func (v view) sees(r *route) bool {
	return inScope(r, v.scope) && (v.step || !r.op.Spec.IsInternal())
}

// inScope reports whether r's connector is in scope (nil scope = all).
func inScope(r *route, scope []string) bool {
	if scope == nil {
		return true
	}
	for _, s := range scope {
		if s == r.op.FQN {
			return true
		}
	}
	return false
}

// match finds the highest-priority route v sees for rest, the path after
// a '/'. At each position a literal beats {name}, which beats {name...};
// the search backtracks, so it visits each trie node at most once.
func (n *node) match(rest string, v view) *route {
	seg, tail, more := strings.Cut(rest, "/")
	if n.lits != nil {
		var child *node
		if strings.IndexByte(seg, '%') < 0 {
			child = n.lits[seg]
		} else {
			var buf [128]byte
			child = n.lits[string(appendUnescaped(buf[:0], seg))]
		}
		if child != nil {
			if r := child.after(tail, more, v); r != nil {
				return r
			}
		}
	}
	if n.single != nil && seg != "" {
		if r := n.single.after(tail, more, v); r != nil {
			return r
		}
	}
	if n.multi != nil && v.sees(n.multi) {
		return n.multi
	}
	return nil
}

// after continues matching at n once a segment has been consumed.
func (n *node) after(tail string, more bool, v view) *route {
	if more {
		return n.match(tail, v)
	}
	if n.end != nil && v.sees(n.end) {
		return n.end
	}
	return nil
}

// params extracts template values from a path the pattern matched. Values
// are unescaped; a {name...} value keeps its '/' separators. It returns nil
// when the pattern has no variables.
func (p *pattern) params(path string) map[string]string {
	if len(p.vars) == 0 {
		return nil
	}
	m := make(map[string]string, len(p.vars))
	rest := path[1:]
	for _, s := range p.segs {
		if s.kind == segMulti {
			m[s.name] = unescape(rest)
			break
		}
		seg, tail, _ := strings.Cut(rest, "/")
		if s.kind == segSingle {
			m[s.name] = unescape(seg)
		}
		rest = tail
	}
	return m
}
