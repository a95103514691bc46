package policy

// Closest returns the candidate nearest to s by edit distance, and whether
// it is near enough to be what s meant (at most a third of the longer
// name's length, and at least one edit away from a different name); it is
// how a misspelt key gets its "did you mean".
func Closest(s string, candidates []string) (string, bool) {
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

// editDistance is the Levenshtein distance between a and b, in bytes
// (names are ASCII); it gives up at 64 bytes, returning a large distance.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 10
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
