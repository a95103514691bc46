package policy

import (
	"slices"
	"strings"
)

// Closest returns the candidate nearest to s by edit distance, and whether
// it is near enough to be what s meant (at most a third of the longer
// name's length, and at least one edit away from a different name); it is
// how a misspelt key gets its "did you mean". But first, a candidate that
// s (of at least 3 bytes) starts is what s meant, cut short ("max_pending"
// for "max_pending_per_session"), when it is the only one or the others
// extend it.
func Closest(s string, candidates []string) (string, bool) {
	var prefixed []string
	for _, c := range candidates {
		if len(s) >= 3 && len(c) > len(s) && c[:len(s)] == s {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) > 0 {
		slices.SortFunc(prefixed, func(a, b string) int { return len(a) - len(b) })
		if allHave(prefixed, func(c string) bool { return strings.HasPrefix(c, prefixed[0]) }) {
			return prefixed[0], true // "max_held": max_held_bytes, of which the others are longer forms
		}
	}
	return closestByEdits(s, candidates)
}

func closestByEdits(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := editDistance(s, c); bestD < 0 || d < bestD || d == bestD && c < best {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return "", false
	}
	limit := max(len(s), len(best)) / 3
	return best, bestD > 0 && bestD <= max(limit, 1)
}

// editDistance is the optimal-string-alignment distance between a and b
// (insertions, deletions, substitutions and swaps of two neighbours), in
// bytes (names are ASCII); it gives up at 64 bytes, returning a large
// distance.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 10
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

func allHave(list []string, ok func(string) bool) bool {
	for _, s := range list {
		if !ok(s) {
			return false
		}
	}
	return true
}
