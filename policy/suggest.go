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
