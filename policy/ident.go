package policy

import (
	"fmt"
	"strings"
)

// maxNameLen bounds tool, operation, input and audit names.
const maxNameLen = 128

// maxFQNLen bounds a connector FQN.
const maxFQNLen = 512

// checkName validates a tool, operation, input or audit name: non-empty,
// letters, digits, '.', '_', '-', ':' only, not "." or "..", not starting
// with '-' (tool names become file and command names). It returns the
// broken rule and a message, or two empty strings.
func checkName(what, name string) (rule, msg string) {
	if name == "" {
		return ruleNameEmpty, what + " name is empty; give it a name such as \"messages.list\""
	}
	if len(name) > maxNameLen {
		return ruleNameChars, fmt.Sprintf("%s name is %d bytes long; the limit is %d", what, len(name), maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !isNameByte(name[i]) {
			return ruleNameChars, fmt.Sprintf("%s name %s contains %s; use only letters, digits, dots, dashes, underscores or colons",
				what, quote(name), quote(string(rune(name[i]))))
		}
	}
	if name == "." || name == ".." || name[0] == '-' {
		return ruleNameReserved, fmt.Sprintf("%s name %s is not allowed: names must not be \".\" or \"..\" or start with '-'", what, quote(name))
	}
	return "", ""
}

func isNameByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '-' || c == ':'
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// fqnScheme reports whether s is an accepted FQN scheme.
func fqnScheme(s string) bool {
	switch s {
	case "github", "gitlab", "hub", "local":
		return true
	}
	return false
}

// CheckFQN reports whether fqn is a valid connector FQN:
// scheme://owner/repo[/subpath…], scheme one of github, gitlab, hub, local,
// every segment non-empty, made of letters, digits, '.', '_', '-', and not
// "." or "..". Every failure wraps ErrBadIdent; its message is the problem
// alone, ready to quote in the caller's own message.
func CheckFQN(fqn string) error {
	if msg := fqnProblem(fqn); msg != "" {
		return &identError{msg: msg}
	}
	return nil
}

func fqnProblem(fqn string) string {
	const example = `; write scheme://owner/repo[/subpath], e.g. "github://acme/aileron-connector-google"`
	if fqn == "" {
		return "connector FQN is empty" + example
	}
	if len(fqn) > maxFQNLen {
		return fmt.Sprintf("connector FQN is %d bytes long; the limit is %d", len(fqn), maxFQNLen)
	}
	scheme, rest, ok := strings.Cut(fqn, "://")
	if !ok {
		return fmt.Sprintf("connector FQN %s has no scheme", quote(fqn)) + example
	}
	if !fqnScheme(scheme) {
		return fmt.Sprintf("connector FQN %s has unknown scheme %s; use github, gitlab, hub or local", quote(fqn), quote(scheme))
	}
	segs := strings.Split(rest, "/")
	if len(segs) < 2 {
		return fmt.Sprintf("connector FQN %s needs an owner and a repository", quote(fqn)) + example
	}
	for i, seg := range segs {
		if seg == "" {
			return fmt.Sprintf("connector FQN %s has an empty segment (segment %d)", quote(fqn), i+1) + example
		}
		if strings.Trim(seg, ".") == "" {
			return fmt.Sprintf("connector FQN %s has a dot segment %s", quote(fqn), quote(seg))
		}
		for j := 0; j < len(seg); j++ {
			c := seg[j]
			if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
				return fmt.Sprintf("connector FQN %s contains %s; segments use only letters, digits, dots, dashes and underscores",
					quote(fqn), quote(string(rune(c))))
			}
		}
	}
	return ""
}

// CheckSemVer reports whether v is a strict Semantic Version
// MAJOR.MINOR.PATCH[-prerelease][+build] (semver.org 2.0.0): no leading
// zeros in numeric parts, no "v" prefix, no ranges, no "latest". Every
// failure wraps ErrBadIdent; its message is the problem alone.
func CheckSemVer(v string) error {
	if msg := semverProblem(v); msg != "" {
		return &identError{msg: msg}
	}
	return nil
}

func semverProblem(v string) string {
	bad := func(why string) string {
		return fmt.Sprintf("version %s is not strict SemVer (%s); write MAJOR.MINOR.PATCH such as \"1.2.3\" or \"2.0.0-rc.1\"", quote(v), why)
	}
	if v == "" {
		return bad("it is empty")
	}
	if v[0] == 'v' || v[0] == 'V' {
		return bad("no \"v\" prefix")
	}
	rest, build, hasBuild := strings.Cut(v, "+")
	core, pre, hasPre := strings.Cut(rest, "-")
	nums := strings.Split(core, ".")
	if len(nums) != 3 {
		return bad("it needs exactly three numbers")
	}
	for _, n := range nums {
		if !numericIdent(n) {
			return bad(fmt.Sprintf("%s is not a number without leading zeros", quote(n)))
		}
	}
	if hasPre {
		for _, id := range strings.Split(pre, ".") {
			if !semverIdent(id) || (allDigits(id) && !numericIdent(id)) {
				return bad(fmt.Sprintf("bad pre-release identifier %s", quote(id)))
			}
		}
	}
	if hasBuild {
		for _, id := range strings.Split(build, ".") {
			if !semverIdent(id) {
				return bad(fmt.Sprintf("bad build identifier %s", quote(id)))
			}
		}
	}
	return ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// numericIdent: digits without a leading zero (except "0" itself).
func numericIdent(s string) bool {
	return allDigits(s) && (s == "0" || s[0] != '0') && len(s) <= 18
}

func semverIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// isTokenByte reports whether c is an RFC 9110 tchar.
func isTokenByte(c byte) bool {
	if isAlnum(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// IsToken reports whether s is a non-empty RFC 9110 token (a valid method
// or header name).
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenByte(s[i]) {
			return false
		}
	}
	return true
}

// checkMethod validates an operation method: an upper-case RFC 9110 token,
// not CONNECT (tunnels are never an operation).
func checkMethod(m string) (rule, msg string) {
	if !IsToken(m) || len(m) > 32 {
		return ruleMethodToken, fmt.Sprintf("method %s is not an HTTP method token; write e.g. \"GET\" or \"POST\"", quote(m))
	}
	if strings.ToUpper(m) != m {
		return ruleMethodCase, fmt.Sprintf("method %s must be upper-case: write %s (HTTP methods are case-sensitive)", quote(m), quote(strings.ToUpper(m)))
	}
	if m == "CONNECT" {
		return ruleMethodConnect, "method \"CONNECT\" cannot be an operation; the proxy handles tunnels itself"
	}
	return "", ""
}

// ParseRef splits a connector reference FQN@MAJOR.MINOR.PATCH[...] (such
// as "github://acme/aileron-connector-google@1.2.3") at its last '@' and
// checks both halves with CheckFQN and CheckSemVer. Every failure wraps
// ErrBadIdent, quotes the reference and shows the expected form.
func ParseRef(ref string) (fqn, version string, err error) {
	const want = "want FQN@VERSION such as github://acme/gmail@1.2.3 (see `aileron connector list`)"
	i := strings.LastIndex(ref, "@")
	if i < 0 {
		return "", "", &identError{msg: fmt.Sprintf("connector reference %q has no @VERSION; %s", ref, want)}
	}
	fqn, version = ref[:i], ref[i+1:]
	for _, check := range []error{CheckFQN(fqn), CheckSemVer(version)} {
		if check != nil {
			return "", "", &identError{msg: fmt.Sprintf("connector reference %q: %s; %s", ref, check, want)}
		}
	}
	return fqn, version, nil
}
