package controlplane

import (
	"fmt"
	"strings"

	"github.com/aileronhq/aileron/policy"
)

// compareVersions orders two versions by SemVer 2.0.0 precedence (build
// metadata ignored), breaking ties by plain string order so that sorting is
// total and deterministic. Both are expected to pass policy.CheckSemVer.
func compareVersions(a, b string) int {
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
		xn, yn := isDigits(x), isDigits(y)
		var c int
		switch {
		case xn && yn && len(x) != len(y): // no leading zeros: longer is larger
			c = compareInt(len(x), len(y))
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
	return compareInt(len(a), len(b))
}

// isDigits reports whether s is non-empty and all ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// compareInt orders two ints.
func compareInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseRef splits a strict connector reference FQN@MAJOR.MINOR.PATCH[...],
// validating both halves with the policy package's rules. Failures wrap
// ErrInvalidArgument and show the expected form.
func parseRef(ref string) (fqn, version string, err error) {
	const want = "want FQN@VERSION such as github://acme/gmail@1.2.3 (see `aileron connector list`)"
	i := strings.LastIndex(ref, "@")
	if i < 0 {
		return "", "", fmt.Errorf("%w: connector reference %q has no @VERSION; %s", ErrInvalidArgument, ref, want)
	}
	fqn, version = ref[:i], ref[i+1:]
	for _, check := range []error{policy.CheckFQN(fqn), policy.CheckSemVer(version)} {
		if check != nil {
			return "", "", fmt.Errorf("%w: connector reference %q: %s; %s", ErrInvalidArgument, ref, policyMessage(check), want)
		}
	}
	return fqn, version, nil
}

// policyMessage is the text of a policy.CheckFQN/CheckSemVer error without
// its "invalid connector spec" prefix, for errors about things that are not
// specs.
func policyMessage(err error) string {
	return strings.TrimPrefix(err.Error(), policy.ErrInvalidSpec.Error()+": ")
}
