package policy

import (
	"fmt"
	"strings"
)

// An authority is the publisher part of a connector FQN: scheme://owner
// (github://acme for github://acme/aileron-connector-google). Publishers'
// signing keys are trusted per authority.

// FQNAuthority returns the authority of a valid FQN: its scheme and owner
// segment. An invalid FQN is an error wrapping ErrBadIdent.
func FQNAuthority(fqn string) (string, error) {
	if err := CheckFQN(fqn); err != nil {
		return "", err
	}
	scheme, rest, _ := strings.Cut(fqn, "://")
	owner, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + owner, nil
}

// CheckAuthority reports whether a is a valid authority: scheme://owner,
// scheme one of github, gitlab, hub, local, and owner a segment as in an
// FQN. Every failure wraps ErrBadIdent; its message is the problem alone.
func CheckAuthority(a string) error {
	const example = `; write scheme://owner, e.g. "github://acme"`
	scheme, owner, ok := strings.Cut(a, "://")
	switch {
	case a == "":
		return &identError{msg: "authority is empty" + example}
	case !ok:
		return &identError{msg: fmt.Sprintf("authority %s has no scheme", quote(a)) + example}
	case owner == "" || strings.Contains(owner, "/"):
		return &identError{msg: fmt.Sprintf("authority %s must be a scheme and one owner, without a repository", quote(a)) + example}
	}
	if !fqnScheme(scheme) {
		return &identError{msg: fmt.Sprintf("authority %s has unknown scheme %s; use github, gitlab, hub or local", quote(a), quote(scheme))}
	}
	if len(a) > maxFQNLen {
		return &identError{msg: fmt.Sprintf("authority is %d bytes long; the limit is %d", len(a), maxFQNLen)}
	}
	if strings.Trim(owner, ".") == "" {
		return &identError{msg: fmt.Sprintf("authority %s has a dot owner %s", quote(a), quote(owner))}
	}
	for i := 0; i < len(owner); i++ {
		if c := owner[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return &identError{msg: fmt.Sprintf("authority %s contains %s; an owner uses only letters, digits, dots, dashes and underscores",
				quote(a), quote(string(rune(c))))}
		}
	}
	return nil
}
