package policy

import (
	"cmp"
	"strings"
)

// CompareVersions orders two versions that pass CheckSemVer by SemVer 2.0.0
// precedence (build metadata ignored), breaking ties by plain string order
// so that sorting is total and deterministic: -1, 0 or +1.
func CompareVersions(a, b string) int {
	if c := compareSemver(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// compareSemver orders two strict SemVer strings by precedence.
func compareSemver(a, b string) int {
	a, _, _ = strings.Cut(a, "+")
	b, _, _ = strings.Cut(b, "+")
	coreA, preA, hasPreA := strings.Cut(a, "-")
	coreB, preB, hasPreB := strings.Cut(b, "-")
	if c := compareIdents(strings.Split(coreA, "."), strings.Split(coreB, ".")); c != 0 {
		return c
	}
	switch {
	case !hasPreA && !hasPreB:
		return 0
	case !hasPreA:
		return 1 // a release ranks above its pre-releases
	case !hasPreB:
		return -1
	}
	return compareIdents(strings.Split(preA, "."), strings.Split(preB, "."))
}

// compareIdents compares dot-separated identifier lists: numeric identifiers
// numerically, below alphanumeric ones, which compare in ASCII order; a
// shorter list that is a prefix of the other ranks lower.
func compareIdents(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		xn, yn := allDigits(x), allDigits(y)
		var c int
		switch {
		case xn && yn && len(x) != len(y): // no leading zeros: longer is larger
			c = cmp.Compare(len(x), len(y))
		case xn && !yn:
			c = -1
		case !xn && yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}
